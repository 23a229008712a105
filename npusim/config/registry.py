"""Registries of the things a config names: fabric kinds, ops (each a class, found by name).

A provider registers itself when its module is imported::

    @FABRICS.register("full_mesh")
    class FullMesh:
        Spec = FullMeshSpec          # the pydantic model of its config section
        ...

The built-in providers are listed by name with the module that registers each, imported on the
first look-up of one of its names, as entry points are, so that this layer never imports the layers
that implement the kinds (the hardware model, the kernels): imports stay one way
(docs/architecture.md), and a run imports only the ops its config and workload name. A provider of
one's own is registered by importing its module before the config is loaded.

A config section whose shape depends on its ``kind:`` is annotated with :class:`KindOf`; a mapping
of sections keyed by provider name (``ops: {quant_scatter: {...}}``) with :class:`SettingsOf`.
Either is validated by the model the provider declares, and its errors keep their key paths, so the
loader still reports ``FILE:LINE: key.path: problem``.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, GetCoreSchemaHandler, ValidationError, ValidatorFunctionWrapHandler
from pydantic_core import InitErrorDetails, core_schema

P = TypeVar("P")


class UnknownName(LookupError):
    """A name no provider of the registry was registered under; the message lists the known ones."""


class Registry(Generic[P]):
    """Providers of one concern (``what``: "fabric kind", "op") by name; ``builtins``: the name of
    each built-in provider -> the module whose import registers it (imported when the name is first
    looked up; all of them when the providers are listed)."""

    def __init__(self, what: str, builtins: Mapping[str, str] | None = None) -> None:
        self.what = what
        self._builtins = dict(builtins or {})
        self._providers: dict[str, P] = {}

    def register(self, name: str) -> Callable[[P], P]:
        """Class decorator: register the class under ``name`` (a second provider of a name is a bug)."""

        def add(provider: P) -> P:
            if name in self._providers and self._providers[name] is not provider:
                raise ValueError(f"{self.what} {name!r} is registered twice: by {self._providers[name]!r} and {provider!r}")
            self._providers[name] = provider
            return provider

        return add

    def _load_builtins(self) -> None:
        for module in dict.fromkeys(self._builtins.values()):
            importlib.import_module(module)

    def get(self, name: str) -> P:
        """The provider registered as ``name``; :class:`UnknownName` (with a did-you-mean) if none is."""
        provider = self._providers.get(name)
        if provider is None and name in self._builtins:
            importlib.import_module(self._builtins[name])
            provider = self._providers.get(name)
        if provider is None:
            raise UnknownName(self.unknown(name))
        return provider

    def unknown(self, name: object) -> str:
        """The message for a name nobody registered."""
        names = self.names()
        match = difflib.get_close_matches(str(name), names, n=1)
        hint = f"did you mean {match[0]!r}? " if match else ""
        return f"unknown {self.what} {name!r}; {hint}use one of {', '.join(names) or '(none registered)'}"

    def names(self) -> list[str]:
        """Every name, registered or built in, sorted."""
        return sorted(self._providers.keys() | self._builtins.keys())

    def __iter__(self) -> Iterator[tuple[str, P]]:
        self._load_builtins()
        return iter(sorted(self._providers.items()))

    def __contains__(self, name: object) -> bool:
        return name in self._providers or name in self._builtins


# -- config sections validated by a provider's model --------------------------------------------


@dataclass(frozen=True)
class KindOf:
    """Annotation metadata: the section is validated by ``registry.get(section['kind']).<attribute>``,
    e.g. ``Annotated[SerializeAsAny[FabricSpec], KindOf(FABRICS)]`` (``SerializeAsAny`` so that the
    section is written out with the fields of its own kind)."""

    registry: Registry[Any]
    attribute: str = "Spec"
    optional: bool = False
    """The section may be absent (``null``)."""

    def model_for(self, data: object) -> type[BaseModel] | None:
        """The model of the kind ``data`` names (None when it names no registered kind)."""
        kind = data.get("kind") if isinstance(data, dict) else getattr(data, "kind", None)
        try:
            return getattr(self.registry.get(kind), self.attribute) if isinstance(kind, str) else None
        except UnknownName:
            return None

    def _validate(self, value: object, handler: ValidatorFunctionWrapHandler) -> BaseModel | None:
        if value is None and self.optional:
            return None
        names = ", ".join(self.registry.names())
        if isinstance(value, BaseModel):
            value = value.model_dump()
        if not isinstance(value, dict):
            raise ValueError(f"write a mapping with a `kind:` key here (one of {names})")
        kind = value.get("kind")
        if kind is None:
            raise ValueError(f"no kind given; add `kind:` with one of {names}")
        if not isinstance(kind, str) or kind not in self.registry:
            raise _value_error("kind", kind, self.registry.unknown(kind))
        model = self.model_for(value)
        assert model is not None
        return model.model_validate(value)  # its ValidationError keeps the keys' paths

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_wrap_validator_function(self._validate, handler(source))


@dataclass(frozen=True)
class SettingsOf:
    """Annotation metadata: a mapping whose key names a provider and whose value that provider's
    ``<attribute>`` model validates, e.g. ``Annotated[dict[str, SerializeAsAny[Spec]], SettingsOf(OPS)]``."""

    registry: Registry[Any]
    attribute: str = "Settings"

    def model_for(self, name: object) -> type[BaseModel] | None:
        """The model of provider ``name`` (None when none is registered or it takes no settings)."""
        try:
            return getattr(self.registry.get(name), self.attribute, None) if isinstance(name, str) else None
        except UnknownName:
            return None

    def _validate(self, value: object, handler: ValidatorFunctionWrapHandler) -> dict[str, BaseModel]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError(f"write a mapping of {self.registry.what} names to their settings here")
        validated: dict[str, BaseModel] = {}
        for name, settings in value.items():
            if name not in self.registry:
                raise _value_error(name, settings, self.registry.unknown(name))
            model = self.model_for(name)
            if model is None:
                raise _value_error(name, settings, f"{self.registry.what} {name!r} takes no settings; remove it")
            if isinstance(settings, model):
                validated[name] = settings
                continue
            try:
                validated[name] = model.model_validate(settings if settings is not None else {})
            except ValidationError as error:
                raise _under(name, error) from None
        return validated

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_wrap_validator_function(self._validate, handler(source))


def _value_error(key: str, given: object, message: str) -> ValidationError:
    """A ValidationError located at ``key`` of the section being validated."""
    return ValidationError.from_exception_data("config", [{"type": "value_error", "loc": (key,), "input": given, "ctx": {"error": ValueError(message)}}])


def _under(key: str, error: ValidationError) -> ValidationError:
    """``error`` with ``key`` put in front of every location (a model validated by hand inside a
    mapping does not know the key it sits under)."""
    details: list[InitErrorDetails] = [
        {"type": e["type"], "loc": (key, *e["loc"]), "input": e["input"], **({"ctx": e["ctx"]} if "ctx" in e else {})}  # type: ignore[typeddict-item]
        for e in error.errors(include_url=False)
    ]
    return ValidationError.from_exception_data(error.title, details)


FABRICS: Registry[Any] = Registry("fabric kind", builtins={kind: f"npusim.hw.fabrics.{kind}" for kind in (
    "die_to_die", "full_mesh", "links", "pcie_switch", "roce", "ub_l1_switch", "ub_l2_switch")})
"""Fabric kinds (``fabric.kind`` and the other levels of a system), implemented in npusim.hw.fabrics."""

OPS: Registry[Any] = Registry("op", builtins={
    "cast": "npusim.kernels.elementwise.op",
    "dequant_swiglu_quant": "npusim.kernels.swiglu_quant.op",
    "fill": "npusim.kernels.elementwise.op",
    "matmul": "npusim.kernels.matmul.op",
    "quant_matmul": "npusim.kernels.quant_matmul.op",
    "grouped_matmul": "npusim.kernels.grouped_matmul.op",
    "moe_distribute_combine": "npusim.kernels.moe_distribute.combine",
    "moe_distribute_combine_v2": "npusim.kernels.moe_distribute.combine_v2",
    "moe_distribute_dispatch": "npusim.kernels.moe_distribute.dispatch",
    "moe_distribute_dispatch_v2": "npusim.kernels.moe_distribute.dispatch_v2",
    "moe_gating_top_k": "npusim.kernels.moe_gating.op",
    "add": "npusim.kernels.elementwise.op",
    "sub": "npusim.kernels.elementwise.op",
    "quant_scatter": "npusim.kernels.quant_scatter.op",
    "quantize": "npusim.kernels.quantize.op",
    "scatter_update": "npusim.kernels.scatter_update.op",
})
"""Ops the simulator models (their settings under ``ops:``), implemented in npusim.kernels."""

COLLECTIVES: Registry[Any] = Registry("collective algorithm", builtins={name: f"npusim.kernels.hccl.{name}" for name in (
    "double_ring", "mesh", "nb", "nhr", "pairwise", "pipeline", "rhd", "ring")})
"""HCCL's collective algorithms (``hccl.algo``), each a schedule of transfers over the fabric levels,
implemented in npusim.kernels.hccl."""
