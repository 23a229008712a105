"""``npusim.pypto`` (also as ``import npusim.pypto`` / ``from npusim.pypto import ranks``): the
module ``npusim.frontend.pypto``, PyPTO's names on npusim."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("npusim.frontend.pypto")
