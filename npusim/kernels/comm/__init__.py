"""Communication groups as HCCL sets them up for the kernels that move data themselves (torch_npu's
MoE distribute ops): each rank's window (the HCCL buffer, ``HCCL_BUFFSIZE``) in its own GM, which
the other ranks' AIV cores write into over the scale-up fabric, and the status words they signal
with (:mod:`npusim.kernels.comm.group`); the AIV side of it, one helper per thing a kernel does
with a peer's window (:mod:`npusim.kernels.comm.aiv`)."""
