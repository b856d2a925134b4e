#!/usr/bin/env bash
# The worked example of docs/explain.md on the tree docs/examples/explain (a copy of
# the runtime test tree): a watched, mutating request (request.json) is injected into a
# real serve, its clock placed by ENGINE_NOW, and proposed; alice approves it with a
# note; a worker runs it, and its OK chains test.slow-mutating.done, which the serve
# plans (approval auto) and a worker runs. The database is
# docs/examples/explain/var/engine.db. Run from the checkout (or an instance directory).
set -euo pipefail
. docs/examples/lib.sh
cd docs/examples/explain
rm -rf var
mkdir -p var
export ENGINE_DB=var/engine.db RUNTIME_SCRIPTS=$PWD/scripts
port=$(free_port)

serve() {  # serve START: serve (planning only) with the clock at START, in the background
  ENGINE_NOW=$1 engine serve --no-worker --port "$port" >>var/story.log 2>&1 &
  pid=$!
  wait_ready "$port"
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

serve 2026-11-30T10:00:00Z
engine inject request.json --url "http://127.0.0.1:$port" >/dev/null
until engine proposals | grep -q request-1; do sleep 0.2; done
stop
ENGINE_NOW=2026-11-30T10:00:05Z engine approve \
  "$(engine proposals --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["proposals"][0]["proposalId"])')" \
  --as alice --note "looks right" >/dev/null
work 2026-11-30T10:00:10Z
serve 2026-11-30T10:00:20Z  # plans the chained event
until engine events | grep -q "^chain:"; do sleep 0.2; done
until engine runs | grep -q fake@1; do sleep 0.2; done
stop
work 2026-11-30T10:00:30Z
