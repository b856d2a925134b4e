#!/usr/bin/env bash
# A rule file with a misspelt event type, for the diagnostics of docs/cli.md#engine-check.
# Run from the checkout (or an instance directory); remove loops/example.rules after.
set -euo pipefail
cat > loops/example.rules <<'RULES'
loop example
  every 24h
  emit factory.triage.requestd { repo: "bj29" }
  enabled false
RULES
