#!/usr/bin/env bash
# After schedule-noon.sh and schedule-operator.sh, serve again from 14:30:00 for a
# few seconds: the whole history the examples of docs/cli.md#engine-schedule read
# (var/engine.db). Run from the checkout (or an instance directory).
set -euo pipefail
. docs/examples/lib.sh
export ENGINE_DB=var/engine.db
port=$(free_port)

serve_for() {  # serve_for START SECONDS: serve (planning only) with the clock at START,
  # SECONDS once it answers; then one worker runs what it queued, so the history does
  # not depend on how far a worker got before the stop
  ENGINE_NOW=$1 engine serve --no-worker --port "$port" >>var/story.log 2>&1 &
  local pid=$!
  wait_ready "$port"
  sleep "$2"
  kill -TERM "$pid"
  wait "$pid"
  until ENGINE_NOW=$1 engine worker --once --id story | grep -q "^no queued run"; do :; done
}

serve_for 2026-11-30T14:30:00Z 3
