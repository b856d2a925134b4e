#!/usr/bin/env bash
# After schedule-noon.sh and schedule-operator.sh, serve again from 14:30:00 for a
# few seconds: the whole history the examples of docs/cli.md#engine-schedule read
# (var/engine.db). Run from the checkout (or an instance directory).
set -euo pipefail
export ENGINE_DB=var/engine.db
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

serve_for() {  # serve_for START SECONDS: serve (planning only) with the clock at START,
  # SECONDS once it answers; then one worker runs what it queued, so the history does
  # not depend on how far a worker got before the stop
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
  until ENGINE_NOW=$1 engine worker --once --id story | grep -q "^no queued run"; do :; done
}

serve_for 2026-11-30T14:30:00Z 3
