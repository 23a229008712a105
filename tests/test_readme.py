"""The README's Python example runs as written."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_example_runs():
    readme = (ROOT / "README.md").read_text()
    assert readme.startswith("# npusim\n\n```\nmake run ") and "\nmake test " in readme.split("```")[1]
    code = re.findall(r"```python\n(.*?)```", readme, re.S)[0]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["s"].result.status == "ok"
    assert namespace["x"].numpy()[0] == 2.0
