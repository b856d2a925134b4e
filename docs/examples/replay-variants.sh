#!/usr/bin/env bash
# Two changed copies of docs/examples/replay/loops for the worked example of
# docs/replay.md: replay-auto/ (`approval auto` for hourly) and replay-catchup/
# (`catch_up all` for hourly). Run from the checkout (or an instance directory).
set -euo pipefail
for variant in auto catchup; do
  rm -rf "replay-$variant"
  cp -r docs/examples/replay/loops "replay-$variant"
done
python3 - <<'PY'
from pathlib import Path

def change(folder: str, old: str, new: str) -> None:
    rules = Path(folder, "loops.rules")
    text = rules.read_text()
    hourly = text.index("loop hourly")
    end = text.index("loop sweep")
    assert old in text[hourly:end], f"{old!r} is not in loop hourly"
    rules.write_text(text[:hourly] + text[hourly:end].replace(old, new) + text[end:])

change("replay-auto", "approval watched", "approval auto")
change("replay-catchup", "catch_up none", "catch_up all")
PY
