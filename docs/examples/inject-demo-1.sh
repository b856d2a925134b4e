#!/usr/bin/env bash
# var/engine.db after one work request (docs/examples/event.json, event demo-1) was
# admitted and planned by a serve: one open dispatch@1 proposal, for the examples of
# docs/cli.md#engine-proposals. Run from the checkout (or an instance directory).
set -euo pipefail
mkdir -p var
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
engine serve --no-worker --port "$port" --db var/engine.db >>var/serve.log 2>&1 &
pid=$!
python3 - "$port" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/healthz", timeout=1)
        break
    except OSError:
        time.sleep(0.1)
PY
engine inject docs/examples/event.json --url "http://127.0.0.1:$port"
until engine proposals --db var/engine.db | grep -q demo-1; do sleep 0.2; done
kill -TERM "$pid"
wait "$pid"
