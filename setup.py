"""Build of npusim's compiled core: the fluid bandwidth network (``npusim/engine/flow.py``) compiled to
a C extension by mypyc, from the same mypy-strict source (the metadata is in pyproject.toml).

The network's progressive filling is most of a collective's run; compiled, it runs the same
operations in the same order (the same rates to the bit) several times faster. Without the
extension (a plain checkout on ``PYTHONPATH``) Python imports ``flow.py`` itself: same code.
After editing ``flow.py`` in an editable install, build again (``make .venv/.installed`` does:
it depends on the file), or the extension built from the old source is what runs.
"""

from mypyc.build import mypycify
from setuptools import setup

# checked against the project's mypy settings (pyproject.toml), which name modules other than this one
setup(ext_modules=mypycify(["--no-warn-unused-configs", "npusim/engine/flow.py"], opt_level="3"))
