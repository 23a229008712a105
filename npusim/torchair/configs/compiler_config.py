"""``CompilerConfig``: torchair's options object. npusim keeps the options a program sets (so code
that sets them runs) without acting on them: its one graph mode captures and replays."""

from __future__ import annotations

from types import SimpleNamespace


class CompilerConfig:
    """torchair's compiler options, kept as set (``config.mode``, ``config.debug.graph_dump.type`` ...)."""

    def __init__(self) -> None:
        self.mode = "max-autotune"
        self.debug = SimpleNamespace(graph_dump=SimpleNamespace(type=None))
        self.experimental_config = SimpleNamespace()
