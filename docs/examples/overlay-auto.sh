#!/usr/bin/env bash
# After example-config.sh: an instance loop `extra` in config/schedule.yaml that grants
# itself `approval auto` (refused: E0304), and schedule.extra.yaml, a copy to compare
# with, for docs/cli.md#engine-schedule-enable-and-disable. Run from the checkout (or an
# instance directory).
set -euo pipefail
python3 - <<'PY'
from pathlib import Path

overlay = Path("config/schedule.yaml")
extra = """  extra:
    emit: clock.tick.reaper
    every: 2h
    approval: auto
    enabled: true
"""
text = overlay.read_text()
start = text.index("\nschedules:\n") + len("\nschedules:\n")
end = text.find("\n\n", start)
end = len(text) if end < 0 else end + 1
overlay.write_text(text[:end] + extra + text[end:])
PY
cp config/schedule.yaml schedule.extra.yaml
