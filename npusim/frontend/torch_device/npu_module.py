"""``torch.npu``: the device module torch_npu registers, on the simulated machine of the running
session (devices are its dies), with torch_npu's names: devices, ``synchronize``, ``Stream``,
``Event``, ``current_stream``, ``stream``, ``NPUGraph``, ``graph``, ``is_current_stream_capturing``
and ``config``."""

from __future__ import annotations

import contextlib
import types

import torch

from npusim.config.products import PRODUCTS
from npusim.errors import GraphCaptureError, UsageError
from npusim.frontend.graphs import CapturedGraph, capture
from npusim.frontend.host import DeviceEvent, current_process
from npusim.frontend.session import Session, active_system, current_session

_current_device: dict[int, int] = {}  # id(session) -> device index


def _running() -> bool:
    try:
        active_system()
    except UsageError:
        return False
    return True


def is_available() -> bool:
    """Whether an npusim session is running (the simulated devices exist only inside one)."""
    return _running()


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False


def manual_seed_all(seed: int) -> None:
    """torch's RNG hook: npu tensors are made on the host, so there is no device generator."""


def device_count() -> int:
    return current_session().system.die_count if _running() else 0


def _index(device) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        index = device
    else:
        device = torch.device(device)
        if device.type != "npu":
            raise UsageError(f"{device} is not an npu device")
        index = device.index if device.index is not None else current_device()
    if not _running():
        raise UsageError(f"npu:{index}: no npusim session is running in this process, so there is no npu device; run the program "
                         "with `npusim run`, or inside `with npusim.session(config):` (a child process that multiprocessing starts "
                         "has none: run ranks with npusim.pypto.ranks instead)")
    count = device_count()
    if not 0 <= index < count:
        raise UsageError(f"npu:{index} does not exist: the session's config has {count} devices (npu:0..npu:{count - 1})")
    return index


def current_device() -> int:
    """The current device of the running host process (an SPMD rank's own: :func:`npusim.spawn`, which
    torch.multiprocessing.spawn is in a session; npu:0 until it sets one, as in torch), else of the session."""
    if not _running():
        return 0
    process = current_process()
    if process is not None:
        return process.device if process.device is not None else 0
    return _current_device.get(id(current_session()), 0)


def set_device(device) -> None:
    index = _index(device)
    process = current_process()
    if process is not None:
        process.device = index
    else:
        _current_device[id(current_session())] = index


def get_device_name(device=None) -> str:
    _index(device)
    return PRODUCTS.get(current_session().system.spec.product).device_name  # the product's SoC name (config.products)


def synchronize(device=None) -> None:
    """The host waits until all work issued so far has finished (an SPMD rank: the work of its own devices)."""
    current_session().synchronize()


def is_current_stream_capturing() -> bool:
    """Whether work is being captured into a graph (``NPUGraph``, a torchair capture) instead of run."""
    return _running() and current_session().capture is not None


def empty_cache() -> None:
    """Release the allocator's cached blocks: npusim's GM is a bump allocator without a cache (its
    tensors keep their memory to the end of the session), so there is nothing to release."""


def memory_allocated(device=None) -> int:
    """Bytes of the device's GM in use (npusim never frees GM within a session)."""
    return current_session().system.die(_index(device)).memory.used_bytes if _running() else 0


memory_reserved = memory_allocated
"""Bytes the allocator holds: the same as :func:`memory_allocated` (no cache)."""


config = types.SimpleNamespace(allow_internal_format=False)
"""``torch.npu.config``: ``allow_internal_format`` lets torch_npu keep tensors in private formats
(NZ ...); it is recorded and changes nothing, since npusim's npu tensors are ND
(``torch_npu.npu_format_cast``)."""


