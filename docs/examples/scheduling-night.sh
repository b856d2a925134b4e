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

# Serve until each hour's slots are fired and planned: midnight, 01:00, then at 04:00
# the newest missed slot of hourly and nightly (catch_up none) and every missed slot of
# piled (catch_up all).
serve_until 2026-11-30T23:59:58Z clock:hourly:2026-12-01T00:00:00Z clock:piled:2026-12-01T00:00:00Z
serve_until 2026-12-01T00:59:58Z clock:hourly:2026-12-01T01:00:00Z clock:piled:2026-12-01T01:00:00Z
serve_until 2026-12-01T03:59:58Z clock:hourly:2026-12-01T04:00:00Z clock:piled:2026-12-01T04:00:00Z \
  clock:hourly:2026-12-01T03:00:00Z clock:nightly:2026-12-01T03:00:00Z \
  clock:piled:2026-12-01T02:00:00Z clock:piled:2026-12-01T03:00:00Z
ENGINE_NOW=2026-12-01T04:00:10Z engine schedule pause nightly --as alice --note "quiet night" >/dev/null
