#!/usr/bin/env bash
# The night of docs/scheduling.md on the schedule tree (scheduling-tree.sh first): serve
# runs a few seconds at midnight and at 01:00 on 2026-12-01, is down from 01:00 to 03:59,
# and runs again across 04:00; nobody approves. Then an operator pauses `nightly`. The
# clock is placed by ENGINE_NOW; the database is var/engine.db.
set -euo pipefail
export ENGINE_DB=var/engine.db
mkdir -p var
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

serve_for() {  # serve_for START SECONDS: serve with the clock at START, SECONDS once it answers
  ENGINE_NOW=$1 engine serve --no-worker --port "$port" >>var/story.log 2>&1 &
  local pid=$!
  python3 - "$port" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/healthz", timeout=1)
        break
    except OSError:
        time.sleep(0.1)
PY
  sleep "$2"
  kill -TERM "$pid"
  wait "$pid"
}

serve_for 2026-11-30T23:59:58Z 3
serve_for 2026-12-01T00:59:58Z 3
serve_for 2026-12-01T03:59:58Z 3
ENGINE_NOW=2026-12-01T04:00:10Z engine schedule pause nightly --as alice --note "quiet night" >/dev/null
