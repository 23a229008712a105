"""The built-in fabric kinds, one module each. :data:`npusim.config.registry.FABRICS` lists them by
name and imports a kind's module on the first look-up of that kind (docs/architecture.md, "How to
add a fabric")."""
