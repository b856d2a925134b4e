#!/usr/bin/env bash
# The work-bound loop shapes of docs/rules.md#work-bound-loop-shapes, with the controller
# of docs/rules.md#controllersyaml and the browser probe of docs/rules.md#browser-probes
# they name, for docs/rules.md#seeing-a-shapes-effective-settings. Run from the
# checkout (or an instance directory); remove loops/shapes.rules and registry/probes.yaml
# and restore registry/controllers.yaml after.
set -euo pipefail
cat > loops/shapes.rules <<'RULES'
loop nudge-repair
  description "wake the work's coding agent until the work is done"
  work continuation controller coder
  every 1h
  emit factory.triage.requested { repo: "bj29" }
  cooldown 30m
  backoff base 5m max 2h
  budget daily_runs 12

loop vendor-incidents
  work browser_watch probe vendor-status controller coder
  cron "*/15 8-18 * * 1-5" in Europe/Budapest
  emit factory.triage.requested { repo: "bj29" }
  cooldown 1h
  backoff base 5m max 1h
  budget daily_runs 48
  shadow false
RULES
cat > registry/controllers.yaml <<'YAML'
controllers:
  - id: coder
    description: A coding agent in its non-interactive mode.
    argv: ["agent", "exec", "--work={work_id}"]
    env: [AGENT_API_KEY]
    timeout: 2h
    context: stdin
    token_env: ENGINE_WORK_TOKEN
    report: http
YAML
cat > registry/probes.yaml <<'YAML'
probes:
  - id: vendor-status
    description: The incidents of the vendor's status page.
    kind: browser
    timeout: 20s
    browser:
      allow:
        - https://status.example.com/incidents
        - https://status.example.com/login
        - https://cdn.example.com/assets
      url: https://status.example.com/incidents
      selector: main .incidents
      include_terms: [eu-west, all regions]
      ignore_patterns: ["\\b\\d+ (seconds?|minutes?|hours?) ago\\b"]
      max_chars: 20000
      login:
        urls: ["/login\\b", "^https://sso\\."]
        texts: ["Your session has expired"]
YAML
