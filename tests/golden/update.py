"""Write tests/golden/digests.json and schedule_digests.json anew from this checkout: ``make golden``.

Run it only for a change that means to move what the gate digests (a timing model, a trace format),
and say in the commit message what moved and why."""

from __future__ import annotations

import json

from tests.golden.cases import DIGESTS, all_digests
from tests.golden.schedules import SCHEDULE_DIGESTS, schedule_digests


def main() -> None:
    digests = all_digests()
    DIGESTS.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(digests)} cases' digests to {DIGESTS}")
    schedules = schedule_digests()
    SCHEDULE_DIGESTS.write_text(json.dumps(schedules, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(schedules)} schedules' digests to {SCHEDULE_DIGESTS}")


if __name__ == "__main__":
    main()