class Stream:
    """``torch.npu.Stream``: an in-order queue of device work on one device."""

    def __init__(self, device=None, priority: int = 0, *, _stream=None) -> None:
        session = current_session()
        self.session: Session = session
        self.device_index = _index(device)
        self.stream = _stream if _stream is not None else session.new_stream(self.device_index)

    @property
    def device(self) -> torch.device:
        return torch.device("npu", self.device_index)

    def wait_event(self, event: Event) -> None:
        event.wait(self)

    def wait_stream(self, stream: Stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def query(self) -> bool:
        tail = self.stream.tail
        return tail is None or tail.processed

    def synchronize(self) -> None:
        if self.stream.tail is not None:
            self.session.synchronize(self.stream.tail)

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other.stream is self.stream

    def __hash__(self) -> int:
        return id(self.stream)

    def __repr__(self) -> str:
        return f"<torch.npu.Stream device=npu:{self.device_index} {self.stream.name}>"


def current_stream(device=None) -> Stream:
    index = _index(device)
    session = current_session()
    return Stream(index, _stream=session.stream(index))


def default_stream(device=None) -> Stream:
    index = _index(device)
    return Stream(index, _stream=current_session().system.stream(index))


def set_stream(stream: Stream) -> None:
    stream.session.current_streams[stream.device_index] = stream.stream


@contextlib.contextmanager
def stream(stream: Stream | None):
    """Within the block, work for the stream's device is queued on it."""
    if stream is None:
        yield
        return
    streams = stream.session.current_streams
    before = streams.get(stream.device_index)
    streams[stream.device_index] = stream.stream
    try:
        yield
    finally:
        if before is None:
            streams.pop(stream.device_index, None)
        else:
            streams[stream.device_index] = before


class Event:
    """``torch.npu.Event``: a point in a stream's work (times in ms, as torch reports them)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.event = DeviceEvent(current_session())

    def record(self, stream: Stream | None = None) -> None:
        self.event.record((stream or current_stream()).stream)

    def wait(self, stream: Stream | None = None) -> None:
        self.event.wait_on((stream or current_stream()).stream)

    def query(self) -> bool:
        return self.event.query()

    def synchronize(self) -> None:
        self.event.synchronize()

    def elapsed_time(self, end_event: Event) -> float:
        """Simulated milliseconds from this event to ``end_event``."""
        return self.event.elapsed_ps(end_event.event) / 1e9


class NPUGraph:
    """``torch.npu.NPUGraph``: work captured once (``capture_begin`` / ``capture_end`` or
    ``with torch.npu.graph(g):``) and replayed as one launch (``replay``)."""

    def __init__(self) -> None:
        self.graph = CapturedGraph(current_session(), "NPUGraph")
        self._capturing: contextlib.AbstractContextManager[CapturedGraph] | None = None

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        if self._capturing is not None or self.graph.captured:
            raise GraphCaptureError("NPUGraph.capture_begin: this graph is already captured; make a new NPUGraph")
        self._capturing = capture(self.graph)
        self._capturing.__enter__()

    def capture_end(self) -> None:
        if self._capturing is None:
            raise GraphCaptureError("NPUGraph.capture_end without capture_begin")
        capturing, self._capturing = self._capturing, None
        capturing.__exit__(None, None, None)

    def replay(self) -> None:
        self.graph.replay()

    def reset(self) -> None:
        self.graph = CapturedGraph(current_session(), "NPUGraph")


@contextlib.contextmanager
def graph(npu_graph: NPUGraph, pool=None, stream: Stream | None = None, capture_error_mode: str = "global"):
    """Capture the work of the block into ``npu_graph``."""
    npu_graph.capture_begin(pool)
    try:
        yield npu_graph
    finally:
        npu_graph.capture_end()


INDUCTOR_NOT_MODELLED = (
    "torch.compile with the inductor backend (the default) is not modelled on the npu device: inductor generates Triton or C++ "
    "kernels, which npusim cannot simulate; use backend=npusim.torchair.get_npu_backend() (torchair's graph mode, docs/torch.md), "
    "or run the model eagerly"
)


class _NotModelled(type):
    """A class every use of which (an attribute, an instance) is the UsageError of :data:`INDUCTOR_NOT_MODELLED`."""

    def __getattr__(cls, name: str) -> object:
        raise UsageError(INDUCTOR_NOT_MODELLED)

    def __call__(cls, *args: object, **kwargs: object) -> object:
        raise UsageError(INDUCTOR_NOT_MODELLED)


class InductorCodegen(metaclass=_NotModelled):
    """What inductor asks the PrivateUse1 backend's module for (``Scheduling``, ``PythonWrapperCodegen``,
    ``CppWrapperCodegen``, ``WrapperFxCodegen``: torch.utils.backend_registration's custom module
    hooks, read by ``torch._inductor.codegen.common.init_backend_registration``): its first use
    refuses inductor for the npu device, saying what to use instead."""


def module() -> types.ModuleType:
    """The ``torch.npu`` module object."""
    npu = types.ModuleType("torch.npu", __doc__)
    for name in ("is_available", "is_initialized", "_is_in_bad_fork", "manual_seed_all", "device_count", "current_device",
                 "set_device", "get_device_name", "synchronize", "is_current_stream_capturing", "config", "empty_cache",
                 "memory_allocated", "memory_reserved", "Stream", "current_stream",
                 "default_stream", "set_stream", "stream", "Event", "NPUGraph", "graph"):
        setattr(npu, name, globals()[name])
    for name in ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen"):
        setattr(npu, name, InductorCodegen)
    return npu
