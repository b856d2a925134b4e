#!/usr/bin/env bash
# The night of docs/scheduling.md on the schedule tree (scheduling-tree.sh first): serve
# runs a few seconds at midnight and at 01:00 on 2026-12-01, is down from 01:00 to 03:59,
# and runs again across 04:00; nobody approves. Then an operator pauses `nightly`. The
# clock is placed by ENGINE_NOW; the database is var/engine.db.
set -euo pipefail
. docs/examples/lib.sh
export ENGINE_DB=var/engine.db
mkdir -p var
port=$(free_port)

serve_for() {  # serve_for START SECONDS: serve with the clock at START, SECONDS once it answers
  ENGINE_NOW=$1 engine serve --no-worker --port "$port" >>var/story.log 2>&1 &
  local pid=$!
  wait_ready "$port"
  sleep "$2"
  kill -TERM "$pid"
  wait "$pid"
}

serve_for 2026-11-30T23:59:58Z 3
serve_for 2026-12-01T00:59:58Z 3
serve_for 2026-12-01T03:59:58Z 3
ENGINE_NOW=2026-12-01T04:00:10Z engine schedule pause nightly --as alice --note "quiet night" >/dev/null
