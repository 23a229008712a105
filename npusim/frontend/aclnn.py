"""The host layer that turns an op call into device work, the same for every registered op, as
torch_npu's op plugin and the aclnn API do it: the tensors are checked (device tensors of this
session, all on one device), the op checks its arguments and plans its tiling on the host, values
the host must see are read, non-contiguous inputs are copied to contiguous ones on the device
(``Contiguous``), tiling data is copied to the device, the kernels are queued on the current stream
of the output's device, and a non-contiguous output gets the result copied back (``ViewCopy``).
Nothing runs until the session synchronises (``npusim.synchronize()``, ``tensor.numpy()``, the end
of a run).

:func:`enqueue` is the one place every kernel reaches the device through: inside a torch program's
eager call (:func:`host_call`) the host thread pays the launch first and the stream waits for it
(:mod:`npusim.frontend.host`); while a graph is captured the kernel is recorded for replays instead
(:mod:`npusim.frontend.graphs`).

What the real API has no argument for is set with :func:`options`, a context manager.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from npusim.callsite import callsite
from npusim.config.products import PRODUCTS
from npusim.config.registry import OPS
from npusim.config.schema import SystemSpec
from npusim.errors import ConfigError, OpArgumentError, UsageError, WorkloadError
from npusim.frontend.host import HostLaunch, current_process
from npusim.frontend.session import innermost_session, session_of
from npusim.frontend.tensor import DeviceTensor, empty, tensor
from npusim.kernels.cube.tiling import TILING_FIELDS
from npusim.kernels.op import OUT_OF_RANGE_MODES, OVERLAP_MODES, AwaitGroup, Detached, Op, OpOptions, ValueCheck
from npusim.kernels.view_copy import build_view_copy

_OPTIONS: ContextVar[OpOptions] = ContextVar("npusim_op_options", default=OpOptions())  # noqa: B039 (frozen: immutable)
_HOST_CALL: ContextVar[HostCall | None] = ContextVar("npusim_host_call", default=None)
_CHOICES = {"out_of_range": OUT_OF_RANGE_MODES, "overlap": OVERLAP_MODES}


@contextlib.contextmanager
def options(*, out_of_range: str | None = None, overlap: str | None = None, double_buffer: bool | None = None,
            matmul_tiling: Mapping[str, Any] | None = None) -> Iterator[OpOptions]:
    """Within the block, ops use these settings (see :class:`~npusim.kernels.op.OpOptions`); unset
    ones are inherited (``matmul_tiling`` field by field)::

        with torch_npu.options(double_buffer=True, overlap="error"):
            torch_npu.npu_quant_scatter_(cache, indices, updates, scales)
        with torch_npu.options(matmul_tiling={"base_m": 128, "base_n": 256, "cores": 24}):
            c = a @ b
    """
    changes: dict[str, Any] = {}
    for name, value in (("out_of_range", out_of_range), ("overlap", overlap)):
        if value is not None:
            if value not in _CHOICES[name]:
                raise UsageError(f"torch_npu.options: {name} = {value!r}: use one of {', '.join(map(repr, _CHOICES[name]))}")
            changes[name] = value
    if double_buffer is not None:
        if not isinstance(double_buffer, bool):
            raise UsageError(f"torch_npu.options: double_buffer = {double_buffer!r}: use True or False")
        changes["double_buffer"] = double_buffer
    if matmul_tiling is not None:
        if not isinstance(matmul_tiling, Mapping):
            raise UsageError(f"torch_npu.options: matmul_tiling = {matmul_tiling!r}: give a dict of tiling fields, e.g. "
                             "{'base_m': 128, 'base_n': 256, 'base_k': 64}")
        unknown = sorted(set(matmul_tiling) - set(TILING_FIELDS))
        if unknown:
            raise UsageError(f"torch_npu.options: matmul_tiling has no field {', '.join(map(repr, unknown))}; its fields are "
                             f"{', '.join(TILING_FIELDS)}")
        merged = {**dict(_OPTIONS.get().matmul_tiling), **matmul_tiling}
        changes["matmul_tiling"] = tuple(sorted(merged.items()))
    token = _OPTIONS.set(dataclasses.replace(_OPTIONS.get(), **changes))
    try:
        yield _OPTIONS.get()
    finally:
        _OPTIONS.reset(token)


def check_series(api: str, op: type[Op], spec: SystemSpec) -> None:
    """Refuse a call of ``op`` (through ``api``) on a product whose series it is not modelled on
    (``op.series``; the product's series from :mod:`npusim.config.products`)."""
    product = PRODUCTS.get(spec.product)
    if op.series is not None and product.series not in op.series:
        raise UsageError(f"{api}: the op is modelled on {', '.join(sorted(op.series))} only, not on {product.label} "
                         f"(config {spec.name!r}); use a config of those products")


@dataclass
class HostCall:
    """One eager API call of a torch program, issued by the session's host thread: the first kernel
    it queues on a die makes the host pay ``host.op_launch`` (plus ``host.tiling`` when the op has a
    host tiling) on that die's host lane."""

    api: str
    args: dict
    tiling: bool = False
    launches: dict[int, HostLaunch] = dataclasses.field(default_factory=dict)

    def launch(self, session, die: int) -> HostLaunch:
        launch = self.launches.get(die)
        if launch is None:
            host = session.host
            launch = self.launches[die] = host.issue(die, self.api, host.eager_call(self.tiling), self.args)
        return launch


@contextlib.contextmanager
def host_call(api: str, **args) -> Iterator[HostCall]:
    """Within the block, kernels are launched by the host thread as one eager call of ``api``."""
    call = HostCall(api, args)
    token = _HOST_CALL.set(call)
    try:
        yield call
    finally:
        _HOST_CALL.reset(token)


def current_host_call() -> HostCall | None:
    """The eager host call being issued, if any."""
    return _HOST_CALL.get()


def enqueue(build, system, die: int) -> None:
    """Queue the kernels that ``build()`` returns (a list, built anew for each run) on the current
    stream of die ``die``: recorded for replays while a graph is captured; in an eager host call,
    after the host has issued them."""
    session = session_of(system)
    process = current_process()
    if process is not None:
        process.dies.add(die)
    source = callsite()  # the program's line that issued it: race reports name it
    if session.capture is not None:
        session.capture.add(lambda: _from(source, build()), die)
        return
    stream = session.stream(die)
    kernels = _from(source, build())
    call = _HOST_CALL.get()
    if call is not None:
        launch = call.launch(session, die)
        launch.gate(stream)
        for kernel in kernels:
            launch.arrow_to(kernel)
    for kernel in kernels:
        kernel.launch(stream)


@contextlib.contextmanager
def at_program_line() -> Iterator[None]:
    """The warnings an op's checks give inside (an ignored argument, overlapping writes) shown at the
    line of the user's program that called the op, not at npusim's."""
    where = callsite()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        if where is not None:
            warnings.warn_explicit(warning.message, warning.category, where.filename, where.lineno)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


def _from(source, kernels: list) -> list:
    """``kernels`` marked as issued by the program line ``source``."""
    for kernel in kernels:
        kernel.source = source
    return kernels


@dataclass
class OpCall:
    """A checked call of a registered op: its problem and plan, the operands, and what the host
    learnt from the values it read."""

    op: type[Op]
    api: str
    problem: Any
    plan: Any
    args: dict[str, Any]
    check: ValueCheck

    @classmethod
    def prepare(cls, name: str, api: str, args: Mapping[str, Any]) -> OpCall:
        """Check the call of op ``name`` (``args``: every argument by name) as ``api`` names it."""
        op: type[Op] = OPS.get(name)
        args = dict(args)
        first = _check_tensors(api, op, args)
        system = first.system
        spec = system.spec
        check_series(api, op, spec)
        with at_program_line():
            problem = op.check(spec.product, args)
        if problem.empty:
            return cls(op, api, problem, None, args, ValueCheck())
        settings = spec.ops.get(op.name)
        if op.Settings is not None and settings is None:
            required = [f for f, info in op.Settings.model_fields.items() if info.is_required()]
            raise ConfigError(
                f"{api}: the config {spec.name!r} has no ops.{op.name} section ({', '.join(required)}: how the op is "
                f"launched); add it, e.g. under `ops: {{{op.name}: {{...}}}}`, or extend a built-in config"
            )
        options_now = _OPTIONS.get()
        plan = op.plan(problem, op.target(system), settings, options_now)
        check = ValueCheck()
        if system.with_data:  # values are data: without data (timing only) they cannot be checked
            if op.value_inputs(problem):
                _queued_work_done(system, first.device)
            values = {name: args[name].host_view().copy() for name in op.value_inputs(problem)}
            with at_program_line():
                check = op.check_values(problem, values, options_now)
        return cls(op, api, problem, plan, args, check)

    def issue(self, out: DeviceTensor) -> None:
        """Queue the kernels that write the op's output into ``out`` (the output argument itself, or
        a clone of it for an out-of-place variant)."""
        if self.plan is None:
            return
        op, system, die = self.op, out.system, out.device
        host_values = op.host_tensors(self.problem, self.plan)
        call = _HOST_CALL.get()
        if call is not None:
            call.tiling = bool(host_values)
        work = out if out.is_contiguous() else _contiguous(out, self.api, "the output")
        names = op.tensor_names(self.args)
        tensors: dict[str, Any] = {}
        for name in names:
            value = self.args[name]
            if name != op.output:
                tensors[name] = None if value is None else value if op.reads_as_is(self.problem, name, value) else _contiguous(value, self.api, name)
        tensors[op.output] = work
        tensors.update({name: tensor(values, device=die) for name, values in host_values.items()})
        op_args = {"api": f"torch_npu.{self.api}", **op.describe(self.problem, self.plan)}
        inputs = [(tuple(self.args[name].shape), self.args[name].dtype.name) for name in names
                  if name != op.output and self.args[name] is not None]
        outputs = [(tuple(out.shape), out.dtype.name)]
        session = session_of(system)
        if (self.check.read or self.check.warning) and session.capture is None:
            session.submit(session.stream(die), self._at_kernel_start(tensors, system, die))

        def build() -> list:
            kernels = op.lower(self.problem, self.plan, tensors, self.check, op_args)
            for kernel in kernels:
                kernel.op_inputs, kernel.op_outputs = inputs, outputs
            return kernels

        enqueue(build, system, die)
        if work is not out:
            copy(out, work, "ViewCopy", f"{self.api}: result into the non-contiguous output")

    def _at_kernel_start(self, tensors: Mapping[str, Any], system, die: int):
        """A stream task just before the kernels: the inputs whose values the host read must still
        hold them (work queued before the op may have written them); a warning of the host check is
        marked in the trace where the kernels start."""
        env, recorder = system.env, system.recorder

        def task():
            for name, checked in self.check.read.items():
                if not np.array_equal(tensors[name].host_view(), checked):
                    raise WorkloadError(
                        f"{self.api}: {name} changed between the call and the kernel's start (at {env.now / 1e6:.3f} us): work "
                        "queued before the op wrote them, so the simulator checked values the kernel does not read. "
                        f"Synchronise before the call (npusim.synchronize(), or {name}.numpy()) so the values are final"
                    )
            if self.check.warning is not None:
                recorder.instant(env.now, die, "overlapping writes", self.check.warning)
            yield env.timeout(0)

        return task


def _queued_work_done(system, die: int) -> None:
    """Simulate the work queued so far on die ``die``'s current stream, so that the host reads the
    values an op's kernel will read (an index tensor that a device op queued just before wrote):
    the op's kernels run after that work anyway. The host does not wait (its clock stays); only the
    simulation runs ahead, as for a PyPTO kernel that reads a device value while it is built. Work
    of other streams is not waited for: a change it makes is still refused at the kernel's start."""
    session = session_of(system)
    if session is None or session.capture is not None:
        return
    tail = session.stream(die).tail
    if tail is not None:
        session.run_until(tail)


def run_op(name: str, api: str, args: Mapping[str, Any], *, out: DeviceTensor) -> None:
    """Check and issue op ``name`` writing its result into ``out``."""
    OpCall.prepare(name, api, args).issue(out)


def _check_tensors(api: str, op: type[Op], args: dict[str, Any]) -> DeviceTensor:
    """Every tensor argument is a device tensor of one session on one device; returns the first."""
    names = op.tensor_names(args)
    for name in names:
        value = args.get(name)
        if value is None and name in op.optional:
            continue
        if not isinstance(value, DeviceTensor):
            raise OpArgumentError(
                f"{api}: {name} = {type(value).__name__}: must be an npusim device tensor; "
                f"make one with npusim.tensor(array, device=...)"
            )
    first_name = names[0]
    first = args[first_name]
    for name in names[1:]:
        value = args.get(name)
        if value is None:
            continue
        if value.system is not first.system:
            raise UsageError(f"{api}: {name} belongs to another npusim session than {first_name}; create both in the same session")
        if value.device != first.device:
            raise OpArgumentError(
                f"{api}: {name} is on device {value.device}, {first_name} on device {first.device}: all tensors of the op "
                f"must be on {first_name}'s device; create {name} with device={first.device}"
            )
    return first


def _contiguous(view: DeviceTensor, api: str, name: str) -> DeviceTensor:
    """``view`` itself when contiguous, else a contiguous copy made on the device (``Contiguous``)."""
    if view.is_contiguous():
        return view
    out = empty(view.shape, view.dtype, device=view.device)
    copy(out, view, "Contiguous", f"{api}: contiguous copy of {name}")
    return out


def copy(dst: DeviceTensor, src: DeviceTensor, name: str, purpose: str) -> None:
    """Queue a device copy of ``src`` into ``dst`` (same shape) under the kernel name ``name``."""
    op_args = {"purpose": purpose, "shape": list(src.shape), "dtype": src.dtype.name}
    enqueue(lambda: [build_view_copy(dst, src, name=name, op_args=op_args)], dst.system, dst.device)


class DeviceTask:
    """The device work of one call of a :class:`~npusim.kernels.op.DeviceOp`, queued as one stream
    task: it runs the op's steps when its turn comes (each :class:`~npusim.kernels.op.Run` launched
    on the cores there and then, each :class:`~npusim.kernels.op.AwaitGroup` waited for)."""

    def __init__(self, call: DeviceOpCall) -> None:
        self.call = call
        self._built: list = []  # callbacks for the first kernel once made (the host's launch arrow)

    def when_built(self, callback) -> None:
        """Call ``callback(kernel)`` with the first kernel of the op once it is made."""
        self._built.append(callback)

    def launch(self, stream) -> None:
        stream.submit(self._run)

    def _run(self):
        call = self.call
        op, system = call.op, call.system
        env, recorder = system.env, system.recorder
        die = call.die
        op_id = recorder.op(op.kernel_name, die, **call.op_args)
        recorder.ops[op_id].inputs, recorder.ops[op_id].outputs = call.inputs, call.output_shapes
        context = op.prepare(call.problem, call.plan, call.tensors, system)
        for step in op.steps(call.problem, call.plan, call.tensors, context, op_id):
            if isinstance(step, Detached):
                env.process(step.work())
                continue
            if isinstance(step, AwaitGroup):
                group = step.group
                if not group.complete:
                    joined = env.event()
                    group.on_complete.append(joined.succeed)
                    session = session_of(system)
                    if _incomplete_group_report not in session.deadlock_reporters:
                        session.deadlock_reporters.append(_incomplete_group_report)
                    yield joined
                continue
            if self._built and step.kernels:
                for callback in self._built:
                    callback(step.kernels[0])
                self._built = []
            yield env.all_of([kernel.start() for kernel in step.kernels])


def _incomplete_group_report() -> list[str]:
    """Deadlock report lines: the communication groups some ranks have not joined."""
    from npusim.kernels.comm.group import groups_of

    session = innermost_session()
    lines = []
    for group in groups_of(session.system) if session is not None else ():
        if not group.complete:
            missing = ", ".join(str(r) for r in range(group.world_size) if r not in group.members)
            lines.append(f"  group {group.name!r}: {len(group.members)} of its {group.world_size} ranks have called an op of it (ranks "
                         f"{', '.join(map(str, sorted(group.members)))}); the ops of ranks {missing} were never called, so the others "
                         "wait for them")
    return lines


@dataclass
class DeviceOpCall:
    """A checked call of a :class:`~npusim.kernels.op.DeviceOp`: its problem and plan; the outputs
    it allocates (:meth:`output_specs`); :meth:`issue` queues it with its tensors."""

    op: Any
    api: str
    problem: Any
    plan: Any
    args: dict
    system: Any
    die: int
    tensors: dict = dataclasses.field(default_factory=dict)
    op_args: dict = dataclasses.field(default_factory=dict)
    inputs: list = dataclasses.field(default_factory=list)
    output_shapes: list = dataclasses.field(default_factory=list)

    @classmethod
    def prepare(cls, name: str, api: str, args: Mapping[str, Any]) -> DeviceOpCall:
        """Check the call of op ``name`` (every argument by name) on the host."""
        op = OPS.get(name)
        args = dict(args)
        first = _check_tensors(api, op, args)
        system = first.system
        spec = system.spec
        check_series(api, op, spec)
        problem = op.check_call(spec, {**args, "api": api})
        plan = op.plan_for(problem, system)
        return cls(op, api, problem, plan, args, system, first.device)

    def output_specs(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """The outputs to allocate on the call's device: name -> (shape, dtype)."""
        return self.op.outputs(self.problem)

    def issue(self, outputs: Mapping[str, DeviceTensor]) -> None:
        """Queue the call, writing into ``outputs`` (contiguous, on the call's device)."""
        op = self.op
        tensors: dict[str, Any] = {name: _contiguous(self.args[name], self.api, name) if self.args.get(name) is not None else None
                                   for name in op.tensors}
        tensors.update(outputs)
        self.tensors = tensors
        self.op_args = {"api": f"torch_npu.{self.api}", **op.describe(self.problem, self.plan)}
        self.inputs = [(tuple(t.shape), t.dtype.name) for name in op.tensors if (t := self.args.get(name)) is not None]
        self.output_shapes = [(tuple(t.shape), t.dtype.name) for t in outputs.values()]
        op.prepare(self.problem, self.plan, tensors, self.system)  # joins the group now: a rank that disagrees is refused at its call
        call = _HOST_CALL.get()
        if call is not None:
            call.tiling = True  # the op's host tiling (its aclnn GetWorkspaceSize)
        enqueue(lambda: [DeviceTask(self)], self.system, self.die)
