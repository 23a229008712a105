"""The chip products a config can name (``product:``), as data.

A product says what the op documentation and the kernels key their support on: its ``series``
(the op pages list supported dtypes per product series), and which of the die's core kinds runs
vector kernels and which cube kernels (a split 910B/910C die has AIV and AIC cores; a 310P runs
both on its AI cores). Ops look their per-product facts up by series, so adding a product is one
entry here and a config whose die has the named core kinds.
"""

from __future__ import annotations

from dataclasses import dataclass

from npusim.config.registry import Registry


@dataclass(frozen=True)
class Product:
    """A chip product: ``name`` as configs write it, a ``label`` for messages, the ``series`` ops
    key their support on, and the core kinds (names under ``die.cores``) of its vector and cube
    kernels."""

    name: str
    label: str
    series: str
    vector_cores: str
    cube_cores: str


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
_add(Product("ascend910b", "Atlas A2 (ascend910b)", "atlas_a2", vector_cores="aiv", cube_cores="aic"))
_add(Product("ascend910c", "Atlas A3 (ascend910c)", "atlas_a3", vector_cores="aiv", cube_cores="aic"))
_add(Product("ascend310p", "Atlas inference series (ascend310p)", "atlas_inference", vector_cores="aicore", cube_cores="aicore"))
# The Ascend 950PR and 950DT (NpuArch 3510, "arch35") are one SoC design with two memories: their
# CANN platform files (hicann/runtime src/platform/platform_config/cann-dev/Ascend950PR_*.ini and
# Ascend950DT_*.ini) give the same split architecture (cube_vector_combine=split, 36 AIC + 72 AIV)
# and the op pages list them as one product row, "Ascend 950PR/Ascend 950DT": one series.
_add(Product("ascend950pr", "Ascend 950PR (ascend950pr, what-if)", "ascend_950", vector_cores="aiv", cube_cores="aic"))
_add(Product("ascend950dt", "Ascend 950DT (ascend950dt, what-if)", "ascend_950", vector_cores="aiv", cube_cores="aic"))
