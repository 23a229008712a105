"""``npusim.hccl`` (also as ``import npusim.hccl``): the module ``npusim.frontend.hccl.api``, HCCL's
collectives called for every rank at once."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("npusim.frontend.hccl.api")
