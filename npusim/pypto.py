"""``npusim.pypto`` (also as ``import npusim.pypto`` / ``from npusim.pypto import ranks``): the
module ``npusim.frontend.pypto``, PyPTO's names on npusim. Its submodules are the same modules under
both names (``from npusim.pypto.symbolic_scalar import SymInt`` does not load a second copy, which
would also replace the package's ``symbolic_scalar`` function with that module)."""

import importlib
import sys

_PACKAGE = "npusim.frontend.pypto"
sys.modules[__name__] = importlib.import_module(_PACKAGE)
for _name, _module in list(sys.modules.items()):
    if _name.startswith(_PACKAGE + "."):
        sys.modules.setdefault(__name__ + _name[len(_PACKAGE):], _module)
