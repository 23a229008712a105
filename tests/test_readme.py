"""The README's Python example runs as written."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_example_runs():
    readme = (ROOT / "README.md").read_text()
    assert readme.startswith("# npusim\n\n```\nmake run ") and "\nmake test " in readme.split("```")[1]
    code = next(block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "with npusim.session" in block)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["s"].result.status == "ok"
    assert namespace["x"].numpy()[0] == 2.0
