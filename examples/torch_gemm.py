"""GEMMs as a torch program writes them for the npu: a float16 linear layer (``nn.functional.linear``:
x @ w^T + bias) and an int8 one (``torch_npu.npu_quant_matmul``: int8 x int8, per-channel bf16 scale,
per-token float32 scale, bfloat16 out), each one cube kernel on the AIC cores (MTE2 GM -> L1, MTE1
L1 -> L0A / L0B, CUBE, FIXP L0C -> GM, double buffered: docs/torch.md), checked against numpy.

Parameters (``--param NAME=VALUE``): ``m`` (tokens), ``k`` (hidden), ``n`` (output features).

Run: npusim run --config a2 examples/torch_gemm.py
     npusim run --config a3 examples/torch_gemm.py --param m=4096 --param k=7168 --param n=4096 --no-data
"""

import ml_dtypes
import numpy as np
import torch

import npusim
import npusim.torch_npu as torch_npu
from npusim.trace.summary import ops, records

M, K, N = 256, 1024, 512


def bf16(tensor: torch.Tensor) -> np.ndarray:
    return tensor.cpu().view(torch.int16).numpy().view(ml_dtypes.bfloat16)


def main() -> None:
    session = npusim.current_session()
    m = npusim.param("m", M, "rows of x (tokens)")
    k = npusim.param("k", K, "columns of x (hidden size)")
    n = npusim.param("n", N, "output features")
    rng = np.random.default_rng(0)
    x_host = (rng.standard_normal((m, k)) / 4).astype(np.float16)
    w_host = (rng.standard_normal((n, k)) / 4).astype(np.float16)
    bias_host = rng.standard_normal(n).astype(np.float16)
    xq_host, wq_host = rng.integers(-64, 64, (m, k)).astype(np.int8), rng.integers(-64, 64, (n, k)).astype(np.int8)
    scale_host = rng.uniform(1e-4, 1e-3, n).astype(np.float32)
    token_host = rng.uniform(0.5, 2.0, m).astype(np.float32)

    x, w, bias = torch.from_numpy(x_host).npu(), torch.from_numpy(w_host).npu(), torch.from_numpy(bias_host).npu()
    y = torch.nn.functional.linear(x, w, bias)
    xq, wq = torch.from_numpy(xq_host).npu(), torch.from_numpy(wq_host).npu()
    scale, token = torch.from_numpy(scale_host).to(torch.bfloat16).npu(), torch.from_numpy(token_host).npu()
    yq = torch_npu.npu_quant_matmul(xq, wq.t(), scale, pertoken_scale=token, output_dtype=torch.bfloat16)
    npusim.synchronize()

    spans = {op["name"]: op["end_us"] - op["start_us"] for op in records(ops(session.system.record()))}
    for name, kernel, flops in (("float16 linear", "MatMulV3", 2 * m * n * k), ("int8 quant matmul", "QuantBatchMatmulV3", 2 * m * n * k)):
        us = spans[kernel]
        print(f"{name} [{m}, {k}] x [{k}, {n}] on {session.config.name}: {kernel} {us:.2f} us, {flops / us / 1e6:.1f} TFLOPS (TOPS for int8)")
    if not session.with_data:
        print("outputs not checked (timing only)")
        return
    exact = x_host.astype(np.float64) @ w_host.T.astype(np.float64) + bias_host
    magnitude = np.abs(x_host.astype(np.float64)) @ np.abs(w_host.T.astype(np.float64)) + np.abs(bias_host)
    bound = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64) + (k / 16 + 1) * 2.0**-24 * magnitude  # fp32 blocks, one fp16 rounding
    linear_ok = bool(np.all(np.abs(y.cpu().numpy().astype(np.float64) - exact) <= bound))
    acc = xq_host.astype(np.int64) @ wq_host.T.astype(np.int64)
    scale32 = scale_host.astype(ml_dtypes.bfloat16).astype(np.float32)
    expected = ((acc.astype(np.float32) * scale32) * token_host[:, None]).astype(ml_dtypes.bfloat16)  # the documented formula, in float32
    quant_ok = bool(np.array_equal(bf16(yq).view(np.uint16), expected.view(np.uint16)))
    print(f"outputs match numpy: linear (within fp32 accumulation) {'yes' if linear_ok else 'NO'}, quant matmul (bit-exact) "
          f"{'yes' if quant_ok else 'NO'}")
    if not (linear_ok and quant_ok):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
