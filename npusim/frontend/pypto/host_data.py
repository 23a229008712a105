"""The framework's host-data launch style: a function recorded with ``pypto.function`` on tensors
declared on the host, then run once on the data of CPU tensors (most of the framework's single-op
system tests are written so)::

    pypto.runtime._device_init()
    x = pypto.tensor([8, 8], pypto.DT_FP32, "X")            # declared on the host
    out = pypto.tensor([8], pypto.DT_FP32, "OUT")
    with pypto.function("MAIN", x, out):                     # the function's graph, on x and out
        pypto.set_vec_tile_shapes(4, 8)
        pypto.assemble(pypto.amin(x, 1), [0], out)
    pypto.runtime._device_run_once_data_from_host(pypto.from_torch(x_cpu), pypto.from_torch(out_cpu))
    pypto.runtime._device_fini()

On the framework the ``with`` block records the function's graph (``RecordFunc``), and
``_device_run_once_data_from_host`` copies the host tensors' data to the device, runs the last
recorded function once and copies every parameter back (``DeviceRunOnceDataFromHost``). npusim
does the same with the steps of :func:`npusim.launch`: ``pypto.function`` builds a one-PE launch on
the current device (``torch.npu.current_device()`` when torch is in use, else die 0) in the calling
thread, each declared tensor becoming a GM tensor of that device that the function takes as an
argument (the object becomes the kernel's ``pypto.Tensor``, as the framework's tensor is one object
throughout); the run copies the CPU data into those GM tensors (no simulated time, as every host
copy: docs/torch.md), submits the launch, synchronises and copies the parameters back into the CPU
tensors. A function runs once, as its name says: record it again to run it again.
``_device_init`` / ``_device_fini`` (the device's set-up) have nothing to do on npusim;
``_device_synchronize`` synchronises the session.

A device-valued scalar (``t[i]`` read while building) cannot be read in such a function: its data
only exists when it runs; that is an error naming the read.
"""

from __future__ import annotations

import contextlib
import enum
import math
import sys
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from npusim.errors import OpArgumentError, UsageError
from npusim.frontend.pypto.tensors import Tensor, TensorAnnotation
from npusim.frontend.session import Session, current_session
from npusim.frontend.tensor import empty
from npusim.kernels.shmem.dtypes import DataType

__all__ = ["HostTensor", "RunMode", "function"]


class RunMode(enum.IntEnum):
    """``pypto.RunMode``: where the framework runs a jit kernel (its ``runtime_options={"run_mode": ...}``):
    NPU on the device, SIM in its own CPU simulator. On npusim both run on the simulated device."""

    NPU = 0
    SIM = 1


class HostTensor:
    """``pypto.from_torch(cpu_tensor, name)``: a CPU tensor's data for
    ``pypto.runtime._device_run_once_data_from_host`` (it is not a device tensor: a kernel cannot
    take it)."""

    def __init__(self, tensor: Any, name: str, dtype: DataType) -> None:
        self.tensor = tensor
        self.name = name
        self.dtype = dtype

    @property
    def shape(self) -> list[int]:
        return list(self.tensor.shape)

    @property
    def ori_shape(self) -> list[int]:
        return self.shape

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        return f"pypto.Tensor(host data{name}, shape={self.shape}, {self.dtype.name})"


class RecordedFunction:
    """A ``pypto.function`` block built as a one-PE launch, and its parameters."""

    def __init__(self, name: str, launch, parameters: list[Tensor]) -> None:
        self.name = name
        self.launch = launch
        self.parameters = parameters
        self.ran = False

    def __iter__(self) -> Iterator[None]:
        """``for _ in function:`` runs its body once (the framework's RecordFunc iterates once over a plain function)."""
        yield None


_recorded: weakref.WeakKeyDictionary[Session, RecordedFunction] = weakref.WeakKeyDictionary()
"""Per session, the function recorded last (the one ``_device_run_once_data_from_host`` runs)."""


