#!/usr/bin/env bash
# The morning of a day of slots (2026-12-01, 10:00 to 14:00) of the tree
# docs/examples/occurrences: a real serve, its clock placed by ENGINE_NOW, plans each
# hour's ticks and a worker runs what it queued, scripts/act.py answering each run as
# var/control/<loop> says. It ends at 14:00 with the 14:00 run of repair-r1 queued, which
# docs/occurrences.md#cancelling-a-run cancels; docs/examples/occurrences-afternoon.sh
# cancels it the same way and runs the rest of the day. The examples of
# docs/occurrences.md and docs/cli.md (findings, shadow report, stats) read the database,
# docs/examples/occurrences/var/engine.db, from that directory.
# Run from the checkout (or an instance directory).
set -euo pipefail
. docs/examples/lib.sh
rm -rf docs/examples/occurrences/var
mkdir -p docs/examples/occurrences/var/control
. docs/examples/occurrences-lib.sh

# The checkout the loop `dirty` works in (docs/occurrences.md#dirty-workspaces): a
# commit, then a change and an untracked file nobody committed.
git init -q var/checkout
echo "r1" >var/checkout/README
git -C var/checkout add README
git -C var/checkout -c user.name=alice -c user.email=alice@example.org commit -q -m "r1"
echo "r1, being edited" >var/checkout/README
echo "a note" >var/checkout/notes.txt

answer breaker FAILED
answer frozen-act OK
serve 2026-12-01T09:59:59Z  # the loops are enabled: their first slot is 10:00
stop

# 10:00: every loop's first window; repair-r1's command crashes (an infrastructure
# failure: a retry in 60s); dirty's run is refused (its checkout has changes).
answer repair-r1 CRASH
serve 2026-12-01T10:00:00.5Z
stop
work 2026-12-01T10:00:05Z
# A person looks at the checkout before dirty runs again.
ENGINE_NOW=2026-12-01T10:00:10Z engine schedule pause dirty --as alice --note "uncommitted changes in var/checkout" >/dev/null
# 10:00:30: a push of r1, and the same push delivered again under another event id:
# the second tick of loop pushed folds into the first one's occurrence.
serve 2026-12-01T10:00:30Z
engine inject push.json --url "$url" >/dev/null
planned
engine inject push-redelivered.json --url "$url" >/dev/null
planned
stop
# 10:01:30: the first retry is due; it crashes too (the second retry in 120s).
serve 2026-12-01T10:01:30Z
stop
work 2026-12-01T10:01:35Z
# 11:00: the next tick is coalesced into the waiting occurrence; the last retry
# succeeds, the occurrence completes and its follow-up tick runs.
answer repair-r1 OK
hour 11
serve 2026-12-01T11:00:10Z
stop
work 2026-12-01T11:00:15Z
# 11:20: an operator asks for work on r1 (a proposal) and alice approves it.
serve 2026-12-01T11:20:00Z
engine inject request.json --url "$url" >/dev/null
planned
stop
ENGINE_NOW=2026-12-01T11:20:02Z engine approve "$(engine proposals --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["proposals"][0]["proposalId"])')" --as alice --note "r1 needs it" >/dev/null
work 2026-12-01T11:20:05Z
# 12:00: the repair answers FAILED (one failed occurrence); 13:00: triage records a
# candidate finding instead of running.
answer repair-r1 FAILED
hour 12
answer repair-r1 OK
hour 13
# 14:00: dispatched again; the run waits in the queue.
serve 2026-12-01T14:00:00.5Z
stop
