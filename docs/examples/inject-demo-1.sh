#!/usr/bin/env bash
# var/engine.db after one work request (docs/examples/event.json, event demo-1) was
# admitted and planned by a serve: one open dispatch@1 proposal, for the examples of
# docs/cli.md#engine-proposals. Run from the checkout (or an instance directory).
set -euo pipefail
. docs/examples/lib.sh
mkdir -p var
port=$(free_port)
engine serve --no-worker --port "$port" --db var/engine.db >>var/serve.log 2>&1 &
pid=$!
wait_ready "$port"
engine inject docs/examples/event.json --url "http://127.0.0.1:$port"
until engine proposals --db var/engine.db | grep -q demo-1; do sleep 0.2; done
kill -TERM "$pid"
wait "$pid"
