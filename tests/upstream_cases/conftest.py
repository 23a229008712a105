"""The upstream cases reuse the examples' kernels and case tables (examples/ is not a package)."""

import sys
from pathlib import Path

EXAMPLES = Path(__file__).parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))
