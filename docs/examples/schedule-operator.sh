#!/usr/bin/env bash
# After schedule-noon.sh, the operator: at 12:00:40 pauses, resumes and triggers reaper;
# at 12:01 enables work-wm-home (docs/cli.md#engine-schedule). Serve stays down.
set -euo pipefail
export ENGINE_DB=var/engine.db
export ENGINE_NOW=2026-11-30T12:00:40Z
engine schedule pause reaper --note "database migration until 14:00" --as alice
engine schedule resume reaper --note "migration done" --as alice
engine schedule trigger reaper --as alice
ENGINE_NOW=2026-11-30T12:01:00Z engine schedule enable work-wm-home
