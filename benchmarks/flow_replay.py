"""The fluid network alone: record the network calls of a workload, replay them on a bare network.

    # record (the interpreted engine: a plain checkout first on PYTHONPATH, e.g. from `git archive HEAD npusim configs`)
    PYTHONPATH=DIR python benchmarks/flow_replay.py record calls.pkl --config a3 [--set shape.nodes=2] [--param n_pes=32]
    # replay (compiled or not), e.g. under `valgrind --tool=callgrind` to count instructions
    python benchmarks/flow_replay.py replay calls.pkl [--repeat 3] [--calls N] [--no-digest]

``record`` runs ``examples/shmem_allgather.py`` timing only and keeps what the network was given:
its resources, the flow classes (path and cap) and every ``start`` (time, class, size, fixed cost).
``replay`` issues the same starts at the same times on a fresh network in a bare SimPy loop and
prints the CPU seconds of the run (best and median of ``--repeat``), per recomputation, and a digest
of what the network produced (each transfer's completion time and value, every rate log, the bytes
and flows each resource counted): two implementations that agree to the bit print the same digest.
The replay's own loop costs a few percent of the network's time.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import math
import pickle
import time
from pathlib import Path
from typing import Any

from running_on import running_on

import npusim
from npusim.engine import flow
from npusim.engine.loop import Environment, clock
from npusim.frontend.workload import run_workload_file

ALLGATHER = Path(__file__).resolve().parents[1] / "examples" / "shmem_allgather.py"


def record(out: Path, config: str, overrides: tuple[str, ...], params: dict[str, int]) -> None:
    """Run the all-gather on ``config`` and write its network calls to ``out``."""
    if not flow.__file__ or not flow.__file__.endswith(".py"):
        raise SystemExit("record needs the interpreted engine (its methods are wrapped): put a plain checkout first on "
                         "PYTHONPATH (git archive HEAD npusim configs | tar -x -C DIR; PYTHONPATH=DIR)")
    resources: dict[int, int] = {}
    described: list[tuple[str, float, str, int]] = []
    classes: dict[int, int] = {}
    paths: list[tuple[list[int], float]] = []
    calls: list[tuple[int, int, int, int]] = []
    network_flow_class, network_start = flow.FlowNetwork.flow_class, flow.FlowNetwork.start

    def index_of(resource: flow.Resource) -> int:
        if id(resource) not in resources:
            resources[id(resource)] = len(described)
            described.append((resource.name, resource.capacity, resource.kind, resource.die))
        return resources[id(resource)]

    def flow_class(self: flow.FlowNetwork, path: Any, cap: float = math.inf) -> flow.FlowClass | None:
        made = network_flow_class(self, path, cap)
        if made is not None and id(made) not in classes:
            classes[id(made)] = len(paths)
            paths.append(([index_of(r) for r in made.path], made.cap))
        return made

    def start(self: flow.FlowNetwork, made: flow.FlowClass | None, size: int, delay_ps: int = 0, done: Any = None) -> Any:
        calls.append((clock(self.env), -1 if made is None else classes[id(made)], size, delay_ps))
        return network_start(self, made, size, delay_ps, done)

    flow.FlowNetwork.flow_class, flow.FlowNetwork.start = flow_class, start  # type: ignore[method-assign]
    try:
        with contextlib.redirect_stdout(io.StringIO()), npusim.session(config, overrides, data=False, params=params) as s:
            run_workload_file(ALLGATHER)
    finally:
        flow.FlowNetwork.flow_class, flow.FlowNetwork.start = network_flow_class, network_start  # type: ignore[method-assign]
    network = s.system.network
    registered = [index_of(r) for r in network.resources]
    with out.open("wb") as file:
        pickle.dump({"record_rates": network.record_rates, "quantum_ps": network.quantum_ps, "resources": described,
                     "registered": registered, "classes": paths, "calls": calls, "recomputations": network.recomputations}, file)
    print(f"{len(described)} resources, {len(paths)} classes, {len(calls)} starts, {network.recomputations} recomputations -> {out}")


def replay(data: dict[str, Any], calls: int | None, digest: bool) -> tuple[float, int, str]:
    """The recorded starts (the first ``calls``) on a fresh network: (CPU seconds, recomputations,
    digest of the outcomes or '')."""
    env = Environment()
    network = flow.FlowNetwork(env, record_rates=data["record_rates"], quantum_ps=data["quantum_ps"])
    resources = [flow.Resource(name, capacity, kind=kind, die=die) for name, capacity, kind, die in data["resources"]]
    for index in data["registered"]:
        network.add_resource(resources[index])
    made: list[flow.FlowClass | None] = [None] * len(data["classes"])
    outcomes: list[tuple[int, int, Any]] = []

    def issue() -> Any:
        for number, (time_ps, class_index, size, delay_ps) in enumerate(data["calls"][:calls]):
            if time_ps > env.now:
                yield env.timeout(time_ps - env.now)
            flow_class = None
            if class_index >= 0:
                flow_class = made[class_index]
                if flow_class is None:
                    path, cap = data["classes"][class_index]
                    flow_class = made[class_index] = network.flow_class(tuple(resources[r] for r in path), cap)
            done = network.start(flow_class, size, delay_ps)
            if digest:
                done.callbacks.append(lambda event, number=number: outcomes.append((env.now, number, event.value)))

    env.process(issue())
    start = time.process_time()
    env.run()
    seconds = time.process_time() - start
    if not digest:
        return seconds, network.recomputations, ""
    summary = hashlib.sha256(repr(outcomes).encode())
    for resource in network.resources:
        if resource.rate_log is not None:
            summary.update(repr(list(resource.rate_log)).encode())
        summary.update(repr((resource.bytes_moved, resource.flows_done)).encode())
    return seconds, network.recomputations, summary.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    recording = commands.add_parser("record", help="run the all-gather and write the network's calls")
    recording.add_argument("out", type=Path)
    recording.add_argument("--config", default="a3")
    recording.add_argument("--set", dest="overrides", action="append", default=[], help="a config override KEY=VALUE")
    recording.add_argument("--param", action="append", default=[], help="a workload parameter NAME=INT (n_pes=32)")
    replaying = commands.add_parser("replay", help="replay recorded calls on a bare network")
    replaying.add_argument("calls_file", type=Path)
    replaying.add_argument("--repeat", type=int, default=3)
    replaying.add_argument("--calls", type=int, default=None, help="replay only the first N starts")
    replaying.add_argument("--no-digest", action="store_true", help="skip the outcome digest (e.g. under callgrind)")
    args = parser.parse_args()
    print(running_on())
    if args.command == "record":
        params = {}
        for item in args.param:
            name, _, value = item.partition("=")
            params[name] = int(value)
        record(args.out, args.config, tuple(args.overrides), params)
        return
    with args.calls_file.open("rb") as file:
        data = pickle.load(file)
    runs = [replay(data, args.calls, not args.no_digest) for _ in range(args.repeat)]
    seconds = sorted(run[0] for run in runs)
    recomputations, digest = runs[0][1], runs[0][2]
    print(f"{flow.__file__}: {recomputations} recomputations (recorded run: {data['recomputations']}), CPU s min "
          f"{seconds[0]:.3f} median {seconds[len(seconds) // 2]:.3f}, {seconds[0] / max(recomputations, 1) * 1e6:.1f} us "
          f"per recomputation, digest {digest or '-'}")


if __name__ == "__main__":
    main()
