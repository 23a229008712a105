"""The ops the simulator models, each as check -> plan -> lower (:mod:`npusim.kernels.op`).

Each op's ``op`` module registers it in :data:`npusim.config.registry.OPS`, which lists it by name
and imports that module on the op's first look-up.
"""
