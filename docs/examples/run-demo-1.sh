#!/usr/bin/env bash
# After inject-demo-1.sh and approve-demo-1.sh: a worker executes the queued run (it
# fails: dispatch@1 is agent work and no agent runner is configured), for the examples
# of docs/cli.md#engine-runs. Run from the checkout (or an instance directory).
set -euo pipefail
engine worker --once --id w1 --db var/engine.db
