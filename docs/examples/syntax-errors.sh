#!/usr/bin/env bash
# A rule file with three syntax errors, for the E0001 entry of docs/rules.md#error-catalogue.
# Run from the checkout (or an instance directory); remove loops/example.rules after.
set -euo pipefail
cat > loops/example.rules <<'RULES'
every 24h

loop nightly
  every 24h
  emit factory.triage.requested { repo: "bj29"
  approval watched

route factory.unblock.requested unblock@1
RULES
