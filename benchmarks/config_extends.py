"""Config loading: the cost of ``extends`` against loading the same config written out in one file.

    python benchmarks/config_extends.py [--keys 20000] [--repeat 3]

Builds a config of ``--keys`` extra keys (vector latencies ``k0 .. kN``, the one mapping of the
schema that takes any key) three ways with the same resolved content: one file holding it all (the
baseline, no ``extends``); a child that adds the keys to the built-in ``a2``; and a child that
replaces every key of a parent holding them all (each key merged over an existing one). Prints the
load time of each (best of ``--repeat``, each load from files not read before, so no parse is
reused) and the ratio of each ``extends`` variant to the baseline: a merge linear in the keys
keeps it near 1.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import yaml
from running_on import running_on

from npusim.config import load_config


def write_variants(folder: Path, keys: int) -> dict[str, Path]:
    """The three configs of ``keys`` extra latencies in ``folder``; the same resolved content."""
    latencies = {f"k{i}": f"{i % 7 + 1} cycles" for i in range(keys)}
    flat = load_config("a2").resolved
    flat["die"]["vector"]["latency"].update(latencies)
    (folder / "flat.yaml").write_text(yaml.safe_dump(flat, sort_keys=False), encoding="utf-8")
    child = {"extends": "a2", "die": {"vector": {"latency": latencies}}}
    (folder / "adds.yaml").write_text(yaml.safe_dump(child, sort_keys=False), encoding="utf-8")
    parent = {**flat, "die": {**flat["die"], "vector": {**flat["die"]["vector"], "latency": {**flat["die"]["vector"]["latency"], **{k: "9 cycles" for k in latencies}}}}}
    (folder / "parent.yaml").write_text(yaml.safe_dump(parent, sort_keys=False), encoding="utf-8")
    (folder / "replaces.yaml").write_text(yaml.safe_dump({**child, "extends": "parent.yaml"}, sort_keys=False), encoding="utf-8")
    return {"no extends (baseline)": folder / "flat.yaml", "extends a2, adds the keys": folder / "adds.yaml",
            "extends a parent, replaces every key": folder / "replaces.yaml"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(running_on())

    best: dict[str, float] = {}
    resolved: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as root:
        for repeat in range(args.repeat):  # the variants interleaved, so that load on the machine hits them alike
            folder = Path(root) / str(repeat)
            folder.mkdir()
            for name, path in write_variants(folder, args.keys).items():
                start = time.perf_counter()
                loaded = load_config(path)
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
                resolved[name] = loaded.resolved
    assert all(r == resolved["no extends (baseline)"] for r in resolved.values()), "the variants must resolve alike"

    baseline = best["no extends (baseline)"]
    print(f"config loads with {args.keys:,} extra keys (best of {args.repeat}):")
    for name, seconds in best.items():
        print(f"  {name:<40} {seconds:8.3f} s   ratio {seconds / baseline:5.2f}")


if __name__ == "__main__":
    main()
