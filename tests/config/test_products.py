"""The product registry holds every product fact: no other module of npusim writes a product's
name, label or device name (ops and frameworks look them up), and each product's facts are those
its sources give."""

import ast
from pathlib import Path

import pytest

from npusim.config.products import PRODUCTS, pypto_products

NPUSIM = Path(__file__).parents[2] / "npusim"


def product_facts() -> set[str]:
    return {fact for _, product in PRODUCTS for fact in (product.name, product.label, product.device_name)}


def written_facts(source: str) -> list[tuple[int, str]]:
    """The string constants of ``source`` that are a product's name, label or device name."""
    facts = product_facts()
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in facts]


def test_the_scan_finds_a_product_fact_written_as_a_constant():
    assert written_facts('NAMES = {"ascend310p": "Ascend310P3"}\nlabel = "x"') == [(1, "ascend310p"), (1, "Ascend310P3")]


def test_no_module_but_the_registry_writes_a_product_fact():
    written = {path.relative_to(NPUSIM).as_posix(): found for path in sorted(NPUSIM.rglob("*.py"))
               if path != NPUSIM / "config" / "products.py" and (found := written_facts(path.read_text()))}
    assert not written, f"product facts outside npusim/config/products.py (look them up in PRODUCTS): {written}"


def test_every_product_has_its_own_device_name():
    names = [product.device_name for _, product in PRODUCTS]
    assert len(set(names)) == len(names) and all(name.startswith("Ascend") for name in names)


@pytest.mark.parametrize(("product", "device_name"), [
    ("ascend910b", "Ascend910B2"), ("ascend910c", "Ascend910_9392"), ("ascend310p", "Ascend310P3"),  # the Atlas 300I Duo's chips
    ("ascend950pr", "Ascend950PR_9599"), ("ascend950dt", "Ascend950DT_9591"),
])
def test_the_device_names_are_the_chips_soc_names(product, device_name):
    assert PRODUCTS.get(product).device_name == device_name


def test_pypto_runs_on_a2_a3_and_the_950_not_on_the_310p():
    assert {name for name, product in PRODUCTS if product.pypto} == {"ascend910b", "ascend910c", "ascend950pr", "ascend950dt"}
    assert "ascend310p" not in pypto_products() and "Atlas A2 (ascend910b)" in pypto_products()
