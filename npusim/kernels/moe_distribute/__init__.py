"""torch_npu's MoE expert-parallel communication ops: ``npu_moe_distribute_dispatch_v2`` /
``npu_moe_distribute_combine_v2`` and the first pair ``npu_moe_distribute_dispatch`` /
``npu_moe_distribute_combine`` (aclnnMoeDistributeDispatch / Combine and their V2..V4).

- :mod:`.checks`: the op pages' rules (per product series and ``comm_alg``), the shapes of the
  outputs, the window each rank needs;
- :mod:`.routing`: where each token goes and where it lands, from the expert ids (what the
  kernel's vector and scalar code computes);
- :mod:`.layout`: each rank's window areas (rows, status entries);
- :mod:`.routes`: one module per ``comm_alg`` writing the per-core programs of each phase;
- the ops: :mod:`.dispatch_v2`, :mod:`.combine_v2`, :mod:`.dispatch`, :mod:`.combine`.

See ``docs/moe.md``.
"""
