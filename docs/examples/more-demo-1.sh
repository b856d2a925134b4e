#!/usr/bin/env bash
# After run-demo-1.sh: four more work requests (demo-2 to demo-5) and a merge request
# (demo-6), admitted and planned by a serve: five open proposals, for the examples of
# docs/cli.md#engine-approve and #engine-reject. Run from the checkout (or an instance
# directory).
set -euo pipefail
. docs/examples/lib.sh
mkdir -p var
port=$(free_port)
engine serve --no-worker --port "$port" --db var/engine.db >>var/serve.log 2>&1 &
pid=$!
wait_ready "$port"
for n in 2 3 4 5; do
  echo '{"schemaVersion":"factory.event/v1","eventId":"demo-'$n'","type":"factory.work.requested","source":"inject","occurredAt":"2026-11-30T10:00:00Z","payload":{"repo":"bj29"}}' \
    | engine inject - --url "http://127.0.0.1:$port"
done
echo '{"schemaVersion":"factory.event/v1","eventId":"demo-6","type":"factory.merge.requested","source":"inject","occurredAt":"2026-11-30T10:00:00Z","payload":{"repo":"bj29"}}' \
  | engine inject - --url "http://127.0.0.1:$port"
until engine proposals --db var/engine.db | grep -q demo-6; do sleep 0.2; done
kill -TERM "$pid"
wait "$pid"
