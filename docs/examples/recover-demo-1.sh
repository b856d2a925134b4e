#!/usr/bin/env bash
# After expire-demo-1.sh: a serve (--no-worker) started after the leases expired, whose
# lease recovery fails the mutating run and requeues the read-only one
# (docs/runtime.md#runs). Run from the checkout (or an instance directory).
set -euo pipefail
. docs/examples/lib.sh
port=$(free_port)
ENGINE_NOW=2026-11-30T12:00:12Z engine serve --no-worker --port "$port" --db var/engine.db >>var/serve.log 2>&1 &
pid=$!
until engine journal --entity run --db var/engine.db | grep -c lease_expired | grep -qx 2; do sleep 0.2; done
kill -TERM "$pid"
wait "$pid"
