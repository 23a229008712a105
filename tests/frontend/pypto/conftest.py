"""The shmem tests reuse the examples' kernels (examples/ is not a package)."""

import sys
from pathlib import Path

EXAMPLES = Path(__file__).parents[3] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))
