"""``python -m npusim.engine``: which engine npusim runs here, in one line (``make`` prints it after
installing): compiled, with where; or interpreted, with why, and where the build compiled nothing,
the line it said then (what is missing, and how to get the compiled engine). Every compiled module
is imported first (hw.core among them), as a run imports it, so that the line says which ran."""

import importlib
import sys

from npusim.engine import CHOICE, COMPILED, engine_record


def main() -> None:
    for name in COMPILED:
        importlib.import_module(f"npusim.{name}")
    record = engine_record()
    said = getattr(sys.modules.get("npusim_compiled"), "SAID", None) if CHOICE.folder is None and CHOICE.warning is None else None
    print(said or f"npusim: the engine is {record['engine']} ({record['engine_note']})")


if __name__ == "__main__":
    main()
