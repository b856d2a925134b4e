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
