#!/usr/bin/env bash
# The rest of the day docs/examples/occurrences-morning.sh began (run that first): at
# 14:00:02 an operator cancels the queued 14:00 run of repair-r1 (the cancel of
# docs/occurrences.md#cancelling-a-run), then 15:00 with its runs spent, and a last serve
# delivers the notifications still due to var/notify.jsonl.
# Run from the checkout (or an instance directory).
set -euo pipefail
. docs/examples/lib.sh
if [ ! -f docs/examples/occurrences/var/engine.db ]; then
  echo "error: run docs/examples/occurrences-morning.sh first" >&2
  exit 1
fi
. docs/examples/occurrences-lib.sh

# 14:00:02: an operator cancels the run before a worker takes it.
ENGINE_NOW=2026-12-01T14:00:02Z engine cancel run-43a598689aa612f1 --as alice --note "r1 is being migrated" >/dev/null
work 2026-12-01T14:00:05Z
# 15:00: the day's six runs are spent (the cancelled one counts): triage answers
# nothing_to_do.
hour 15
# 15:00:10: serve's notifier delivers the notifications written since its last pass.
serve 2026-12-01T15:00:10Z
wait_db var/engine.db "select count(*) from notifications where delivery = 'pending'" \
  "the notifications to be delivered"
stop
