"""``torchair.ge_concrete_graph.ge_apis``: the GE operators torchair's converters build a GE graph
with (``ge.Cast(...)``, ``ge.Add(...)``), used to register a converter for a custom op
(``@register_fx_node_ge_converter``). npusim builds no GE graph: its graph mode captures the
torch ops themselves (``npusim.torchair``), so a program that only imports this module runs; using
one of its operators is an error naming it."""

from __future__ import annotations

from npusim.errors import UsageError


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise UsageError(f"torchair.ge_concrete_graph.ge_apis.{name}: npusim builds no GE graph (its graph mode captures the torch "
                     "ops themselves, docs/torch.md), so GE operators and the converters written with them are not modelled; "
                     "the torch_npu ops npusim models need no converter")
