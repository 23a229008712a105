"""torchair's ``ge_concrete_graph`` package path (``from torchair.ge_concrete_graph import ge_apis as ge``,
as torchair's graph-mode examples import it)."""
