"""Hardware configs: the :class:`SystemSpec` schema and :func:`load_config` (YAML files or the built-in
``a2`` / ``a3``, with ``extends`` and ``--set`` overrides, errors located at file:line)."""

from npusim.config.loader import LoadedConfig, builtin_configs, load_config
from npusim.config.schema import SystemSpec

__all__ = ["LoadedConfig", "SystemSpec", "builtin_configs", "load_config"]