def _current_die() -> int:
    """The device torch programs have set (``torch.npu.set_device``), else die 0."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "npu") and hasattr(torch.npu, "current_device"):
        return int(torch.npu.current_device())
    return 0


@contextlib.contextmanager
def function(name: str, *args: Any) -> Iterator[RecordedFunction]:
    """``with pypto.function(name, *tensors):`` (module docstring): the block's ops build the function."""
    from npusim.frontend.pypto.runtime import new_launch
    from npusim.runtime.launch import check_product
    from npusim.runtime.program import building, building_program

    if building_program() is not None:
        raise UsageError(f"pypto.function({name!r}): a function is recorded on the host, not inside a kernel; inside one, call the "
                         "ops directly (or decorate a helper with @pypto.frontend.function)")
    session = current_session()
    system = session.system
    check_product(system.spec, f"pypto.function({name!r})")
    declared = [a for a in args if isinstance(a, (Tensor, TensorAnnotation))]
    die = _current_die()
    launch = new_launch(system, name, [die], system.race_check)
    launch.awaiting_host_data = True  # a device value read while it builds has no data yet: an error, not the GM's zeros
    program = launch.programs[0]
    parameters = []
    for index, value in enumerate(declared):
        shape, dtype, tensor_name = _declaration(name, index, value)
        parameters.append(Tensor.declared(value, program, empty(tuple(shape), dtype.numpy, device=die), tensor_name))
    recorded = RecordedFunction(name, launch, parameters)
    with building(program):
        yield recorded
    launch.finish()
    _recorded[session] = recorded


def _declaration(function_name: str, index: int, value: Tensor | TensorAnnotation) -> tuple[list[int], DataType, str]:
    """The shape, dtype and name of a tensor declared on the host."""
    if isinstance(value, Tensor):
        if value.host_declaration is None:
            raise UsageError(f"pypto.function({function_name!r}): argument {index} ({value!r}) is a tensor of a kernel; a function "
                             "takes tensors declared on the host (pypto.tensor(shape, dtype, name))")
        return value.host_declaration
    shape = value.shape
    if not shape or any(not isinstance(s, int) or isinstance(s, bool) or s <= 0 for s in shape):
        raise UsageError(f"pypto.function({function_name!r}): argument {index} {value!r} needs a shape of positive ints to be "
                         "a function's tensor")
    return list(shape), value.dtype or DataType.DT_FP32, value.name


def run_once_data_from_host(*tensors: Any) -> None:
    """``pypto.runtime._device_run_once_data_from_host(*from_torch(cpu tensors))`` (module docstring)."""
    from npusim.frontend.torch_device.tensors import to_numpy, to_torch

    session = current_session()
    recorded = _recorded.get(session)
    what = "pypto.runtime._device_run_once_data_from_host"
    if recorded is None:
        raise UsageError(f"{what}: no function was recorded in this session; record one with `with pypto.function(name, *tensors):`")
    if recorded.ran:
        raise UsageError(f"{what}: function {recorded.name!r} has run; a recorded function runs once: record it again to run it again")
    for index, value in enumerate(tensors):
        if not isinstance(value, HostTensor):
            raise OpArgumentError(f"{what}: argument {index} is {value!r}; it takes pypto.from_torch(tensor) of CPU tensors")
    if len(tensors) != len(recorded.parameters):
        raise OpArgumentError(f"{what}: {len(tensors)} tensors given, but function {recorded.name!r} takes "
                              f"{len(recorded.parameters)} ({', '.join(repr(p) for p in recorded.parameters)})")
    _check_pairs(what, recorded, tensors)
    session.synchronize()
    if session.with_data:
        for parameter, value in zip(recorded.parameters, tensors):
            view = parameter.gm().host_view()
            view[...] = to_numpy(value.tensor).reshape(view.shape)
    recorded.ran = True
    session.track(recorded.launch.submit())
    session.synchronize()
    if session.with_data:
        for parameter, value in zip(recorded.parameters, tensors):
            value.tensor.copy_(to_torch(parameter.gm().host_view()).reshape(value.tensor.shape))


def _check_pairs(what: str, recorded: RecordedFunction, tensors: Sequence[HostTensor]) -> None:
    """Each CPU tensor holds its parameter's data: the same dtype and number of elements, in
    row-major order whatever its shape (the framework copies the bytes: pto_test_case_runner.py
    passes flat data for a [1, 1, 16, 16] parameter)."""
    for index, (parameter, value) in enumerate(zip(recorded.parameters, tensors)):
        if math.prod(parameter.shape) != math.prod(value.shape) or parameter.dtype is not value.dtype:
            raise OpArgumentError(f"{what}: argument {index} {value!r} does not match parameter {index} of function "
                                  f"{recorded.name!r}, {parameter!r}: the dtypes and the numbers of elements must be the same "
                                  "(the data is taken in row-major order, whatever its shape)")


def device_synchronize() -> None:
    """``pypto.runtime._device_synchronize()``: wait for the device (the session synchronises)."""
    current_session().synchronize()


def device_init() -> None:
    """``pypto.runtime._device_init()``: the framework sets up its device runtime; npusim's is the session."""


def device_fini() -> None:
    """``pypto.runtime._device_fini()``: the framework releases its device runtime; nothing to do on npusim."""
