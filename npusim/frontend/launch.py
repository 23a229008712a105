"""``npusim.launch``: run a PyPTO kernel SPMD, once per PE of a communication group.

``npusim.launch(kernel, n_pes, args=lambda pe: (x[pe], out[pe], "tp", n_pes))`` calls
``kernel(*args(pe))`` for each PE 0 .. n_pes-1 in turn; the PyPTO ops the call makes build that PE's
graph of tile ops. Device tensors among the arguments become ``pypto.Tensor`` values of that PE
(each must live on the PE's die); other arguments are passed as they are. Once every PE is built,
each PE's device task is queued on its die's stream and the session tracks the launch, so
``npusim.synchronize()`` (or ``tensor.numpy()``) runs it.

PE i runs on die i by default (on a3, dies 2k and 2k+1 share a package); ``group_dies`` maps the PEs
onto other dies. ``groups`` declares communication groups of some of the PEs (``{"even": [0, 2],
"odd": [1, 3]}``: a PE's rank in a group is its index in that list); a group a kernel names that
``groups`` does not declare spans every PE. ``races="error"`` turns race reports into a RaceError,
``"off"`` reports none; by default the session's mode (``npusim run --races``) decides.

A kernel that reads device values while it builds (``if t[i] == 1:``, ``pypto.loop(t[0])``) starts
running before ``launch`` returns: the simulation advances until each value has been read
(``npusim/frontend/pypto/building.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from npusim.errors import ConfigError, OpArgumentError, UsageError
from npusim.frontend.pypto.building import build_launch
from npusim.frontend.pypto.runtime import new_launch
from npusim.frontend.pypto.tensors import Tensor
from npusim.frontend.session import current_session
from npusim.frontend.tensor import DeviceTensor
from npusim.isa.racecheck import RACE_MODES
from npusim.runtime.launch import ShmemLaunch, check_product


def launch(kernel: Callable, n_pes: int, args: Callable[[int], object] | None = None, *,
           group_dies: Sequence[int] | None = None, groups: Mapping[str, Sequence[int]] | None = None,
           races: str | None = None) -> ShmemLaunch:
    """Run ``kernel`` on ``n_pes`` PEs (see the module docstring); returns the launch."""
    session = current_session()
    system = session.system
    spec = system.spec
    check_product(spec, "npusim.launch")
    if spec.shmem is None:
        raise ConfigError(
            f"config {spec.name!r} has no shmem: section, which npusim.launch needs (the scheduler and the "
            "communication windows); add one, as in configs/a2.yaml"
        )
    if not callable(kernel):
        raise UsageError(f"npusim.launch: kernel={kernel!r} must be a function (the PyPTO kernel)")
    if args is not None and not callable(args):
        raise UsageError(f"npusim.launch: args={args!r} must be a function of the PE returning its arguments, e.g. lambda pe: (x[pe], out[pe])")
    races = system.race_check if races is None else races
    if races not in RACE_MODES:
        raise UsageError(f"npusim.launch: races={races!r} must be one of {', '.join(RACE_MODES)}")
    dies = _dies(n_pes, group_dies, system.die_count, spec.name)
    name = getattr(kernel, "__name__", "kernel")
    run = new_launch(system, name, dies, races, _groups(groups, n_pes))

    def body(pe: int) -> Callable[[], object]:
        def call() -> object:
            values = args(pe) if args is not None else ()
            values = values if isinstance(values, tuple) else (values,)
            program = run.programs[pe]
            return kernel(*(_argument(program, value, pe, i) for i, value in enumerate(values)))

        return call

    session.track(build_launch(run, [body(pe) for pe in range(n_pes)]))
    return run


def _groups(groups: object, n_pes: int) -> dict[str, tuple[int, ...]]:
    """``groups`` checked: group name -> its PEs (by rank), each a PE of the launch, none twice."""
    if groups is None:
        return {}
    if not isinstance(groups, Mapping):
        raise UsageError(f"npusim.launch: groups={groups!r} must be a dict of group name -> list of PEs, e.g. {{'even': [0, 2]}}")
    checked = {}
    for name, members in groups.items():
        if not isinstance(name, str) or not isinstance(members, (list, tuple)) or not members:
            raise UsageError(f"npusim.launch: groups[{name!r}]={members!r} must be a non-empty list of PEs under a group name")
        for pe in members:
            if not isinstance(pe, int) or isinstance(pe, bool) or not 0 <= pe < n_pes:
                raise OpArgumentError(f"npusim.launch: groups[{name!r}]={list(members)} names PE {pe!r}; the launch has PEs 0..{n_pes - 1}")
        if len(set(members)) != len(members):
            raise OpArgumentError(f"npusim.launch: groups[{name!r}]={list(members)} names a PE twice")
        checked[name] = tuple(members)
    return checked


def _dies(n_pes: object, group_dies: Sequence[int] | None, die_count: int, config: str) -> list[int]:
    if not isinstance(n_pes, int) or isinstance(n_pes, bool) or n_pes < 1:
        raise OpArgumentError(f"npusim.launch: n_pes={n_pes!r} must be a positive int (the PEs of the group)")
    if n_pes > die_count:
        raise OpArgumentError(
            f"npusim.launch: n_pes={n_pes} is more than the {die_count} dies of config {config!r}; each PE runs on its own "
            "die: launch at most that many PEs, or use a config with more dies (a3, or --set shape.nodes=2)"
        )
    if group_dies is None:
        return list(range(n_pes))
    dies = list(group_dies)
    if len(dies) != n_pes:
        raise OpArgumentError(f"npusim.launch: group_dies={dies} has {len(dies)} dies; it must give one die per PE (n_pes={n_pes})")
    for die in dies:
        if not isinstance(die, int) or isinstance(die, bool) or not 0 <= die < die_count:
            raise OpArgumentError(f"npusim.launch: group_dies={dies} names die {die!r}; the config {config!r} has dies 0..{die_count - 1}")
    if len(set(dies)) != len(dies):
        raise OpArgumentError(f"npusim.launch: group_dies={dies} names a die twice; each PE needs a die of its own")
    return dies


def _argument(program, value: object, pe: int, index: int) -> object:
    """A kernel argument for PE ``pe``: device tensors become that PE's pypto.Tensor values."""
    if isinstance(value, DeviceTensor):
        if value.device != program.die:
            raise UsageError(
                f"npusim.launch: args({pe})[{index}] is a tensor on die {value.device}, but PE {pe} runs on die {program.die}; "
                f"create PE {pe}'s tensors with device={program.die}"
            )
        return Tensor.of_device(program, value)
    return value
