"""The built-in fabric kinds, one module each. Importing this package registers them in
:data:`npusim.config.registry.FABRICS`, which imports it on the first look-up of a kind
(docs/architecture.md, "How to add a fabric")."""

from npusim.hw.fabrics import die_to_die, full_mesh, links, pcie_switch, roce, ub_l1_switch, ub_l2_switch

__all__ = ["die_to_die", "full_mesh", "links", "pcie_switch", "roce", "ub_l1_switch", "ub_l2_switch"]
