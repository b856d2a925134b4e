#!/usr/bin/env bash
# A day of slots (2026-12-01, 10:00 to 15:00) of the tree docs/examples/occurrences:
# a real serve, its clock placed by ENGINE_NOW, plans each hour's ticks and a worker
# runs what it queued, scripts/act.py answering each run as var/control/<loop> says.
# The examples of docs/occurrences.md and docs/cli.md (findings, shadow report, stats)
# read its database, docs/examples/occurrences/var/engine.db, from that directory.
# Run from the checkout (or an instance directory).
set -euo pipefail
. docs/examples/lib.sh
cd docs/examples/occurrences
rm -rf var
mkdir -p var/control
export ENGINE_DB=var/engine.db
export OCC_SCRIPTS=$PWD/scripts OCC_CONTROL=$PWD/var/control
port=$(free_port)
url=http://127.0.0.1:$port

serve() {  # serve START: serve (planning only) with the clock at START, in the background
  ENGINE_NOW=$1 engine serve --no-worker --port "$port" >>var/story.log 2>&1 &
  pid=$!
  wait_ready "$port"
  sleep 1
}
stop() { kill -TERM "$pid"; wait "$pid"; }
work() {  # work AT: one worker, its clock at AT, runs every queued run; then it stops
  ENGINE_NOW=$1 engine worker --id w1 --poll 0.1 >>var/story.log 2>&1 &
  local worker=$!
  python3 - <<'PY'
import sqlite3, time
while True:
    db = sqlite3.connect("var/engine.db")
    (left,) = db.execute("select count(*) from runs where state in ('queued', 'claimed', 'running')").fetchone()
    db.close()
    if not left:
        break
    time.sleep(0.1)
PY
  kill -TERM "$worker"
  wait "$worker"
}
answer() { echo "$2" >"var/control/$1"; }  # answer LOOP OUTCOME: what its runs answer
hour() {  # hour HH: serve a moment at HH:00:00.5, then run what it queued
  serve "2026-12-01T$1:00:00.5Z"
  stop
  work "2026-12-01T$1:00:05Z"
}

answer breaker FAILED
answer frozen-act OK
serve 2026-12-01T09:59:59Z  # the loops are enabled: their first slot is 10:00
stop

# 10:00: every loop's first window; repair-r1's command crashes (an infrastructure
# failure: a retry in 60s).
answer repair-r1 CRASH
serve 2026-12-01T10:00:00.5Z
stop
work 2026-12-01T10:00:05Z
# 10:01:30: the first retry is due; it crashes too (the second retry in 120s).
serve 2026-12-01T10:01:30Z
stop
work 2026-12-01T10:01:35Z
# 11:00: the next tick is coalesced into the waiting occurrence; the last retry
# succeeds, the occurrence completes and its follow-up tick runs.
answer repair-r1 OK
hour 11
serve 2026-12-01T11:00:10Z
stop
work 2026-12-01T11:00:15Z
# 11:20: an operator asks for work on r1 (a proposal) and alice approves it.
serve 2026-12-01T11:20:00Z
engine inject request.json --url "$url" >/dev/null
until engine proposals | grep -q request-r1; do sleep 0.2; done
stop
ENGINE_NOW=2026-12-01T11:20:02Z engine approve "$(engine proposals --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["proposals"][0]["proposalId"])')" --as alice --note "r1 needs it" >/dev/null
work 2026-12-01T11:20:05Z
# 12:00: the repair answers FAILED (one failed occurrence); 13:00: triage records a
# candidate finding instead of running.
answer repair-r1 FAILED
hour 12
answer repair-r1 OK
hour 13
# 14:00: dispatched again; an operator cancels the run before a worker takes it.
serve 2026-12-01T14:00:00.5Z
stop
ENGINE_NOW=2026-12-01T14:00:02Z engine cancel "$(engine runs --json --limit 100 | python3 -c '
import json, sys
print(next(r["runId"] for r in json.load(sys.stdin)["runs"] if r["loop"] == "repair-r1" and r["state"] == "queued"))
')" --as alice --note "not during the migration" >/dev/null
work 2026-12-01T14:00:05Z
# 15:00: the day's six runs are spent: triage answers nothing_to_do.
hour 15
