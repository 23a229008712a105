"""SPMD programs as the framework's distributed tests write them: one worker per rank, each calling
the same jit kernels with its own device's tensors.

The framework's tests start a process per NPU (``multiprocessing.Process``), set up HCCL groups in
each, and have every rank call a ``pypto.frontend.jit`` kernel; the kernel runs once all ranks of
the communication world have called it. Here the ranks are threads of the one simulation session,
run one at a time (deterministically, in the order they were started), behind the names of
``multiprocessing`` that the tests use: ``from npusim.pypto import ranks as mp`` gives
:class:`Process` (``start``, ``join``, ``exitcode``, ``is_alive``), :class:`Queue` and
:func:`set_start_method`.

A rank is the index of its worker in start order; workers started once every earlier one has ended
are the ranks of a new program (a test that runs its ranks again, as a benchmark loop does). Its ``k``-th call of a jit kernel from the host
meets the ``k``-th call of every other rank (:func:`host_call`): the last rank to arrive launches the
kernel once over all of them (PE ``r`` runs rank ``r``'s call, on the die of its tensors), the
others wait for that, and each call returns once the launch is queued (the kernel runs
asynchronously; ``tensor.cpu()`` waits for it). A call outside such a world with CPU tensors runs
on their data, as the framework's SIM run mode does: copied to the npu device, run, copied back. :func:`new_group` names a communication group of
some ranks (what ``torch.distributed.new_group`` plus the HCCL comm name give the tests); a kernel
using that name runs its shmem ops in that group. A jit kernel called from the host outside such a
world launches on the one die its tensors are on.
"""

from __future__ import annotations

import contextvars
import queue
import sys
import threading
import traceback
from collections.abc import Callable, Sequence

from npusim.errors import UsageError
from npusim.frontend.session import Session, current_session
from npusim.frontend.tensor import DeviceTensor


class _Gone(BaseException):
    """Raised in a waiting rank when the program gives up on it (its kernel call can never meet)."""


class World:
    """The ranks of one session: their workers, the groups named for them, the kernel calls that
    have not met yet."""

    _of: dict[int, World] = {}

    def __init__(self, session: Session) -> None:
        self.session = session
        self.ranks: list[Process] = []
        self.groups: dict[str, tuple[int, ...]] = {}
        self.calls: dict[int, dict[int, tuple]] = {}  # call number -> rank -> (kernel, args, kwargs)
        self.met: set[int] = set()  # call numbers whose launch is queued

    def next_program(self) -> None:
        """Start the ranks of a new SPMD program (every rank of the last one has ended): rank
        numbers and kernel calls count from 0 again; the groups stay."""
        self.ranks, self.calls, self.met = [], {}, set()

    @classmethod
    def of(cls, session: Session) -> World:
        world = cls._of.get(id(session))
        if world is None or world.session is not session:
            world = cls._of[id(session)] = cls(session)
        return world


_LOCAL = threading.local()  # the rank (Process) a thread runs, if any


def current_rank() -> Process | None:
    """The worker whose thread this is, if any."""
    return getattr(_LOCAL, "process", None)


