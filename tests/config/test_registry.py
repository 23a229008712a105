"""Registries and the config sections their providers validate (npusim.config.registry)."""

import sys
import types
from typing import Annotated

import pytest
from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, model_validator

from npusim.config.registry import KindOf, Registry, SettingsOf, UnknownName


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


def test_builtin_modules_are_imported_on_the_first_look_up(tmp_path, monkeypatch):
    holder = types.ModuleType("npusim_test_holder")
    holder.LAZY = Registry("thing", builtins=("npusim_test_provider",))
    monkeypatch.setitem(sys.modules, "npusim_test_holder", holder)
    monkeypatch.delitem(sys.modules, "npusim_test_provider", raising=False)
    (tmp_path / "npusim_test_provider.py").write_text(
        "from npusim_test_holder import LAZY\n@LAZY.register('late')\nclass Late:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "npusim_test_provider" not in sys.modules
    assert holder.LAZY.names() == ["late"] and "npusim_test_provider" in sys.modules
