#!/usr/bin/env bash
# The state `engine demo --keep` leaves (docs/walkthrough.md): the walkthrough runs in
# the background until its last step; then its database (a consistent copy, with what
# its write-ahead log holds) and configuration are copied here (var/engine.db,
# config/repos.yaml) and the demo is stopped. Run from the checkout (or an instance
# directory).
set -euo pipefail
mkdir -p var
engine demo --keep --port 0 >var/demo.log 2>&1 &
pid=$!
for _ in $(seq 600); do
    grep -q "^Look with the CLI" var/demo.log && break
    kill -0 "$pid" 2>/dev/null || { cat var/demo.log >&2; exit 1; }
    sleep 0.1
done
db=$(sed -n 's/^ *export ENGINE_DB=\([^ ]*\) .*/\1/p' var/demo.log)
python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))' "$db" var/engine.db
cp "$(dirname "$db")/config/repos.yaml" config/repos.yaml
kill -INT "$pid"
wait "$pid" || true
