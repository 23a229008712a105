"""torch's matrix products on the npu device (``torch.matmul``, ``mm``, ``bmm``, ``addmm``,
``nn.functional.linear``) as one registered op on the cube kernels of :mod:`npusim.kernels.cube`."""
