"""The tiling of a cube kernel, as CANN's matmul kernels take it: Ascend C Matmul's ``TCubeTiling``
(baseM / baseN / baseK, stepKa / stepKb, depthA1 / depthB1, dbL0A / dbL0B / dbL0C; CANN API
reference atlasascendc_api_07_0673 "TCubeTiling结构体") and the way the kernel spreads its output
blocks over the die's AIC cores.

- One **output block** ``[base_m, base_n]`` is accumulated in L0C over the whole k (one block per
  Matmul ``Iterate``); k is walked in **k-steps** of ``base_k``: one mmad of ``[base_m, base_k] x
  [base_k, base_n]`` each, its operands moved L1 -> L0A / L0B by MTE1.
- **L1** holds chunks of ``step_ka`` (A) and ``step_kb`` (B) k-steps, loaded GM -> L1 by MTE2;
  with ``l1_buffers = 2`` two chunks of each operand fit (depthA1 = 2 x stepKa, "double buffer"),
  so the next chunk loads while MTE1 reads the current one.
- **L0A / L0B** hold ``l0_buffers`` k-steps (dbL0A / dbL0B = 2: MTE1 fills one while the cube
  reads the other); **L0C** holds ``l0c_buffers`` output blocks (dbL0C = 2: FixPipe stores one
  block while the cube accumulates the next).

Capacities (TCubeTiling's rules, with the fractal alignment of pypto-set_cube_tile_shapes.md
空间约束: outer axes to 16 elements, k to 32 bytes): ``l0_buffers x align(base_m) x align(base_k) x
itemsize <= L0A`` (likewise L0B with base_n), ``l0c_buffers x align16(base_m) x align16(base_n) x 4
<= L0C`` (fp32, or int32 for int8), ``l1_buffers x (align(base_m) x step_ka + align(base_n) x
step_kb) x align(base_k) x itemsize`` plus the epilogue's vectors ``<= L1``.

The default is the documented one of CANN's MatMulV3 on a die with 128 KiB of L0C
(hicann/ops-nn ``matmul/mat_mul_v3/op_host/op_tiling/matmul_v3_base_tiling.cpp``): the basic block
128 x 256 with base_k = 128 bytes of k (``ResetBase``, ``CALC_M_BASIC``); base_m shrunk to spread
the blocks over the cores when there are fewer than cores (``CalBaseSize``); L1 split in halves,
``depth = L1 / 2 / (base x base_k x itemsize)``, halved for the smaller operand when both do not
fit, ``step = depth / 2`` (double buffer), at most the k-steps of k, the larger a multiple of the
smaller, and 8 lowered to 4 for the 128 x 256 x 64 block (``CalL1Tiling``,
``OptimizeBasicKernelStepK``); dbL0C off (``ResetBase``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from npusim.errors import OpArgumentError, ResourceError
from npusim.isa.fractal import FRACTAL_BYTES, FRACTAL_ROWS, padded
from npusim.isa.target import CubeTarget

ACC_BYTES = 4
"""Bytes of one L0C element: fp32, or int32 for int8 inputs."""
BASIC_BLOCK = (128, 256)
"""MatMulV3's basic output block (base_m, base_n) on a die with 128 KiB of L0C (ResetBase)."""
BASIC_K_BYTES = 128
"""MatMulV3's base_k in bytes of k (BASIC_BLOCK_K_128_BYTE)."""
ORDERS = ("row", "zigzag")
ASSIGNMENTS = ("round_robin", "contiguous")


def align_k(elements: int, itemsize: int) -> int:
    """``elements`` of k rounded up to whole 32-byte fractal rows (C0)."""
    return padded(elements * itemsize, FRACTAL_BYTES) // itemsize


def align_outer(elements: int, itemsize: int) -> int:
    """An outer (m or n) size rounded up as a fractal needs it: 16 rows (32 for int8, whose
    fractal is 16 x 32 bytes and whose tiles pypto aligns to 32: set_cube_tile_shapes 空间约束)."""
    return padded(elements, 32 if itemsize == 1 else FRACTAL_ROWS)


