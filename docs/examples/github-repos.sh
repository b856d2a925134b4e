#!/usr/bin/env bash
# The repositories of GitHub's example deliveries in docs/examples/github/, for the
# `engine github replay` examples of docs/github.md and docs/cli.md, added to
# config/repos.yaml (written when there is none). Run from the checkout (or an
# instance directory) before starting `engine serve`.
set -euo pipefail
[ -f config/repos.yaml ] || echo "repos:" > config/repos.yaml
cat >> config/repos.yaml <<'YAML'
  hello:
    github: Codertocat/Hello-World
    base: master
  octo:
    github: octo-org/octo-repo
    base: master
YAML
