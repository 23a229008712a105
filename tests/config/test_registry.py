"""Registries and the config sections their providers validate (npusim.config.registry)."""

import json
import subprocess
import sys
import types
from typing import Annotated

import pytest
from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, model_validator

from npusim.config.registry import FABRICS, OPS, KindOf, Registry, SettingsOf, UnknownName


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _RingSpec(_Spec):
    kind: str
    hops: int = Field(gt=0)


class _CoresSettings(_Spec):
    cores: int = Field(gt=0)

    @model_validator(mode="after")
    def _not_seven(self):
        if self.cores == 7:
            raise ValueError("seven cores cannot split the work")
        return self


def _registries():
    fabrics, op_registry = Registry("fabric kind"), Registry("op")

    @fabrics.register("ring")
    class Ring:
        Spec = _RingSpec

    @op_registry.register("scatter")
    class Scatter:
        Settings = _CoresSettings

    @op_registry.register("plain")
    class Plain:  # an op without settings
        pass

    class System(_Spec):
        fabric: Annotated[SerializeAsAny[_Spec], KindOf(fabrics)]
        ops: Annotated[dict[str, SerializeAsAny[_Spec]], SettingsOf(op_registry)] = {}

    return fabrics, op_registry, System


def _errors(system, data):
    with pytest.raises(ValidationError) as caught:
        system.model_validate(data)
    return [(e["type"], e["loc"], str(e.get("ctx", {}).get("error", e["msg"]))) for e in caught.value.errors()]


def test_a_section_is_validated_by_the_model_of_its_kind():
    _, _, system = _registries()
    spec = system.model_validate({"fabric": {"kind": "ring", "hops": 3}, "ops": {"scatter": {"cores": 4}}})
    assert isinstance(spec.fabric, _RingSpec) and spec.fabric.hops == 3
    assert spec.ops["scatter"].cores == 4
    # written out with the fields of each section's own model
    assert spec.model_dump() == {"fabric": {"kind": "ring", "hops": 3}, "ops": {"scatter": {"cores": 4}}}


def test_errors_keep_the_key_paths_of_the_providers_model():
    _, _, system = _registries()
    errors = _errors(system, {"fabric": {"kind": "ring", "hops": 0, "extra": 1}, "ops": {"scatter": {"cores": "x"}}})
    locations = {loc for _, loc, _ in errors}
    assert ("fabric", "hops") in locations and ("fabric", "extra") in locations
    assert ("ops", "scatter", "cores") in locations
    assert any(loc == ("ops", "scatter") and "seven" in message
               for _, loc, message in _errors(system, {"fabric": {"kind": "ring", "hops": 1}, "ops": {"scatter": {"cores": 7}}}))


def test_unknown_names_are_located_and_suggest_the_close_one():
    _, _, system = _registries()
    errors = _errors(system, {"fabric": {"kind": "rnig", "hops": 1}, "ops": {"scater": {}}})
    assert ("value_error", ("fabric", "kind"), "unknown fabric kind 'rnig'; did you mean 'ring'? use one of ring") in errors
    assert any(loc == ("ops", "scater") and "did you mean 'scatter'" in message for _, loc, message in errors)
    assert any("no kind given" in message for _, _, message in _errors(system, {"fabric": {"hops": 1}}))
    assert any("takes no settings" in message for _, _, message in _errors(system, {"fabric": {"kind": "ring", "hops": 1}, "ops": {"plain": {}}}))


def test_a_name_is_registered_once():
    fabrics, _, _ = _registries()
    with pytest.raises(ValueError, match="registered twice"):
        fabrics.register("ring")(type("Other", (), {}))
    with pytest.raises(UnknownName, match="use one of ring"):
        fabrics.get("mesh")
    assert fabrics.names() == ["ring"] and "ring" in fabrics and dict(fabrics)["ring"].Spec is _RingSpec


def test_a_builtin_module_is_imported_on_the_first_look_up_of_its_names(tmp_path, monkeypatch):
    holder = types.ModuleType("npusim_test_holder")
    holder.LAZY = Registry("thing", builtins={"early": "npusim_test_early", "late": "npusim_test_late", "later": "npusim_test_late"})
    monkeypatch.setitem(sys.modules, "npusim_test_holder", holder)
    for module, names in (("npusim_test_early", ["early"]), ("npusim_test_late", ["late", "later"])):
        monkeypatch.delitem(sys.modules, module, raising=False)
        (tmp_path / f"{module}.py").write_text("from npusim_test_holder import LAZY\n" + "".join(
            f"@LAZY.register({name!r})\nclass P{i}:\n    pass\n" for i, name in enumerate(names)))
    monkeypatch.syspath_prepend(str(tmp_path))
    lazy = holder.LAZY
    assert lazy.names() == ["early", "late", "later"] and "later" in lazy and "lat" not in lazy
    with pytest.raises(UnknownName, match="unknown thing 'lat'; did you mean 'late'. use one of early, late, later"):
        lazy.get("lat")
    assert "npusim_test_early" not in sys.modules and "npusim_test_late" not in sys.modules
    assert lazy.get("later").__name__ == "P1" and "npusim_test_late" in sys.modules and "npusim_test_early" not in sys.modules
    assert [name for name, _ in lazy] == ["early", "late", "later"] and "npusim_test_early" in sys.modules


@pytest.mark.parametrize("registry", [FABRICS, OPS], ids=["FABRICS", "OPS"])
def test_the_builtin_names_are_what_their_modules_register(registry):
    for name, module in registry._builtins.items():
        provider = registry.get(name)
        assert provider.__module__ == module, (name, module)
    assert {name for name, provider in registry if provider.__module__.startswith("npusim.")} == registry._builtins.keys()


def test_a_config_is_validated_with_only_the_op_and_fabric_modules_it_names():
    """a3's ``ops:`` names quant_scatter alone: its registration (``op``) is imported, none of the
    other ops' modules, nor its own checks, tiling and lowering (imported when the op is called);
    of the fabric kinds, only the four its levels name (roce, its scale-out, from a2)."""
    probe = ("import json, sys; from npusim.config import load_config; load_config('a3'); "
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('npusim.kernels.', 'npusim.hw.fabrics.')))))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(run.stdout) == ["npusim.hw.fabrics.die_to_die", "npusim.hw.fabrics.roce", "npusim.hw.fabrics.ub_l1_switch", "npusim.hw.fabrics.ub_l2_switch",
                                      "npusim.kernels.op", "npusim.kernels.quant_scatter", "npusim.kernels.quant_scatter.op"]
