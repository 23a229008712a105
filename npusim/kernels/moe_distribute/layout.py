"""Each rank's window areas for the MoE ops, as hicann/ops-transformer's kernels lay them out
(``moe_distribute_dispatch_v2.h``, ``moe_distribute_combine_v2.h``, read at c29bc10).

- **dispatch** area: one block per (sender, local expert) (``expertPerSizeOnWin`` = max_bs rows
  each, block ``sender * local_experts + expert``; a shared-expert rank: one block per sender), a
  row per token of ``row_stride`` bytes (aligned to 512: ``hAlignWinSize``) holding the token
  (``Align32(H x itemsize)`` bytes), its dynamic scale (one float32 in a 32-byte slot) and the
  ``(sender, token, k)`` triple (3 int32): ``row_bytes`` are moved per row. Status: one 32-byte
  entry (flag, count) per block, in the order ``expert * ep_world_size + sender`` the receiver
  reads them in.
- **combine** area: the K (+ shared experts) rows of each token a rank sent out come back to it,
  row ``token * (K + shared) + k`` of ``Align512(H x itemsize)`` bytes; status: one entry per such row.
- **tp** area (a TP domain of 2): the peer's rows, ``row_stride`` apart, and one status entry per core.
"""

from __future__ import annotations

from dataclasses import dataclass

from npusim.kernels.comm.group import STATUS_BYTES
from npusim.kernels.moe_distribute.checks import TRIPLE, MoeShape, align

UB_BLOCK = 32
WINDOW_ALIGN = 512
SCALE_SLOT = 32
V1_SCALE_PAD = 128


@dataclass(frozen=True)
class RowLayout:
    """A row in a dispatch window: the token's ``data_bytes``, the scale at ``scale_offset``, the
    triple at ``triple_offset`` (None: no triple); ``row_bytes`` moved, ``row_stride`` apart.

    The second op pair (v2) aligns the token to 32 bytes, keeps a 32-byte scale slot and the triple
    after it, rows 512-byte aligned (``hAlignWinSize``); the first pair (v1) puts the scale right
    after the token in a 128-byte pad when quantising (``scaleParamPad``), no triple, rows back to back."""

    data_bytes: int
    scale_offset: int
    triple_offset: int | None
    row_bytes: int
    row_stride: int
    weight_offset: int | None = None
    """comm_alg "hierarchy": the pair's expert weight (float32) after the triple (``expand_scales``)."""


def dispatch_row(shape: MoeShape, out_itemsize: int, version: int = 2, quant: bool = False) -> RowLayout:
    data = shape.h * out_itemsize
    if version == 1:
        row = data + (V1_SCALE_PAD if quant else 0)
        return RowLayout(data, data, None, row, row)
    scale = align(data, UB_BLOCK)
    triple = scale + SCALE_SLOT
    row = triple + TRIPLE * 4
    return RowLayout(data, scale, triple, row, align(row, WINDOW_ALIGN))


def hierarchy_row(shape: MoeShape, out_itemsize: int) -> RowLayout:
    """A3 "hierarchy": the second pair's row with the pair's weight after the triple."""
    base = dispatch_row(shape, out_itemsize)
    assert base.triple_offset is not None
    weight = base.triple_offset + TRIPLE * 4
    return RowLayout(base.data_bytes, base.scale_offset, base.triple_offset, weight + 4, align(weight + 4, WINDOW_ALIGN), weight)


def hosted_experts(shape: MoeShape, rank: int) -> int:
    """Experts rank ``rank`` hosts: 1 on a shared-expert rank, the local experts on a MoE rank."""
    return 1 if rank < shape.shared_expert_rank_num else shape.local_experts


def dispatch_blocks(shape: MoeShape, rank: int) -> int:
    """Blocks of rank ``rank``'s dispatch area (and its status entries): senders x its experts."""
    return shape.ep_world_size * hosted_experts(shape, rank)


def dispatch_row_offset(shape: MoeShape, row: RowLayout, rank: int, sender: int, local: int, position: int) -> int:
    """Byte offset in rank ``rank``'s dispatch area (one half) of row ``position`` of block (sender, local expert)."""
    block = sender * hosted_experts(shape, rank) + local
    return (block * shape.max_bs + position) * row.row_stride


def dispatch_entry(shape: MoeShape, sender: int, local: int) -> int:
    """The status entry of (sender, local expert): the receiver reads them expert by expert."""
    return local * shape.ep_world_size + sender


def dispatch_area_bytes(shape: MoeShape, row: RowLayout, rank: int) -> tuple[int, int]:
    """(data bytes of one half, status bytes) of rank ``rank``'s dispatch area."""
    blocks = dispatch_blocks(shape, rank)
    return blocks * shape.max_bs * row.row_stride, blocks * STATUS_BYTES


def combine_slots(shape: MoeShape) -> int:
    """Rows of a token coming back: its K experts and the shared experts."""
    return shape.k + shape.shared_experts


def combine_row_stride(shape: MoeShape, itemsize: int) -> int:
    return align(shape.h * itemsize, WINDOW_ALIGN)


def combine_area_bytes(shape: MoeShape, itemsize: int) -> tuple[int, int]:
    rows = shape.max_bs * combine_slots(shape)
    return rows * combine_row_stride(shape, itemsize), rows * STATUS_BYTES
