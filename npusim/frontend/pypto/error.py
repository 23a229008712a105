"""``pypto.error`` (the framework's error classes, ``python/pypto/error.py``): the framework raises
``FeError`` (frontend), ``PyptoRtError`` (runtime) ..., all ``PyptoError``; on npusim every error a
program meets is an :class:`~npusim.errors.NpusimError`, so each of those names is that family:
``except pypto.error.FeError`` catches what npusim raises for the same mistakes."""

from npusim.errors import NpusimError

PyptoError = NpusimError
PyptoGeneralError = NpusimError
FeError = NpusimError
PyptoRtError = NpusimError
PassError = NpusimError
ParserError = NpusimError

__all__ = ["FeError", "ParserError", "PassError", "PyptoError", "PyptoGeneralError", "PyptoRtError"]
