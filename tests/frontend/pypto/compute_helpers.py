"""Running one PyPTO compute kernel on one PE of a2 and reading its result back."""

import numpy as np

import npusim
from npusim import pypto


def run(build, *arrays, tile=None, cube=None, config="a2", overrides=None, data=True):
    """Launch ``build(*tensors)`` (returning a pypto.Tensor, or a list of them) on PE 0 with the
    vector tile shape ``tile`` and the cube tile shapes ``cube``; returns (values, session)."""
    results = {}

    def kernel(*tensors):
        if tile is not None:
            pypto.set_vec_tile_shapes(*tile)
        if cube is not None:
            pypto.set_cube_tile_shapes(*cube)
        results["out"] = build(*tensors)

    with npusim.session(config, overrides=overrides, data=data) as session:
        devices = [npusim.tensor(np.ascontiguousarray(a)) for a in arrays]
        npusim.launch(kernel, 1, args=lambda pe: tuple(devices))
        npusim.synchronize()
        out = results["out"]
        values = [t.numpy() for t in out] if isinstance(out, list) else (out.numpy() if data else None)
    return values, session


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal to the bit (NaNs of any payload equal), shapes and dtypes too."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fV" or a.dtype.itemsize == 2 and a.dtype.kind not in "iu":
        nan = np.isnan(a.astype(np.float32)) & np.isnan(b.astype(np.float32))
        return bool(np.all(nan | (a.view(f"u{a.dtype.itemsize}") == b.view(f"u{b.dtype.itemsize}"))))
    return bool(np.array_equal(a, b))
