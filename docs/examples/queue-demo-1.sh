#!/usr/bin/env bash
# After more-demo-1.sh: alice approves demo-3's proposal (dispatch@1) and demo-6's
# (merge-scan@1), which queues two runs; no worker takes them yet
# (docs/cli.md#engine-cancel). Run from the checkout (or an instance directory).
set -euo pipefail
engine approve prop-85961c6be2cfc730 prop-a386c9fec4060707 --as alice --db var/engine.db
