#!/usr/bin/env bash
# schedule-operator.sh, then serve again from 14:30:00 to 14:30:05: the whole history
# the examples of docs/cli.md#engine-schedule read (var/engine.db). Run from the
# checkout (or an instance directory); it takes about 20 seconds.
set -euo pipefail
bash docs/examples/schedule-operator.sh
export ENGINE_DB=var/engine.db
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

serve_for() {  # serve_for START SECONDS: serve with the clock at START for SECONDS
  ENGINE_NOW=$1 engine serve --port "$port" >>var/story.log 2>&1 &
  local pid=$!
  sleep "$2"
  kill -TERM "$pid"
  wait "$pid"
}

serve_for 2026-11-30T14:30:00Z 5
