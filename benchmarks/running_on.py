"""What a benchmark ran on, as the first line of its output: npusim's version, which engine ran
(compiled or interpreted: about 1.4x apart, npusim.engine), the Python and the load average, so a
figure copied into RESULTS.md says what it was measured with."""

import os
import platform

import npusim
from npusim.engine import engine_record


def running_on() -> str:
    """One line: npusim's version, the engine and its modules' origin, Python, the 1-minute load average."""
    engine = engine_record()
    return (f"npusim {npusim.__version__}, engine {engine['engine']} ({engine['engine_note']}), "
            f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.2f}")
