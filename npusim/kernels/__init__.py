"""The ops the simulator models, each as check -> plan -> lower (:mod:`npusim.kernels.op`).

Importing this package registers the built-in ops in :data:`npusim.config.registry.OPS`.
"""

from npusim.kernels.elementwise import op as _elementwise  # noqa: F401  (registers "cast", "fill")
from npusim.kernels.quant_scatter import op as _quant_scatter  # noqa: F401  (registers "quant_scatter")
from npusim.kernels.quantize import op as _quantize  # noqa: F401  (registers "quantize")
from npusim.kernels.scatter_update import op as _scatter_update  # noqa: F401  (registers "scatter_update")
