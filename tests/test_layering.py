"""The one-way layering of docs/architecture.md, enforced: importing the modules of the lower
layers (config, engine, trace, hw, isa, kernels, runtime) in a fresh interpreter pulls in none of
the upper ones (frontend, analysis, cli, plot), and those below the runtime (the AICPU schedulers
of hw included) none of the runtime."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
LOWER = ("config", "engine", "trace", "hw", "isa", "kernels", "runtime")
BELOW_RUNTIME = LOWER[:-1]
UPPER = ("npusim.frontend", "npusim.analysis", "npusim.cli", "npusim.plot")

# Imports the modules one after the other; for each, the upper-layer modules its import brought in.
PROBE = """
import importlib, json, sys
modules, upper = json.loads(sys.argv[1]), tuple(json.loads(sys.argv[2]))
loaded, pulled = set(), {}
for module in modules:
    importlib.import_module(module)
    new = sorted(m for m in sys.modules if (m in upper or m.startswith(tuple(u + "." for u in upper))) and m not in loaded)
    if new:
        pulled[module] = new
        loaded.update(new)
print(json.dumps(pulled))
"""


def lower_modules(layers: tuple[str, ...] = LOWER) -> list[str]:
    modules = []
    for layer in layers:
        for path in sorted((ROOT / "npusim" / layer).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


def imported_upper_modules(modules: list[str], upper: tuple[str, ...] = UPPER) -> dict[str, list[str]]:
    """Per module of ``modules`` (imported in that order in a fresh interpreter), the upper-layer
    modules that its import loaded first."""
    run = subprocess.run([sys.executable, "-c", PROBE, json.dumps(modules), json.dumps(upper)], cwd=ROOT, capture_output=True,
                         text=True, env={"PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_lower_layers_are_found():
    modules = lower_modules()
    assert {"npusim.hw.core", "npusim.isa.program", "npusim.kernels.shmem.checks", "npusim.trace.critical_path", "npusim.runtime.tasks"} <= set(modules)


def test_the_probe_sees_an_upper_module_pulled_in():
    assert imported_upper_modules(["npusim.hw.memory", "npusim.frontend.tensor"])["npusim.frontend.tensor"][0] == "npusim.frontend"


def test_no_lower_module_imports_an_upper_layer():
    offenders = imported_upper_modules(lower_modules())
    assert not offenders, "lower layers import upper ones (docs/architecture.md, 'Imports go one way'): " + json.dumps(offenders, indent=1)


def test_nothing_below_the_runtime_imports_it():
    offenders = imported_upper_modules(lower_modules(BELOW_RUNTIME), ("npusim.runtime",))
    assert not offenders, "hw, isa or kernels import the PyPTO runtime (docs/architecture.md): " + json.dumps(offenders, indent=1)


def test_the_probe_sees_the_runtime_pulled_in():
    assert imported_upper_modules(["npusim.hw.aicpu", "npusim.runtime.launch"], ("npusim.runtime",))["npusim.runtime.launch"][0] == "npusim.runtime"
