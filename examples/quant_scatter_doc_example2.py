"""The second example of torch_npu.npu_quant_scatter_'s documentation, with 2-D indices.

input int8 [1, 11, 1, 32] (values drawn from [1, 2)), updates [1, 11, 1, 32] bf16 from (-1, 1),
indices [1, 2] (batch, row) = (0, 0), scales and zero points [1, 1, 1, 32] bf16 from (1, 2) and
(0, 1); axis=-2, quant_axis=-1. Every output value lies in {-1, 0, 1, 2}, as the documentation shows:
|updates / scales| < 1, plus a zero point in [0, 1), rounds to -1..2.

Run: python -m npusim run --config a2 examples/quant_scatter_doc_example2.py
"""

import ml_dtypes
import numpy as np

import npusim
from npusim import torch_npu

BF16 = ml_dtypes.bfloat16


def main() -> None:
    session = npusim.current_session()
    rng = np.random.default_rng(0)
    var = npusim.tensor(rng.uniform(1, 2, (1, 11, 1, 32)).astype(np.int8))
    indices = npusim.tensor(rng.uniform(0, 1, (1, 2)).astype(np.int32))
    updates = npusim.tensor(rng.uniform(-1, 1, (1, 11, 1, 32)).astype(BF16))
    scales = npusim.tensor(rng.uniform(1, 2, (1, 1, 1, 32)).astype(BF16))
    zero_points = npusim.tensor(rng.uniform(0, 1, (1, 1, 1, 32)).astype(BF16))

    out = torch_npu.npu_quant_scatter_(var, indices, updates, scales, zero_points, axis=-2, quant_axis=-1, reduce="update")
    npusim.synchronize()
    print(f"npu_quant_scatter_ [1, 11, 1, 32] with 2-D indices: {session.now_us:.2f} us simulated")
    if not session.with_data:
        print("  (timing only: no values to show)")
        return
    values = out.numpy()
    print("single op output:", values[0], values[0].shape)
    found = set(np.unique(values).tolist())
    if not found <= {-1, 0, 1, 2}:
        raise AssertionError(f"output values {sorted(found)} are not all in {{-1, 0, 1, 2}}")
    print(f"  values found: {sorted(found)}, all in {{-1, 0, 1, 2}} as documented")
