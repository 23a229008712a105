"""``pypto.runtime``: the framework's runtime names (its host-data launch style, :mod:`.host_data`),
and the PE whose kernel function is being built in this thread, which the API's ops ask to find
their PE (``npusim.runtime.program.building_program``). The runtime itself (the launch, its PEs' programs, tasks and templates, the device-task
protocol the AICPU schedulers call) is :mod:`npusim.runtime`, below the frontend."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from npusim.errors import UsageError
from npusim.frontend.session import current_session
from npusim.hw.system import System
from npusim.runtime.launch import ShmemLaunch
from npusim.runtime.program import PeProgram, building_program


def building_pe() -> int | None:
    """The PE whose kernel function is running, if any."""
    program = building_program()
    return program.pe if program is not None else None


def current_program(op: str) -> PeProgram:
    """The PE whose kernel function is running (UsageError outside ``npusim.launch``)."""
    program = building_program()
    if program is None:
        raise UsageError(
            f"pypto.{op} is called outside a kernel: PyPTO ops run inside the kernel function that "
            "npusim.launch(kernel, n_pes, args=...) calls once per PE"
        )
    return program


def new_launch(system: System, name: str, dies: Sequence[int], races: str,
               groups: Mapping[str, Sequence[int]] | None = None) -> ShmemLaunch:
    """A launch made for the running session (its host: memory budget, wall clock, deadlock
    reports), with the tile shape the host set as its scope's default (``pypto.set_vec_tile_shapes``
    outside a kernel)."""
    from npusim.frontend.pypto.ops import HOST_TILE_SHAPES  # ops imports this module

    session = current_session()
    return ShmemLaunch(system, name, dies, races, groups, host=session, tile_shape=HOST_TILE_SHAPES.get(session))


# -- the framework's pypto.runtime names (its host-data launch style: host_data.py, which builds on this module) --

from npusim.frontend.pypto import host_data as _host_data  # noqa: E402 (it builds on this module's launch)

RunMode = _host_data.RunMode
_device_init = _host_data.device_init
_device_fini = _host_data.device_fini
_device_synchronize = _host_data.device_synchronize
_device_run_once_data_from_host = _host_data.run_once_data_from_host
