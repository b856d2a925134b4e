# Shell functions the setup scripts of docs/examples/ share; each sources this file
# from the checkout (or an instance directory) before it changes directory.

free_port() {  # a loopback port nothing listens on now
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_ready() {  # wait_ready PORT: until the serve on PORT answers GET /healthz (fails after 30 s)
  python3 - "$1" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/healthz", timeout=1)
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit(f"no serve answered on port {sys.argv[1]} within 30 s")
PY
}

wait_db() {  # wait_db DB SQL [WHAT]: until SQL (one number) reads 0 in the SQLite file DB (fails after 60 s)
  python3 - "$@" <<'PY'
import sqlite3, sys, time
db, sql = sys.argv[1], sys.argv[2]
what = sys.argv[3] if len(sys.argv) > 3 else sql
for _ in range(600):
    with sqlite3.connect(db) as conn:
        (left,) = conn.execute(sql).fetchone()
    conn.close()
    if not left:
        break
    time.sleep(0.1)
else:
    sys.exit(f"{db}: still waiting after 60 s for {what}")
PY
}

wait_events() {  # wait_events DB ID...: until each event ID is admitted in the SQLite file DB, every
  # admitted event is planned and the outbox is published (fails after 60 s)
  python3 - "$@" <<'PY'
import sqlite3, sys, time
db, wanted = sys.argv[1], sys.argv[2:]
marks = ",".join("?" * len(wanted))
sql = f"""select {len(wanted)} - (select count(*) from events where event_id in ({marks})),
  (select count(*) from events where planned = 0)
  + (select count(*) from outbox where published_at is null)"""
for _ in range(600):
    with sqlite3.connect(db) as conn:
        missing, unplanned = conn.execute(sql, wanted).fetchone()
    conn.close()
    if not missing and not unplanned:
        break
    time.sleep(0.1)
else:
    sys.exit(f"{db}: after 60 s, {missing} of {' '.join(wanted)} not admitted, {unplanned} unplanned")
PY
}

serve_until() {  # serve_until START ID...: serve (planning only) on $port with the clock at START
  # until it admitted each event ID and planned everything it admitted; then stop it. The
  # history it leaves depends on what was fired, never on how fast this machine is.
  ENGINE_NOW=$1 engine serve --no-worker --port "$port" >>var/story.log 2>&1 &
  local pid=$!
  shift
  wait_ready "$port"
  wait_events "$ENGINE_DB" "$@" || { kill -TERM "$pid"; wait "$pid"; return 1; }
  kill -TERM "$pid"
  wait "$pid"
}

drain() {  # drain AT: one worker, its clock at AT, runs what is queued, one run at a time
  until ENGINE_NOW=$1 engine worker --once --id story | grep -q "^no queued run"; do :; done
}
