import pytest

torch = pytest.importorskip("torch")  # the torch integration is tested where the 'torch' extra is installed

import npusim.torch_npu  # noqa: E402,F401  (registers the npu device)
