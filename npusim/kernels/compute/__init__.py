"""PyPTO's tile compute on npusim: the checks of the compute ops, and the programs one AIV core
(vector tile ops) or one AIC core (matmul tile ops) runs for one tile (``docs/pypto.md``)."""
