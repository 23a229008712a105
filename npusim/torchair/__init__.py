"""``torchair`` on the simulator: the graph backend of ``torch.compile`` for npu programs.

    import npusim.torchair as tng                  # instead of: import torchair as tng
    model = torch.compile(model, backend=tng.get_npu_backend(compiler_config=config))

The backend receives the graph torch's Dynamo traced (the npu ops are single nodes). On the first
call with given input tensors it captures the graph's device work (:mod:`npusim.frontend.graphs`:
the ops' host code runs once, their kernels are recorded) and then replays it; each later call with
the same tensors only replays it: one host launch (``host.graph_launch``) per die instead of one
per op, and no host checks or tiling, as a captured ACL graph runs. Other input tensors get a
capture of their own. ``CompilerConfig`` is accepted as torchair's (its options change nothing
here: npusim has one graph mode, the captured one).
"""

from __future__ import annotations

from npusim.torchair.backend import get_npu_backend
from npusim.torchair.configs.compiler_config import CompilerConfig

__all__ = ["CompilerConfig", "get_npu_backend"]