@dataclass(frozen=True)
class CubeTiling:
    """One kernel's ``TCubeTiling`` (see the module docstring); sizes in elements."""

    base_m: int
    base_n: int
    base_k: int
    step_ka: int
    step_kb: int
    l1_buffers: int = 2
    l0_buffers: int = 2
    l0c_buffers: int = 1

    @property
    def chunk_ka(self) -> int:
        """Elements of k in one L1 chunk of A."""
        return self.step_ka * self.base_k

    @property
    def chunk_kb(self) -> int:
        return self.step_kb * self.base_k

    def needs(self, itemsize: int, epilogue_bytes: int = 0) -> dict[str, int]:
        """Bytes of L1, L0A, L0B and L0C the tiling takes for inputs of ``itemsize`` bytes
        (``epilogue_bytes``: the L1 the epilogue's vectors take, once per L0C buffer)."""
        m, n = align_outer(self.base_m, itemsize), align_outer(self.base_n, itemsize)
        k = align_k(self.base_k, itemsize)
        return {
            "L1": self.l1_buffers * (m * self.step_ka + n * self.step_kb) * k * itemsize + self.l0c_buffers * epilogue_bytes,
            "L0A": self.l0_buffers * m * k * itemsize,
            "L0B": self.l0_buffers * n * k * itemsize,
            "L0C": self.l0c_buffers * padded(self.base_m, FRACTAL_ROWS) * padded(self.base_n, FRACTAL_ROWS) * ACC_BYTES,
        }

    def check(self, target: CubeTarget, itemsize: int, what: str, epilogue_bytes: int = 0) -> None:
        """The fields' own rules (OpArgumentError naming the field) and the capacities of
        ``target``'s buffers (ResourceError naming the buffer and the fields that fill it)."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise OpArgumentError(f"{what}: tiling {field.name} = {value!r}: must be a positive int")
        for name in ("l1_buffers", "l0_buffers", "l0c_buffers"):
            if getattr(self, name) > 2:
                raise OpArgumentError(f"{what}: tiling {name} = {getattr(self, name)}: must be 1 or 2 (single or double buffer)")
        if (self.base_k * itemsize) % FRACTAL_BYTES or self.base_k % FRACTAL_ROWS:
            raise OpArgumentError(f"{what}: tiling base_k = {self.base_k}: must be a multiple of 16 elements and of 32 bytes "
                                  f"({max(FRACTAL_BYTES // itemsize, FRACTAL_ROWS)} elements of {itemsize} bytes), the fractal "
                                  "alignment of k (pypto-set_cube_tile_shapes.md 对齐约束)")
        limits = {"L1": target.l1_bytes, "L0A": target.l0a_bytes, "L0B": target.l0b_bytes, "L0C": target.l0c_bytes}
        fills = {"L1": "l1_buffers x (base_m x step_ka + base_n x step_kb) x base_k", "L0A": "l0_buffers x base_m x base_k",
                 "L0B": "l0_buffers x base_n x base_k", "L0C": "l0c_buffers x base_m x base_n x 4"}
        for buffer, need in self.needs(itemsize, epilogue_bytes).items():
            if need > limits[buffer]:
                raise ResourceError(f"{what}: tiling {self.text()} needs {need} bytes of {buffer} ({fills[buffer]}, fractal-aligned, "
                                    f"{itemsize}-byte inputs), more than its {limits[buffer]} bytes; choose smaller blocks or fewer buffers")

    def text(self) -> str:
        return (f"base {self.base_m}x{self.base_n}x{self.base_k} step_ka={self.step_ka} step_kb={self.step_kb} "
                f"buffers L1/L0/L0C {self.l1_buffers}/{self.l0_buffers}/{self.l0c_buffers}")


@dataclass(frozen=True)
class CubeSchedule:
    """How a kernel spreads its output blocks over the AIC cores: ``cores`` used (blockDim);
    ``order`` of the blocks: ``"row"`` (m outer, n inner) or ``"zigzag"`` (the same, every odd row of
    blocks walked backwards, so that consecutive blocks share a column of B: MatMulV3's reversed
    n walk, pto-isa gemm_ar's SwizzleTileIndex); ``assignment``: ``"round_robin"`` (block i on core
    i mod cores: MatMulV3's ``index += usedCoreNum``) or ``"contiguous"`` (each core a run of
    consecutive blocks, the first ``blocks mod cores`` cores one more: gemm_ar's
    GEMM_AR_BLOCK_START_TILE); ``tile_barrier``: a ``pipe_barrier(ALL)`` after each block's store
    (a kernel that signals each block as done, as gemm_ar does), else the next block's loads and
    mmads overlap this one's store."""

    cores: int
    order: str = "row"
    assignment: str = "round_robin"
    tile_barrier: bool = False

    def check(self, target: CubeTarget, what: str) -> None:
        if not isinstance(self.cores, int) or isinstance(self.cores, bool) or not 1 <= self.cores <= target.cores:
            raise OpArgumentError(f"{what}: tiling cores = {self.cores!r}: must be 1 to {target.cores} (the die's "
                                  f"{target.core_kind.upper()} cores)")
        if self.order not in ORDERS:
            raise OpArgumentError(f"{what}: tiling order = {self.order!r}: must be one of {', '.join(ORDERS)}")
        if self.assignment not in ASSIGNMENTS:
            raise OpArgumentError(f"{what}: tiling assignment = {self.assignment!r}: must be one of {', '.join(ASSIGNMENTS)}")
        if not isinstance(self.tile_barrier, bool):
            raise OpArgumentError(f"{what}: tiling tile_barrier = {self.tile_barrier!r}: must be True or False")

    def blocks_of_cores(self, rows: int, cols: int) -> list[list[tuple[int, int]]]:
        """The output blocks (block row, block column) of a ``rows x cols`` grid each core runs, in
        its order."""
        grid: list[tuple[int, int]] = []
        for r in range(rows):
            walk = range(cols - 1, -1, -1) if self.order == "zigzag" and r % 2 else range(cols)
            grid.extend((r, c) for c in walk)
        return assign(grid, self.cores, self.assignment)


