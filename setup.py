"""Build of npusim's compiled core: the engine's modules (``npusim/engine/``: the fluid bandwidth
network, the event loop, progress counters) compiled to C extensions by mypyc, from the same
mypy-strict sources (the metadata is in pyproject.toml).

The network's progressive filling is most of a collective's run and the event loop runs every
event; compiled, they run the same operations in the same order (the same rates to the bit, the
same event order) several times faster. Without the extensions (a plain checkout on
``PYTHONPATH``) Python imports the ``.py`` files themselves: the same code. After editing one of
them in an editable install, build again (``make`` does: ``.venv/.compiled`` depends on them), or
the extension built from the old source is what runs.
"""

import hashlib
from pathlib import Path

from mypyc.build import mypycify
from setuptools import setup

COMPILED = ["npusim/engine/flow.py", "npusim/engine/loop.py", "npusim/engine/progress.py"]
# The sources' digests, compiled into the extension with them: npusim.engine refuses to run an
# extension built from other sources than the ones beside it (an edit or a pull since the build)
BUILT_FROM = Path("npusim/engine/built_from.py")
digests = {Path(name).name: hashlib.sha256(Path(name).read_bytes()).hexdigest() for name in COMPILED}
BUILT_FROM.write_text(f'"""The SHA-256 of each engine module\'s source, the compiled engine built from them (written by setup.py)."""\n\n'
                      f"SOURCES = {digests!r}\n")

# checked against the project's mypy settings (pyproject.toml), which name modules other than these
# one shared library for them, npusim/engine/compiled__mypyc (a module name of mypyc's choosing otherwise)
extensions = mypycify(["--no-warn-unused-configs", *COMPILED, str(BUILT_FROM)], opt_level="3", group_name="npusim.engine.compiled")
for extension in extensions:
    # without a working C compiler the build goes on without them: Python runs the same modules, slower
    extension.optional = True
setup(ext_modules=extensions)
