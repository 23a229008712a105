"""The ops the simulator models, each as check -> plan -> lower (:mod:`npusim.kernels.op`).

Importing this package registers the built-in ops in :data:`npusim.config.registry.OPS`.
"""

from npusim.kernels.quant_scatter import op as _quant_scatter  # noqa: F401  (registers "quant_scatter")
