"""torchair's core module path (``torchair.core.utils``)."""
