"""The app keeps its time zones on an image without system time-zone data (no /usr/share/zoneinfo).

zoneinfo then falls back to the tzdata package, which pyproject.toml declares.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# 09:00 in Paris is 08:00 UTC in winter and 07:00 UTC from 29 March 2026 (summer time)
CHILD = """
import json, zoneinfo
from datetime import UTC, datetime
from webapp.plugins.schedules import Schedule
from webapp.timezones import is_zone

nine = Schedule("cron", "Europe/Paris", cron="0 9 * * *")
print(json.dumps({
    "tzpath": list(zoneinfo.TZPATH),
    "known": is_zone("Europe/Paris"),
    "slots": [nine.next_after(datetime(2026, 3, day, 12, tzinfo=UTC)).isoformat()
              for day in (27, 28)],
}))
"""


def test_paris_and_its_schedules_work_without_system_time_zone_data():
    env = {**os.environ, "PYTHONTZPATH": "/nonexistent"}  # zoneinfo finds no system data
    child = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    found = json.loads(child.stdout)
    assert found["tzpath"] == ["/nonexistent"]
    assert found["known"]  # the zone pickers list it
    assert found["slots"] == ["2026-03-28T08:00:00+00:00", "2026-03-29T07:00:00+00:00"]