def assign(items: list, cores: int, assignment: str) -> list[list]:
    """``items`` spread over ``cores`` by ``assignment`` (see :class:`CubeSchedule`)."""
    if assignment == "round_robin":
        return [items[core::cores] for core in range(cores)]
    base, extra = divmod(len(items), cores)
    out, at = [], 0
    for core in range(cores):
        count = base + (core < extra)
        out.append(items[at:at + count])
        at += count
    return out


TILING_FIELDS = tuple(f.name for f in dataclasses.fields(CubeTiling)) + tuple(f.name for f in dataclasses.fields(CubeSchedule))
"""The keys a tiling choice may give (``torch_npu.options(matmul_tiling={...})``)."""


def default_tiling(m: int, n: int, k: int, itemsize: int, target: CubeTarget, *, blocks_beside: int = 1, reserved_l1: int = 0) -> CubeTiling:
    """MatMulV3's default tiling (module docstring) for an ``m x n x k`` problem of ``itemsize``-byte
    inputs on ``target``; ``blocks_beside``: how many such problems run in the same kernel (batches,
    groups), which fill the cores too; ``reserved_l1``: bytes of L1 the kernel keeps for other things
    (the epilogue's vectors: CalL1Tiling's reserved bias table)."""
    base_m, base_n = BASIC_BLOCK
    base_k = BASIC_K_BYTES // itemsize
    n_blocks = -(-n // base_n)
    per_core = max(target.cores // max(n_blocks * blocks_beside, 1), 1)
    base_m = min(base_m, padded(max(-(-m // per_core), 1), FRACTAL_ROWS))  # CalBaseSize
    base_n = min(base_n, padded(n, FRACTAL_ROWS))
    base_k = min(base_k, padded(k, max(FRACTAL_BYTES // itemsize, FRACTAL_ROWS)))
    l1 = target.l1_bytes - reserved_l1
    depth_a = l1 // 2 // (base_m * base_k * itemsize)
    depth_b = l1 // 2 // (base_n * base_k * itemsize)
    if (depth_a * base_m + depth_b * base_n) * base_k * itemsize > l1:
        if base_m <= base_n:
            depth_a //= 2
        else:
            depth_b //= 2
    k_steps = -(-k // base_k)
    step_a, step_b = max(min(depth_a // 2, k_steps), 1), max(min(depth_b // 2, k_steps), 1)
    if step_a >= step_b:
        step_a = step_a // step_b * step_b
    else:
        step_b = step_b // step_a * step_a
    if (base_m, base_n) == BASIC_BLOCK and base_k * itemsize == BASIC_K_BYTES and itemsize == 2:
        step_a, step_b = (4 if s == 8 else s for s in (step_a, step_b))
    return CubeTiling(base_m, base_n, base_k, step_a, step_b, 2, 2, 1)


def tiling_choice(given: Mapping[str, Any] | None, default: CubeTiling, schedule: CubeSchedule, what: str) -> tuple[CubeTiling, CubeSchedule]:
    """The default tiling and schedule with the fields ``given`` replaced (unknown keys refused)."""
    if not given:
        return default, schedule
    unknown = sorted(set(given) - set(TILING_FIELDS))
    if unknown:
        raise OpArgumentError(f"{what}: matmul_tiling has no field {', '.join(map(repr, unknown))}; its fields are {', '.join(TILING_FIELDS)}")
    tiling_fields = {f.name for f in dataclasses.fields(CubeTiling)}
    tiling = dataclasses.replace(default, **{key: value for key, value in given.items() if key in tiling_fields})
    schedule = dataclasses.replace(schedule, **{key: value for key, value in given.items() if key not in tiling_fields})
    return tiling, schedule
