"""The NZ fractal layout in which the cube core holds matrices in L0A, L0B and L0C.

A matrix of ``rows x cols`` is cut into fractals of ``fr x fc`` elements (16 rows by 32 bytes of
columns for L0A / L0B: ``fc = 32 / itemsize``; 16 x 16 for L0C), the matrix padded with zeros to whole
fractals. Fractals are stored column of fractals after column of fractals ("N"), the elements of one
fractal row after row ("Z"): element ``(r, c)`` is at ``((c // fc) * rows_padded + r) * fc + c % fc``.
L0A holds the left matrix as ``[m, k]``, L0B the right one as ``[n, k]`` (k innermost in both, so one
fractal row of each is one k-run of 32 bytes), L0C the result ``[m, n]``.
"""

from __future__ import annotations

import numpy as np

FRACTAL_ROWS = 16
FRACTAL_BYTES = 32  # one fractal row of L0A / L0B: the C0 block of 32 bytes


def inner_block(itemsize: int) -> int:
    """Elements of one fractal row of L0A / L0B (C0): 16 fp16, 32 int8, 8 fp32."""
    return FRACTAL_BYTES // itemsize


def padded(n: int, block: int) -> int:
    return -(-n // block) * block


def nz_count(rows: int, cols: int, fc: int, fr: int = FRACTAL_ROWS) -> int:
    """Elements a ``rows x cols`` matrix takes in NZ layout (padded to whole fractals)."""
    return padded(rows, fr) * padded(cols, fc)


def nz_pack(matrix: np.ndarray, fc: int, fr: int = FRACTAL_ROWS) -> np.ndarray:
    """The NZ layout of a 2-D ``matrix`` as a flat array (zero padding included)."""
    rows, cols = matrix.shape
    full = np.zeros((padded(rows, fr), padded(cols, fc)), matrix.dtype)
    full[:rows, :cols] = matrix
    return full.reshape(full.shape[0], -1, fc).transpose(1, 0, 2).reshape(-1)


def nz_unpack(flat: np.ndarray, rows: int, cols: int, fc: int, fr: int = FRACTAL_ROWS) -> np.ndarray:
    """The ``rows x cols`` matrix held in NZ layout by ``flat`` (the inverse of :func:`nz_pack`)."""
    rows_padded, cols_padded = padded(rows, fr), padded(cols, fc)
    blocks = flat[: rows_padded * cols_padded].reshape(cols_padded // fc, rows_padded, fc)
    return blocks.transpose(1, 0, 2).reshape(rows_padded, cols_padded)[:rows, :cols]
