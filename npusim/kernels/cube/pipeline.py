"""The program of one output block on an AIC core, as CANN's matmul kernels run it: L1 and L0
double buffering, so that MTE2, MTE1, CUBE and FIXP overlap (pto-isa ``kernels/manual/a2a3/gemm_ar/
gemm_compute_kernel.cpp``; Ascend C Matmul's MDL flow). A core's program is a prologue, its blocks
one after the other, and an epilogue; a pypto matmul tile op is the same for one block.

Per block ``[m, n]`` (``m <= base_m``, ``n <= base_n``) over the whole ``k``:

- MTE2 GM -> L1: each ``step_ka x base_k`` chunk of A and ``step_kb x base_k`` chunk of B (ND rows,
  one burst per row, written in NZ layout: ND2NZ on the way) into the next of the ``l1_buffers`` halves of its
  operand, once MTE1 has released that half (``MTE1 -> MTE2`` "free" flag), announcing it
  (``MTE2 -> MTE1``);
- MTE1 L1 -> L0A / L0B: per k-step of ``base_k`` the slices of both operands (whole fractals; A as
  ``[m, k]``, B as ``[n, k]``, transposed on the way as the operands' layouts need) into the next of the
  ``l0_buffers`` halves, once the cube released it (``CUBE -> MTE1``), handing it over (``MTE1 ->
  CUBE``); a chunk's half is released after its last slice;
- CUBE: one mmad per k-step into the block's L0C buffer (the first starts from zero, or from the
  bias row), after FixPipe released that buffer (``FIXP -> CUBE``);
- FIXP L0C -> GM: once the cube is done (``CUBE -> FIXP``), the block converted to the output dtype
  (dequantised first when the kernel has an epilogue), then the buffer is released.

The free flags are raised once by the prologue and taken once by the epilogue, so a block's flags
balance and the next block's loads and mmads run as soon as the buffers they need are free: the
next block's first chunks load while this block's last k-steps compute, and its first mmad waits
only for this block's store (with one L0C buffer). Which halves a block starts in (its
:class:`Phase`) continues from the block before. ``barrier``: a ``pipe_barrier(ALL)`` after the
store (a kernel that publishes each block, as gemm_ar does).

The epilogue's vectors are loaded GM -> L1 by MTE2 into the area of the block's L0C buffer: the
bias row of the first mmad at the block's start (released by the cube after that mmad), the
dequant scale / offset / bias per column and the per-token scale per row after the block's last
chunks (released by FixPipe after the store), so that the next block's chunks never wait behind a
store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from npusim.isa import CoreProgram, GmAddress, LocalTensor
from npusim.isa.fractal import FRACTAL_ROWS, inner_block, nz_count, padded
from npusim.isa.instructions import Dequant
from npusim.kernels.cube.tiling import CubeTiling
from npusim.kernels.shmem.tile_ops import ADDRESS_SCALAR_INSTRUCTIONS, UB_ALIGN_BYTES, GmView, move_box

EPILOGUE_VECTORS = ("bias", "scale", "offset", "token", "post_bias")
"""The vectors a block may load for its epilogue: ``bias`` (per column, the first mmad starts from it),
``scale`` / ``offset`` / ``post_bias`` (per column, FixPipe's dequant), ``token`` (per row)."""


@dataclass(frozen=True)
class GemmShape:
    """What every block of one kernel shares: the input and output dtypes, the operands' layouts
    (``a_trans``: A is ``[K, M]`` in GM; ``b_trans``: B is ``[N, K]``), the dtype of each epilogue
    vector it has (``vectors``: (name, dtype) pairs, names of :data:`EPILOGUE_VECTORS`; ``scalars``:
    those of one value for every column, per-tensor scales), how FixPipe takes a float32 scale
    (``packed``: as ``npu_trans_quant_param`` packs it, :class:`~npusim.isa.instructions.Dequant`),
    and the name its events carry."""

    in_dtype: np.dtype
    out_dtype: np.dtype
    a_trans: bool
    b_trans: bool
    vectors: tuple[tuple[str, np.dtype], ...] = ()
    name: str = "matmul"
    scalars: frozenset[str] = frozenset()
    packed: bool = False

    @property
    def acc_dtype(self) -> np.dtype:
        return np.dtype(np.int32) if np.issubdtype(self.in_dtype, np.integer) else np.dtype(np.float32)

    def vector_bytes(self, tiling: CubeTiling) -> int:
        """L1 bytes of the epilogue's vectors of one block."""
        return vector_bytes(self.vectors, tiling.base_m, tiling.base_n)


def vector_length(shape: GemmShape, vector: str, m: int, n: int) -> int:
    """Values of epilogue ``vector`` an ``m x n`` block takes: one (a per-tensor scale), m (per row), n (per column)."""
    return 1 if vector in shape.scalars else m if vector == "token" else n


def vector_bytes(vectors: tuple[tuple[str, np.dtype], ...], base_m: int, base_n: int) -> int:
    """L1 bytes of the epilogue ``vectors`` (name, dtype) of one ``base_m x base_n`` block."""
    return sum(padded((base_m if name == "token" else base_n) * np.dtype(dtype).itemsize, UB_ALIGN_BYTES) for name, dtype in vectors)


class Phase(NamedTuple):
    """The halves a block starts in: its first A chunk's L1 half, its first B chunk's, its first
    k-step's L0 half, and its L0C buffer."""

    a: int
    b: int
    l0: int
    l0c: int

    def after(self, k: int, tiling: CubeTiling) -> Phase:
        """The phase of the next block on the same core, after one of ``k``."""
        return Phase((self.a + -(-k // tiling.chunk_ka)) % tiling.l1_buffers, (self.b + -(-k // tiling.chunk_kb)) % tiling.l1_buffers,
                     (self.l0 + -(-k // tiling.base_k)) % tiling.l0_buffers, (self.l0c + 1) % tiling.l0c_buffers)


FIRST = Phase(0, 0, 0, 0)


class BlockViews(NamedTuple):
    """Where one block's operands lie in GM: A from the block's first row (or column, ``a_trans``)
    at k = 0, B from its first column (or row, ``b_trans``) at k = 0, C at the block's first element,
    and each epilogue vector of the kernel's shape at the block's first value (in the order of
    ``GemmShape.vectors``)."""

    a: GmView
    b: GmView
    c: GmView
    vectors: tuple[GmView, ...] = ()

    def bases(self) -> list[tuple]:
        """The GM addresses the block's program is built from, as a template takes them."""
        return [(view.allocation, view.offset_bytes) for view in (self.a, self.b, self.c, *self.vectors)]

    def strides(self) -> tuple:
        return tuple(view.strides for view in (self.a, self.b, self.c, *self.vectors))


class CoreBuffers:
    """The buffers a core's program reserves for a kernel, before its blocks: per operand the L1
    halves of its chunks (in NZ layout, as the GM -> L1 copies write them), the L0A / L0B halves, the
    L0C buffers, and per L0C buffer the epilogue's vectors in L1."""

    def __init__(self, p: CoreProgram, tiling: CubeTiling, shape: GemmShape) -> None:
        item = shape.in_dtype.itemsize
        self.tiling, self.shape = tiling, shape
        fc = inner_block(item)
        a_rows, a_cols = (tiling.chunk_ka, tiling.base_m) if shape.a_trans else (tiling.base_m, tiling.chunk_ka)
        b_rows, b_cols = (tiling.base_n, tiling.chunk_kb) if shape.b_trans else (tiling.chunk_kb, tiling.base_n)
        self.l1_a = [p.alloc(nz_count(a_rows, a_cols, fc), shape.in_dtype, "L1") for _ in range(tiling.l1_buffers)]
        self.l1_b = [p.alloc(nz_count(b_rows, b_cols, fc), shape.in_dtype, "L1") for _ in range(tiling.l1_buffers)]
        self.vectors: list[dict[str, LocalTensor]] = []
        for _ in range(tiling.l0c_buffers):
            area = {}
            for name, dtype in shape.vectors:
                length = tiling.base_m if name == "token" else tiling.base_n
                count = padded(length * np.dtype(dtype).itemsize, UB_ALIGN_BYTES) // np.dtype(dtype).itemsize
                area[name] = p.alloc(count, dtype, "L1")
            self.vectors.append(area)
        block = inner_block(item)
        self.l0a = [p.alloc(nz_count(tiling.base_m, tiling.base_k, block), shape.in_dtype, "L0A") for _ in range(tiling.l0_buffers)]
        self.l0b = [p.alloc(nz_count(tiling.base_n, tiling.base_k, block), shape.in_dtype, "L0B") for _ in range(tiling.l0_buffers)]
        self.l0c = [p.alloc(nz_count(tiling.base_m, tiling.base_n, FRACTAL_ROWS), shape.acc_dtype, "L0C") for _ in range(tiling.l0c_buffers)]

    def free_flags(self) -> list[tuple[str, str, int]]:
        """The flags that say a buffer is free, one per buffer: raised by the prologue, taken by the epilogue."""
        tiling = self.tiling
        flags = [("MTE1", "MTE2", operand * 2 + half) for operand in (0, 1) for half in range(tiling.l1_buffers)]
        flags += [("CUBE", "MTE1", half) for half in range(tiling.l0_buffers)]
        flags += [("FIXP", "CUBE", half) for half in range(tiling.l0c_buffers)]
        names = [name for name, _ in self.shape.vectors]
        if "bias" in names:
            flags += [("CUBE", "MTE2", half) for half in range(tiling.l0c_buffers)]
        if set(names) - {"bias"}:
            flags += [("FIXP", "MTE2", half) for half in range(tiling.l0c_buffers)]
        return flags


def prologue(p: CoreProgram, buffers: CoreBuffers) -> None:
    """Every buffer starts free."""
    for src, dst, event in buffers.free_flags():
        p.set_flag(src, dst, event)


def epilogue(p: CoreProgram, buffers: CoreBuffers) -> None:
    """Every buffer is free again: each free flag raised is taken before the program ends."""
    for src, dst, event in buffers.free_flags():
        p.wait_flag(src, dst, event)


def block(p: CoreProgram, buffers: CoreBuffers, views: BlockViews, m: int, n: int, k: int, phase: Phase, *,
          barrier: bool = False) -> None:
    """Append the program of one ``m x n`` output block over ``k`` (module docstring)."""
    tiling, shape = buffers.tiling, buffers.shape
    name = shape.name
    p.scalar(ADDRESS_SCALAR_INSTRUCTIONS, name=f"{name} block address")
    area = dict(buffers.vectors[phase.l0c])
    names = [vector for vector, _ in shape.vectors]
    dequantised = [vector for vector in names if vector != "bias"]

    def load_vectors(which: list[str]) -> None:
        for vector, view in zip(names, views.vectors):
            if vector in which:
                local = area[vector] = area[vector][: vector_length(shape, vector, m, n)]
                move_box(p, local, view, (local.count,), (local.dtype.itemsize,), to_gm=False, name=f"{name} MTE2 {vector} GM->L1")

    if "bias" in names:  # the first mmad's bias row, once the cube has used the one before in this area
        p.wait_flag("CUBE", "MTE2", phase.l0c)
        load_vectors(["bias"])
        p.set_flag("MTE2", "CUBE", phase.l0c)
    l0c = buffers.l0c[phase.l0c]
    steps = list(range(0, k, tiling.base_k))
    chunks = {0: -1, 1: -1}  # operand -> the chunk in L1
    for index, k_at in enumerate(steps):
        k_len = min(tiling.base_k, k - k_at)
        loaded = []
        for operand, size, start in ((0, tiling.chunk_ka, phase.a), (1, tiling.chunk_kb, phase.b)):
            chunk = k_at // size
            if chunk == chunks[operand]:
                continue
            chunks[operand] = chunk
            half = (start + chunk) % tiling.l1_buffers
            event = 2 * operand + half
            p.wait_flag("MTE1", "MTE2", event)
            k_from, k_size = chunk * size, min(size, k - chunk * size)
            if operand == 0:
                box, at = ((k_size, m), (k_from, 0)) if shape.a_trans else ((m, k_size), (0, k_from))
                local, view = buffers.l1_a[half], views.a
            else:
                box, at = ((n, k_size), (0, k_from)) if shape.b_trans else ((k_size, n), (k_from, 0))
                local, view = buffers.l1_b[half], views.b
            source = view.shifted(at)
            p.load_nd2nz(local, GmAddress(source.allocation, source.offset_bytes), box[0], box[1], source.strides[0],
                         name=f"{name} MTE2 GM->L1")
            p.set_flag("MTE2", "MTE1", event)
            loaded.append(event)
        h0 = (phase.l0 + index) % tiling.l0_buffers
        p.wait_flag("CUBE", "MTE1", h0)
        for event in loaded:
            p.wait_flag("MTE2", "MTE1", event)
        a_chunk, b_chunk = chunks[0], chunks[1]
        a_half, b_half = (phase.a + a_chunk) % tiling.l1_buffers, (phase.b + b_chunk) % tiling.l1_buffers
        a_in, b_in = k_at - a_chunk * tiling.chunk_ka, k_at - b_chunk * tiling.chunk_kb
        a_rows = padded(min(tiling.chunk_ka, k - a_chunk * tiling.chunk_ka) if shape.a_trans else m, FRACTAL_ROWS)
        b_rows = padded(n if shape.b_trans else min(tiling.chunk_kb, k - b_chunk * tiling.chunk_kb), FRACTAL_ROWS)
        l0a, l0b = buffers.l0a[h0], buffers.l0b[h0]
        if shape.a_trans:  # L1 holds [k, m]: its rows a_in.., transposed into [m, k]
            p.extract_nz(l0a, buffers.l1_a[a_half], a_rows, a_in, 0, k_len, m, transpose=True, name=f"{name} MTE1 L1->L0A")
        else:
            p.extract_nz(l0a, buffers.l1_a[a_half], a_rows, 0, a_in, m, k_len, name=f"{name} MTE1 L1->L0A")
        if shape.b_trans:  # L1 holds [n, k]
            p.extract_nz(l0b, buffers.l1_b[b_half], b_rows, 0, b_in, n, k_len, name=f"{name} MTE1 L1->L0B")
        else:  # L1 holds [k, n]: transposed into [n, k]
            p.extract_nz(l0b, buffers.l1_b[b_half], b_rows, b_in, 0, k_len, n, transpose=True, name=f"{name} MTE1 L1->L0B")
        last = index + 1 == len(steps)
        for operand, size, chunk, half in ((0, tiling.chunk_ka, a_chunk, a_half), (1, tiling.chunk_kb, b_chunk, b_half)):
            if last or steps[index + 1] // size != chunk:  # the chunk's last slice is in L0: its L1 half is free
                p.set_flag("MTE1", "MTE2", 2 * operand + half)
        p.set_flag("MTE1", "CUBE", h0)
        p.wait_flag("MTE1", "CUBE", h0)
        bias = None
        if index == 0:
            p.wait_flag("FIXP", "CUBE", phase.l0c)
            if "bias" in names:
                p.wait_flag("MTE2", "CUBE", phase.l0c)
                bias = area["bias"]
        p.mmad(l0c, l0a, l0b, m, n, k_len, accumulate=index > 0, bias=bias, name=f"{name} mmad")
        if bias is not None:
            p.set_flag("CUBE", "MTE2", phase.l0c)
        p.set_flag("CUBE", "MTE1", h0)
    if dequantised:  # after the block's chunks in MTE2's order: the next block's chunks do not wait behind this store
        p.wait_flag("FIXP", "MTE2", phase.l0c)
        load_vectors(dequantised)
        p.set_flag("MTE2", "FIXP", phase.l0c)
    p.set_flag("CUBE", "FIXP", phase.l0c)
    p.wait_flag("CUBE", "FIXP", phase.l0c)
    dequant = None
    if dequantised:
        p.wait_flag("MTE2", "FIXP", phase.l0c)
        fields = {"scale": "scale", "offset": "offset", "token": "token", "post_bias": "bias"}
        dequant = Dequant(**{fields[v]: area[v] for v in dequantised}, packed=shape.packed)
    c = views.c
    p.fixpipe(GmAddress(c.allocation, c.offset_bytes), l0c, m, n, shape.out_dtype, c.strides[0], dequant=dequant,
              name=f"{name} FIXP L0C->GM")
    if dequantised:
        p.set_flag("FIXP", "MTE2", phase.l0c)
    p.set_flag("FIXP", "CUBE", phase.l0c)
    if barrier:
        p.pipe_barrier("ALL")