class Process:
    """``multiprocessing.Process`` for a rank: ``target(*args, **kwargs)`` runs in a thread of the
    session, one rank at a time (module docstring)."""

    def __init__(self, group=None, target: Callable | None = None, name: str | None = None, args: Sequence = (), kwargs: dict | None = None,
                 *, daemon: bool | None = None) -> None:
        self.target = target
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.name = name or "rank"
        self.daemon = daemon
        self.exitcode: int | None = None
        self.rank = -1
        self.calls = 0  # jit kernel calls from the host so far
        self.waiting_for: int | None = None  # the call number it waits to meet
        self._world: World | None = None
        self._thread: threading.Thread | None = None
        self._go = threading.Semaphore(0)
        self._back = threading.Semaphore(0)
        self._gone = False

    def start(self) -> None:
        """Join the session's world as its next rank (it runs when a rank is joined)."""
        if self._world is not None:
            raise UsageError(f"{self.name}: a rank can be started once")
        self._world = World.of(current_session())
        if self._world.ranks and all(p.exitcode is not None for p in self._world.ranks):
            self._world.next_program()
        self.rank = len(self._world.ranks)
        self._world.ranks.append(self)
        self.name = f"{self.name}-{self.rank}"

    def is_alive(self) -> bool:
        return self._world is not None and self.exitcode is None

    def join(self, timeout: float | None = None) -> None:
        """Run the world's ranks, in turn, until this one has ended."""
        if self._world is None:
            raise UsageError(f"{self.name}: join() before start()")
        world = self._world
        while self.exitcode is None:
            runnable = [p for p in world.ranks if p.exitcode is None and (p.waiting_for is None or p.waiting_for in world.met)]
            if not runnable:  # every rank left waits for a kernel call that other ranks never make
                for process in world.ranks:
                    if process.exitcode is None:
                        process._end_waiting()
                continue
            for process in runnable:
                process._turn()

    def _turn(self) -> None:
        """Let this rank run until it waits or ends."""
        self.waiting_for = None
        if self._thread is None:
            context = contextvars.copy_context()
            self._thread = threading.Thread(target=context.run, args=(self._main,), name=f"npusim {self.name}", daemon=True)
            self._thread.start()
        else:
            self._go.release()
        self._back.acquire()

    def wait_to_meet(self, call: int) -> None:
        """In this rank's thread: wait until the kernel call ``call`` has met (other ranks run meanwhile)."""
        self.waiting_for = call
        self._back.release()
        self._go.acquire()
        if self._gone:
            world = self._require_world()
            missing = sorted(set(range(len(world.ranks))) - set(world.calls.get(call, {})))
            raise UsageError(
                f"rank {self.rank} called a jit kernel (its call #{call + 1} from the host), but rank(s) {missing} ended without "
                "making that call; every rank must call the same kernels in the same order"
            )

    def _require_world(self) -> World:
        if self._world is None:
            raise UsageError(f"{self.name}: not started")
        return self._world

    def _end_waiting(self) -> None:
        self._gone = True
        self._turn()

    def _main(self) -> None:
        _LOCAL.process = self
        try:
            if self.target is not None:
                self.target(*self.args, **self.kwargs)
            self.exitcode = 0
        except BaseException:  # a worker is user code; a failing process prints its traceback and exits 1
            traceback.print_exc(file=sys.stderr)
            self.exitcode = 1
        finally:
            self.waiting_for = None
            self._back.release()


class Queue:
    """``multiprocessing.Queue`` between ranks (threads): put, get, get_nowait, empty, qsize."""

    def __init__(self, maxsize: int = 0) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize)

    def put(self, item, block: bool = True, timeout: float | None = None) -> None:
        self._queue.put(item, block, timeout)

    def get(self, block: bool = True, timeout: float | None = None):
        return self._queue.get(block, timeout)

    def get_nowait(self):
        return self._queue.get_nowait()

    def empty(self) -> bool:
        return self._queue.empty()

    def qsize(self) -> int:
        return self._queue.qsize()


def set_start_method(method: str, force: bool = False) -> None:
    """``multiprocessing.set_start_method``: ranks are threads here, so any method is the same."""


def new_group(ranks: Sequence[int], name: str | None = None) -> str:
    """A communication group of ``ranks`` (world ranks, in group-rank order); returns its name,
    which shmem ops of kernels take as their group. Asking again for the same ranks gives the same name."""
    world = World.of(current_session())
    members = tuple(ranks)
    if not members or any(not isinstance(r, int) or isinstance(r, bool) or r < 0 for r in members) or len(set(members)) != len(members):
        raise UsageError(f"new_group(ranks={list(ranks)!r}): the ranks must be distinct non-negative ints")
    for known, group in world.groups.items():
        if group == members and name in (None, known):
            return known
    name = name or "hccl_" + "_".join(map(str, members))
    if world.groups.get(name, members) != members:
        raise UsageError(f"new_group: the group name {name!r} is already used for ranks {list(world.groups[name])}")
    world.groups[name] = members
    return name


# -- jit kernels called from the host ------------------------------------------------------------------


