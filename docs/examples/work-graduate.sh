#!/usr/bin/env bash
# Two work-bound loop shapes for docs/cli.md#engine-schedule-graduate and
# docs/work.md#graduating-an-instance: a controller `coder` in registry/controllers.yaml
# and loops/work.rules, where `nudge-repair` lets its instances graduate (a reviewed
# `shadow false`) and `nudge-review` keeps them in shadow. Run from the checkout (or an
# instance directory).
set -euo pipefail
python3 - <<'PY'
from pathlib import Path

controllers = Path("registry/controllers.yaml")
text = controllers.read_text()
assert "\ncontrollers: []\n" in text, "registry/controllers.yaml is not the shipped one"
controllers.write_text(text.replace("\ncontrollers: []\n", """
controllers:
  - id: coder
    description: A coding agent in its non-interactive mode.
    argv: ["agent", "exec", "--work={work_id}"]
    timeout: 2h
    context: stdin
    token_env: ENGINE_WORK_TOKEN
    report: http
"""))
PY
cat > loops/work.rules <<'RULES'
loop nudge-repair
  description "wake the work's coding agent until the work is done"
  work continuation controller coder
  every 1h
  emit factory.triage.requested { repo: "bj29" }
  cooldown 30m
  backoff base 5m max 2h
  budget daily_runs 12
  shadow false  # reviewed: its instances may graduate out of shadow

loop nudge-review
  description "remind the work's coding agent to ask for a review"
  work continuation controller coder
  every 4h
  emit factory.triage.requested { repo: "bj29" }
  cooldown 2h
  backoff base 5m max 2h
  budget daily_runs 6
RULES
