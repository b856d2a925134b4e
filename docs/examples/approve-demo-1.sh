#!/usr/bin/env bash
# After inject-demo-1.sh: alice approves demo-1's proposal, which queues its run
# (docs/cli.md#engine-approve). Run from the checkout (or an instance directory).
set -euo pipefail
engine approve prop-6b01c344dbe5827b --as alice --note "looks right" --db var/engine.db