def host_call(kernel, args: tuple, kwargs: dict) -> None:
    """A jit kernel called from a host program (module docstring)."""
    from npusim.frontend.launch import launch

    if current_rank() is None and any(_is_cpu_tensor(v) for v in (*args, *kwargs.values())):
        _run_on_host_data(kernel, args, kwargs)
        return
    values = tuple(_device_value(v) for v in args)
    named = {k: _device_value(v) for k, v in kwargs.items()}
    process = current_rank()
    if process is None:
        dies = _dies_of(kernel, values, named)
        if len(dies) > 1:
            raise UsageError(f"jit kernel {kernel.__name__}: called from the host, it runs on one device, but its tensors are on "
                             f"dies {sorted(dies)}; call it from each rank of an SPMD world (npusim.pypto.ranks) to run on several")
        die = dies.pop() if dies else 0

        def start() -> None:
            launch(_spmd(kernel.__name__), 1, args=lambda pe: (kernel, named, *values), group_dies=[die])

        capture = current_session().capture
        if capture is not None:  # a graph is being captured: the launch runs at each replay
            capture.add_call(start, die)
        else:
            start()
        return
    world = process._require_world()
    call = process.calls
    process.calls += 1
    world.calls.setdefault(call, {})[process.rank] = (kernel, values, named)
    if len(world.calls[call]) < len(world.ranks):
        process.wait_to_meet(call)
        return
    calls = world.calls[call]
    first = calls[0][0]
    for rank, (other, _, _) in sorted(calls.items()):
        if getattr(other.function, "__code__", None) is not getattr(first.function, "__code__", None):
            raise UsageError(f"rank {rank}'s jit call #{call + 1} is {other.__name__}, rank 0's is {first.__name__}; every rank must "
                             "call the same kernels in the same order")
    rank_dies: list[int] = []
    for rank in range(len(world.ranks)):
        found = _dies_of(calls[rank][0], calls[rank][1], calls[rank][2])
        if len(found) != 1:
            raise UsageError(f"jit kernel {first.__name__}: rank {rank}'s tensors are on dies {sorted(found)}; each rank's must be on "
                             "its one device")
        rank_dies.append(found.pop())
    groups = {name: members for name, members in world.groups.items() if all(r < len(rank_dies) for r in members)}
    try:
        launch(_spmd(first.__name__), len(rank_dies), args=lambda pe: (calls[pe][0], calls[pe][2], *calls[pe][1]), group_dies=rank_dies,
               groups=groups)
    finally:
        world.met.add(call)
        del world.calls[call]


def _spmd(name: str) -> Callable:
    def run(kernel, kwargs, *args):
        return kernel.run(*args, **kwargs)

    run.__name__ = name
    return run


def _is_cpu_tensor(value) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor) and value.device.type == "cpu"


def _run_on_host_data(kernel, args: tuple, kwargs: dict) -> None:
    """A jit kernel called with CPU tensors (the framework runs such a call on host data, its SIM run
    mode: copied in, run once, copied back): each CPU tensor is copied to the current npu device
    (a host copy, no simulated time), the kernel runs there, and once it has ended every CPU
    argument gets its npu copy's values back."""
    import torch

    from npusim.frontend.torch_device import install
    from npusim.frontend.torch_device.npu_module import current_device

    install()
    device = torch.device("npu", current_device())
    staged: list[tuple[torch.Tensor, torch.Tensor]] = []

    def on_device(value):
        if not _is_cpu_tensor(value):
            return value
        copy = value.to(device)
        staged.append((value, copy))
        return copy

    host_call(kernel, tuple(on_device(v) for v in args), {k: on_device(v) for k, v in kwargs.items()})
    current_session().synchronize()
    with torch.no_grad():
        for value, copy in staged:
            value.copy_(copy.cpu())


def _device_value(value):
    """A torch npu tensor as the npusim device tensor over its bytes; anything else as it is."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        from npusim.frontend.torch_device.tensors import device_tensor

        return device_tensor(value, "pypto jit kernel", "argument")
    return value


def _dies_of(kernel, values: tuple, named: dict) -> set[int]:
    return {v.device for v in (*values, *named.values()) if isinstance(v, DeviceTensor)}
