"""The chip products a config can name (``product:``), as data.

A product says what the op documentation and the kernels key their support on: its ``series``
(the op pages list supported dtypes per product series), which of the die's core kinds runs
vector kernels and which cube kernels (a split 910B/910C die has AIV and AIC cores; a 310P runs
both on its AI cores), the chip name the device reports (``torch.npu.get_device_name()``) and
whether PyPTO runs on it. Ops look their per-product facts up by series, frameworks by product,
so adding a product is one entry here and a config whose die has the named core kinds; no other
module names a product or tells products apart by name (``tests/config/test_products.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from npusim.config.registry import Registry


@dataclass(frozen=True)
class Product:
    """A chip product: ``name`` as configs write it, a ``label`` for messages, the ``series`` ops
    key their support on, the core kinds (names under ``die.cores``) of its vector and cube
    kernels, the SoC name the device reports (``device_name``: ``torch.npu.get_device_name()``,
    torch_npu's ``aclrtGetSocName``) and whether PyPTO runs on it (``pypto``)."""

    name: str
    label: str
    series: str
    vector_cores: str
    cube_cores: str
    device_name: str
    pypto: bool


PYPTO_SOURCE = ("\"Ascend-NPU ... 目前支持 A2/A3\" (hicann/pypto docs/context/prepare_environment.md, commit "
                "6fa0df5cdc750e9ba3895e6eed00ce0f635c86c3), and the Ascend 950PR/950DT its later op pages list "
                "(pypto-cast.md's 950 table; its runtime's DAV_3510)")
"""Where the products' ``pypto`` flags come from (PyPTO's own documentation)."""


PRODUCTS: Registry[Product] = Registry("product")


def _add(product: Product) -> None:
    PRODUCTS.register(product.name)(product)


# Sources: the op pages list "Atlas A2 训练系列产品/Atlas 800I A2 推理产品", "Atlas A3 ..." and
# "Atlas 推理系列产品" (the 310P family) as the product series (../shared/seeds/); the split
# architecture of 910B/910C (AIC + 2 AIV per cluster) and the fused AI core of 310P are in the
# platform files (A2A3.ini cube_vector_combine=split; Ascend310P3.ini core_type_list=AICore,VectorCore,
# hicann/runtime src/platform/platform_config/cann/) and the Ascend C docs (atlas_ascendc_10_0008: the
# 310P is the coupled architecture). The 310P's TIK and Ascend C kernels run on its AI cores
# (CORE_NUM = ai_core_cnt); its vector-only cores ("vectorcore" in configs/atlas-300i-duo.yaml) run
# only kernels built for them.
# Device names: torch.npu.get_device_name() returns the SoC name CANN reports (aclrtGetSocName, which
# torch_npu loads in torch_npu/csrc/core/npu/interface/AclInterface.cpp; its SocVersion enum,
# NpuVariables.h, lists Ascend910B1-B4, Ascend910_93xx and Ascend310P1-P4). The A2 server's chip is
# taken as Ascend910B2 [M]; the A3's Ascend910_9392 (a SoC name HCCL and torch_npu test for A3,
# hicann/runtime platform file Ascend910_9392.ini) [M]; the Atlas 300I Duo's chips are Ascend310P3
# (its platform file Ascend310P3.ini, which configs/atlas-300i-duo.yaml is built from; CANN's install
# guide has `npu-smi info` name the 300I Duo's chip 310P3, ${chip_name} Ascend310P3) [H].
# PyPTO: see PYPTO_SOURCE [H]; not on the 310P (its docs list A2/A3 and the 950 only).
_add(Product("ascend910b", "Atlas A2 (ascend910b)", "atlas_a2", vector_cores="aiv", cube_cores="aic", device_name="Ascend910B2", pypto=True))
_add(Product("ascend910c", "Atlas A3 (ascend910c)", "atlas_a3", vector_cores="aiv", cube_cores="aic", device_name="Ascend910_9392", pypto=True))
_add(Product("ascend310p", "Atlas inference series (ascend310p)", "atlas_inference", vector_cores="aicore", cube_cores="aicore",
             device_name="Ascend310P3", pypto=False))
# The Ascend 950PR and 950DT (NpuArch 3510, "arch35") are one SoC design with two memories: their
# CANN platform files (hicann/runtime src/platform/platform_config/cann-dev/Ascend950PR_*.ini and
# Ascend950DT_*.ini) give the same split architecture (cube_vector_combine=split, 36 AIC + 72 AIV)
# and the op pages list them as one product row, "Ascend 950PR/Ascend 950DT": one series. Their device
# names are the SoC names of those platform files (torchair's check_platform.py tells a 950 by
# "Ascend950" in torch_npu.npu.get_device_name()) [M].
_add(Product("ascend950pr", "Ascend 950PR (ascend950pr, what-if)", "ascend_950", vector_cores="aiv", cube_cores="aic",
             device_name="Ascend950PR_9599", pypto=True))
_add(Product("ascend950dt", "Ascend 950DT (ascend950dt, what-if)", "ascend_950", vector_cores="aiv", cube_cores="aic",
             device_name="Ascend950DT_9591", pypto=True))


def pypto_products() -> str:
    """The labels of the products PyPTO runs on, for messages."""
    return ", ".join(product.label for _, product in PRODUCTS if product.pypto)
