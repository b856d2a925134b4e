#!/usr/bin/env bash
# The start of the history the examples of docs/cli.md#engine-schedule read
# (var/engine.db): the example configuration, and serve from 11:59:57 to 12:00:03 on
# 2026-11-30 (the 12:00 slots fire), its clock placed by ENGINE_NOW. Run from the
# checkout (or an instance directory); schedule-operator.sh and schedule-story.sh go on.
set -euo pipefail
bash docs/examples/example-config.sh
export ENGINE_DB=var/engine.db
mkdir -p var
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

serve_for() {  # serve_for START SECONDS: serve with the clock at START for SECONDS
  ENGINE_NOW=$1 engine serve --port "$port" >>var/story.log 2>&1 &
  local pid=$!
  sleep "$2"
  kill -TERM "$pid"
  wait "$pid"
}

serve_for 2026-11-30T11:59:57Z 6
