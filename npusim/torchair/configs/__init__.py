"""torchair's configuration module path (``torchair.configs.compiler_config``)."""
