#!/usr/bin/env bash
# Databases the engine refuses, for the configuration errors of docs/cli.md#exit-codes:
# notes.txt (not SQLite), crm.db (another application's tables) and var/engine.db
# (migrated by a newer engine: one schema version past this engine's). Run from the
# checkout (or an instance directory); remove them after.
set -euo pipefail
echo "call the plumber on Tuesday" > notes.txt
mkdir -p var
python3 - <<'PY'
import sqlite3
with sqlite3.connect("crm.db") as crm:
    crm.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
PY
engine worker --once --db var/engine.db >/dev/null  # creates and migrates var/engine.db
python3 - <<'PY'
import sqlite3
with sqlite3.connect("var/engine.db") as db:
    db.execute(
        "INSERT INTO schema_migrations (version, applied_at) "
        "SELECT max(version) + 1, '2026-11-30T12:00:00Z' FROM schema_migrations"
    )
PY
