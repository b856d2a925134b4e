#!/usr/bin/env bash
# The start of the history the examples of docs/cli.md#engine-schedule read
# (var/engine.db): the example configuration, and serve from 11:59:57 for a few seconds on
# 2026-11-30 (the 12:00 slots fire), its clock placed by ENGINE_NOW. Run from the
# checkout (or an instance directory); schedule-operator.sh and then
# schedule-story.sh go on from here.
set -euo pipefail
. docs/examples/lib.sh
bash docs/examples/example-config.sh
export ENGINE_DB=var/engine.db
mkdir -p var
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

serve_for 2026-11-30T11:59:57Z 4
