"""The ``torch.compile`` backend: a traced graph captured per set of input tensors and replayed."""

from __future__ import annotations

import torch

import npusim.torch_npu  # noqa: F401  (registers the npu device and its ops)
from npusim.errors import UsageError
from npusim.frontend.graphs import CapturedGraph, capture
from npusim.frontend.session import current_session
from npusim.torchair.configs.compiler_config import CompilerConfig


class GraphFunction:
    """What the backend returns for one traced graph: call it with the graph's inputs."""

    def __init__(self, module: torch.fx.GraphModule, config: CompilerConfig) -> None:
        self.module = module
        self.config = config
        self.captures: dict[tuple, tuple[CapturedGraph, object]] = {}

    @staticmethod
    def _key(args) -> tuple:
        """The identity of the inputs a capture is valid for: the same tensors (addresses, views)."""
        return tuple((a.device.type, a.untyped_storage().data_ptr(), a.storage_offset(), tuple(a.shape), tuple(a.stride()), a.dtype)
                     if isinstance(a, torch.Tensor) else (type(a).__name__, repr(a)) for a in args)

    def __call__(self, *args):
        session = current_session()
        key = (id(session), self._key(args))
        captured = self.captures.get(key)
        if captured is None:
            graph = CapturedGraph(session, "torchair graph")
            with capture(graph):
                outputs = self.module(*args)
            captured = self.captures[key] = (graph, outputs)
        graph, outputs = captured
        graph.replay()
        return outputs


def get_npu_backend(*, compiler_config: CompilerConfig | None = None, **kwargs):
    """The backend for ``torch.compile(model, backend=...)``."""
    config = compiler_config if compiler_config is not None else CompilerConfig()
    if not isinstance(config, CompilerConfig):
        raise UsageError(f"get_npu_backend: compiler_config = {config!r}: pass a torchair CompilerConfig (npusim.torchair.CompilerConfig)")

    def backend(module: torch.fx.GraphModule, example_inputs):
        return GraphFunction(module, config)

    return backend
