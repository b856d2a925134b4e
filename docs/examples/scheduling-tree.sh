#!/usr/bin/env bash
# The schedule tree of docs/scheduling.md and docs/simulate.md in place of the
# instance's rules (docs/examples/scheduling/: hourly, nightly, piled, on-demand, host
# and idle loops, each routed to the fake adapter). Run from the checkout, or an
# instance directory holding docs/examples/.
set -euo pipefail
rm -rf loops registry config
cp -R docs/examples/scheduling/loops docs/examples/scheduling/registry docs/examples/scheduling/config .
