"""Graph mode: device work captured once and replayed as one launch (ACL Graph, ``torch.npu.NPUGraph``,
torchair's graph backend).

While a graph is captured, the launch path (:func:`npusim.frontend.aclnn.enqueue`) records how to
build each kernel instead of running it, and the host pays nothing per op. A replay costs the host
one ``host.graph_launch`` per die, and then every recorded kernel is built anew and queued on the
die's current stream, in capture order, on the same tensors (a graph's addresses are fixed). As on
the device, a replay runs no host code of the ops: no argument or index checks, no tiling. A PyPTO
jit kernel called while a graph is captured is recorded as a call (:meth:`CapturedGraph.add_call`):
each replay launches it again, on the same tensors, after the work captured before it.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator

from npusim.errors import GraphCaptureError


class CapturedCall:
    """A launch captured whole (a PyPTO jit kernel's): ``start()`` queues it on the die's default stream."""

    def __init__(self, start: Callable[[], None]) -> None:
        self.start = start


class CapturedGraph:
    """The work of one capture, in capture order: kernels as builders (each returns a fresh list of
    kernels per run) and launches (:class:`CapturedCall`)."""

    def __init__(self, session, name: str) -> None:
        self.session = session
        self.name = name
        self.items: list[tuple[Callable[[], list] | CapturedCall, int]] = []
        self.captured = False

    def add(self, build: Callable[[], list], die: int) -> None:
        self.items.append((build, die))

    def add_call(self, start: Callable[[], None], die: int) -> None:
        """Record a launch that ``start()`` queues on die ``die``'s default stream, at each replay."""
        self.items.append((CapturedCall(start), die))

    def replay(self) -> None:
        """Queue the captured work once more: one host launch per die, then every kernel."""
        if not self.captured:
            raise GraphCaptureError(f"{self.name}: replay() before its capture ended; capture it first (capture_begin/capture_end)")
        session = self.session
        if session.result is not None:
            raise GraphCaptureError(f"{self.name} was captured in a session that has ended; capture it again in the running session")
        host = session.host
        per_die = Counter(die for _, die in self.items)
        launches = {}
        for build, die in self.items:
            launch = launches.get(die)
            if launch is None:
                launch = launches[die] = host.issue(die, f"{self.name} replay", host.graph_replay(), {"kernel launches": per_die[die]})
            if isinstance(build, CapturedCall):
                launch.gate(session.system.stream(die))
                build.start()
                continue
            stream = session.stream(die)
            launch.gate(stream)
            for kernel in build():
                launch.arrow_to(kernel)
                kernel.launch(stream)


@contextlib.contextmanager
def capture(graph: CapturedGraph) -> Iterator[CapturedGraph]:
    """Within the block, device work is recorded into ``graph`` (not run)."""
    session = graph.session
    if session.capture is not None:
        raise GraphCaptureError(f"capture of {graph.name} while {session.capture.name} is being captured: end that capture first")
    session.capture = graph
    try:
        yield graph
    finally:
        session.capture = None
    graph.captured = True
