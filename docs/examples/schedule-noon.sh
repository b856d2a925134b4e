#!/usr/bin/env bash
# The start of the history the examples of docs/cli.md#engine-schedule read
# (var/engine.db): the example configuration, and serve from 11:59:57 on
# 2026-11-30 (the 12:00 slots fire), its clock placed by ENGINE_NOW. Run from the
# checkout (or an instance directory); schedule-operator.sh and then
# schedule-story.sh go on from here.
set -euo pipefail
. docs/examples/lib.sh
bash docs/examples/example-config.sh
export ENGINE_DB=var/engine.db
mkdir -p var
port=$(free_port)

# Serve until the 12:00 slots of the enabled loops are fired and planned; then one worker
# runs what it queued, so the history does not depend on how far a worker got.
serve_until 2026-11-30T11:59:57Z clock:reaper:2026-11-30T12:00:00Z \
  clock:merge-bj29:2026-11-30T12:00:00Z clock:merge-legalease:2026-11-30T12:00:00Z \
  clock:merge-wm-home:2026-11-30T12:00:00Z clock:work-bj29:2026-11-30T12:00:00Z
drain 2026-11-30T11:59:57Z
