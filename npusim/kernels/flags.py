"""Flags between a core's pipes for kernels that reuse buffers in turn (double buffering): each
flag raised is taken once, the ones left are taken at the program's end."""

from __future__ import annotations

from npusim import isa


class Flags:
    """Flags of double-buffered pipes: ``wait`` consumes one set earlier, ``drain`` consumes what
    is left at the program's end, so every flag raised is taken."""

    def __init__(self, p: isa.CoreProgram) -> None:
        self.p = p
        self.pending: dict[tuple[str, str, int], int] = {}

    def set(self, src: str, dst: str, event: int) -> None:
        self.p.set_flag(src, dst, event)
        key = (src, dst, event)
        self.pending[key] = self.pending.get(key, 0) + 1

    def wait(self, src: str, dst: str, event: int) -> None:
        key = (src, dst, event)
        if self.pending.get(key, 0):
            self.pending[key] -= 1
            self.p.wait_flag(src, dst, event)

    def drain(self) -> None:
        for (src, dst, event), count in sorted(self.pending.items()):
            for _ in range(count):
                self.p.wait_flag(src, dst, event)
        self.pending.clear()
