# What docs/examples/occurrences-morning.sh and occurrences-afternoon.sh share: the tree
# docs/examples/occurrences as the working directory, its database var/engine.db, a
# notification sink var/notify.jsonl, and a serve and worker with a placed clock
# (ENGINE_NOW). Sourced after lib.sh, from the checkout (or an instance directory).
cd docs/examples/occurrences
export ENGINE_DB=var/engine.db
export ENGINE_NOTIFY_LOG=var/notify.jsonl  # docs/occurrences.md#notifications
export OCC_SCRIPTS=$PWD/scripts OCC_CONTROL=$PWD/var/control
port=$(free_port)
url=http://127.0.0.1:$port
pid=
trap '[ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true' EXIT  # no serve outlives a failure

planned() {  # until serve planned what it admitted and published its outbox
  wait_db var/engine.db "select (select count(*) from events where planned = 0)
    + (select count(*) from outbox where published_at is null)" "serve to plan its events"
}
serve() {  # serve START: serve (planning only) with the clock at START, in the background
  # Its first pass fires the due slots, resumes due retries and plans, while its
  # notifier delivers the notifications due; a stop lets the passes in hand finish.
  ENGINE_NOW=$1 engine serve --no-worker --port "$port" >>var/story.log 2>&1 &
  pid=$!
  wait_ready "$port"
  planned
}
stop() { kill -TERM "$pid"; wait "$pid"; pid=; }
work() {  # work AT: one worker, its clock at AT, runs every queued run; then it stops
  ENGINE_NOW=$1 engine worker --id w1 --poll 0.1 >>var/story.log 2>&1 &
  local worker=$!
  wait_db var/engine.db "select count(*) from runs where state in ('queued', 'claimed', 'running')" \
    "the worker to run the queue"
  kill -TERM "$worker"
  wait "$worker"
}
answer() { echo "$2" >"var/control/$1"; }  # answer LOOP OUTCOME: what its runs answer
hour() {  # hour HH: serve a moment at HH:00:00.5, then run what it queued
  serve "2026-12-01T$1:00:00.5Z"
  stop
  work "2026-12-01T$1:00:05Z"
}
