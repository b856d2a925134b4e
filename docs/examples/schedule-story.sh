#!/usr/bin/env bash
# After schedule-noon.sh and schedule-operator.sh, serve again from 14:30:00 until its
# catch-up is planned: the whole history the examples of docs/cli.md#engine-schedule read
# (var/engine.db). Run from the checkout (or an instance directory).
set -euo pipefail
. docs/examples/lib.sh
export ENGINE_DB=var/engine.db
port=$(free_port)

# Serve until the catch-up of the slots missed since 12:00 (the newest of each loop) and
# the operator's run-now are planned; then one worker runs what it queued.
serve_until 2026-11-30T14:30:00Z clock:reaper:2026-11-30T14:00:00Z \
  clock:merge-bj29:2026-11-30T14:30:00Z clock:merge-legalease:2026-11-30T14:30:00Z \
  clock:merge-wm-home:2026-11-30T14:30:00Z clock:work-wm-home:2026-11-30T14:30:00Z
drain 2026-11-30T14:30:00Z
