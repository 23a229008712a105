"""What every op the simulator models provides: check -> plan -> lower, as the vendor's op
libraries build an op (argument checks, host tiling, the kernel), and the settings that the real
API has no argument for.

An op is a class registered in :data:`npusim.config.registry.OPS`; a frontend (the torch_npu
facade's launch path, :mod:`npusim.frontend.aclnn`) drives its steps:

1. :meth:`Op.check`: a pure check of the call (shapes, dtypes, attributes, what the product
   supports), giving a frozen problem, or an :class:`~npusim.errors.OpArgumentError` naming the
   argument, its value and the rule;
2. :meth:`Op.plan`: the kernel's tiling of the problem for what :meth:`Op.target` reads of the die
   (a :class:`~npusim.isa.target.VectorTarget`, or a ``CubeTarget`` for the cube ops; plain frozen
   data, no SimPy);
3. :meth:`Op.check_values`: for ops whose kernels depend on data values (indices), what the host
   sees in them (the values are read once; the kernel must find the same ones when it starts);
4. :meth:`Op.host_tensors`: the arrays the host computes and copies to the device (tiling data);
5. :meth:`Op.lower`: the plan as kernels of per-core ISA programs, ready to launch.

The model ``Settings`` (None: the op takes none) validates the config section ``ops.<name>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from npusim import isa
from npusim.isa.target import VectorTarget

OUT_OF_RANGE_MODES = ("error", "unchecked")
OVERLAP_MODES = ("warn", "error")


@dataclass(frozen=True)
class OpOptions:
    """Simulator settings of ops that the real API has no argument for (``torch_npu.options``).

    ``out_of_range``: ``"error"`` (default) refuses an index whose destination lies outside the
    tensor it writes; ``"unchecked"`` emulates the hardware, which does not check.
    ``overlap``: writes of one launch to overlapping destinations race on hardware; ``"warn"``
    (default) or ``"error"``.
    ``double_buffer``: run the what-if variant of a kernel with ping-pong buffers.
    ``matmul_tiling``: the tiling of the cube ops (matmul, npu_quant_matmul, npu_grouped_matmul)
    in place of their default, as ``(field, value)`` pairs of
    :data:`~npusim.kernels.cube.tiling.TILING_FIELDS` (base_m, step_ka, cores, order ...); the fields
    not given keep the op's default.
    """

    out_of_range: str = "error"
    overlap: str = "warn"
    double_buffer: bool = False
    matmul_tiling: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class ValueCheck:
    """What the host learnt from the values of an op's inputs: the inputs it read (their values
    must be unchanged when the kernel starts), extra arguments of the lowering, and a warning to
    mark in the trace where the kernel starts (or None)."""

    read: Mapping[str, Any] = field(default_factory=dict)
    lowering: Mapping[str, Any] = field(default_factory=dict)
    warning: str | None = None


class Op:
    """Base of the registered ops (see the module docstring). Subclasses set the class attributes
    and override the steps; every step is a classmethod working on plain data."""

    name: ClassVar[str]
    """The registry name and the config key ``ops.<name>``."""
    kernel_name: ClassVar[str]
    """The kernel's op type, as the vendor's profiler names it."""
    tensors: ClassVar[tuple[str, ...]]
    """The tensor arguments, in signature order."""
    optional: ClassVar[frozenset[str]] = frozenset()
    """Tensor arguments that may be None."""
    output: ClassVar[str]
    """The tensor argument the kernels write (in place)."""
    Settings: ClassVar[type[BaseModel] | None] = None
    series: ClassVar[frozenset[str] | None] = None
    """The product series (``config.products``) the op is modelled on; None: every series."""

    @classmethod
    def check_settings(cls, settings: BaseModel, spec: Any) -> None:
        """Check ``ops.<name>`` against the rest of the system spec; a ValueError naming the key."""

    @classmethod
    def tensor_names(cls, args: Mapping[str, Any]) -> tuple[str, ...]:
        """The tensor arguments of this call, in signature order: :attr:`tensors` (an op taking
        lists of tensors names each element, ``x[0]``, ``x[1]`` ...)."""
        return cls.tensors

    @classmethod
    def target(cls, system: Any) -> Any:
        """What the op's host tiling reads of the hardware: the vector cores (cube ops: the
        :class:`~npusim.isa.target.CubeTarget`)."""
        return VectorTarget.of(system)

    @classmethod
    def reads_as_is(cls, problem: Any, name: str, tensor: Any) -> bool:
        """Whether the kernel reads input ``name`` in its layout as it is (else the launch path
        copies it to a contiguous tensor first, as aclnn's ``Contiguous``): contiguous tensors."""
        return tensor.is_contiguous()

    @classmethod
    def check(cls, product: str, args: Mapping[str, Any]) -> Any:
        """The problem of a call (``args``: tensors by name, as objects with ``shape``/``dtype``/
        ``ndim``, and the attributes); an empty problem (``problem.empty``) launches nothing."""
        raise NotImplementedError

    @classmethod
    def plan(cls, problem: Any, target: Any, settings: BaseModel | None, options: OpOptions) -> Any:
        """The kernel's tiling for ``target`` (what :meth:`target` gave)."""
        raise NotImplementedError

    @classmethod
    def value_inputs(cls, problem: Any) -> tuple[str, ...]:
        """The inputs whose values the host checks (none by default)."""
        return ()

    @classmethod
    def check_values(cls, problem: Any, values: Mapping[str, Any], options: OpOptions) -> ValueCheck:
        """What the values of :meth:`value_inputs` (numpy arrays) say about the call."""
        return ValueCheck()

    @classmethod
    def host_tensors(cls, problem: Any, plan: Any) -> dict[str, Any]:
        """Arrays the host computes and copies to the device for the kernel (tiling data), by name;
        :meth:`lower` finds them among its tensors."""
        return {}

    @classmethod
    def lower(cls, problem: Any, plan: Any, tensors: Mapping[str, Any], check: ValueCheck, op_args: dict) -> list[isa.Kernel]:
        """The kernels of ``plan`` on contiguous device ``tensors`` (by argument name)."""
        raise NotImplementedError

    @classmethod
    def describe(cls, problem: Any, plan: Any) -> dict:
        """The op's arguments as the trace shows them on its launch."""
        return {}


@dataclass(frozen=True)
class Run:
    """A step of a :class:`DeviceOp`: run ``kernels`` at once and wait until all have ended."""

    kernels: tuple


@dataclass(frozen=True)
class Detached:
    """A step of a :class:`DeviceOp`: start ``work()`` (a SimPy generator: an engine of the die
    working beside the cores, e.g. the AICPU posting RDMA writes) and go on at once; the op's later
    kernels see its effects (flags they poll)."""

    work: Any


@dataclass(frozen=True)
class AwaitGroup:
    """A step of a :class:`DeviceOp`: wait until every rank of ``group`` (a
    :class:`~npusim.kernels.comm.group.CommGroup`) has joined it, so every peer's window exists."""

    group: Any


class DeviceOp(Op):
    """An op whose kernels are written on the device, when its turn on the stream comes: what they
    do depends on values the device computed just before (the expert ids of a router) and on what
    other ranks sent (counts arriving in the window), which the real kernels read on the device.
    ``check`` and ``plan`` run on the host as for every op; the op allocates its outputs
    (:meth:`outputs`); :meth:`steps` is a generator the launch path runs on the device: each
    :class:`Run` or :class:`AwaitGroup` it yields is waited for before it goes on, so it reads
    memory (``host_view`` of its tensors, status words) as the device has it at that moment."""

    control_outputs: frozenset[str] = frozenset()
    """Outputs whose values later work reads to size itself (a dispatch's counts, a grouped
    matmul's group list): allocated as control memory, real in a timing-only run too, and written
    by the kernel with control instructions."""

    @classmethod
    def check_call(cls, spec: Any, args: Mapping[str, Any]) -> Any:
        """:meth:`check` with the whole system spec (an op that checks against the system, e.g. a
        window's size, overrides this)."""
        return cls.check(spec.product, args)

    @classmethod
    def plan_for(cls, problem: Any, system: Any) -> Any:
        """The plan of a call on ``system`` (default: :meth:`plan` for the die's vector cores)."""
        return cls.plan(problem, VectorTarget.of(system), None, OpOptions())

    @classmethod
    def outputs(cls, problem: Any) -> dict[str, tuple[tuple[int, ...], Any]]:
        """The tensors the op allocates, by name: (shape, dtype), in the order it returns them."""
        raise NotImplementedError

    @classmethod
    def prepare(cls, problem: Any, plan: Any, tensors: Mapping[str, Any], system: Any) -> Any:
        """Host work of a call before it is queued (joining its communication group); returns the
        context :meth:`steps` gets."""
        raise NotImplementedError

    @classmethod
    def steps(cls, problem: Any, plan: Any, tensors: Mapping[str, Any], context: Any, op: int):
        """The generator of the op's steps on the device (events carry the op id ``op``)."""
        raise NotImplementedError
