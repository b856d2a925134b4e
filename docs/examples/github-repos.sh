#!/usr/bin/env bash
# The repositories of GitHub's example deliveries in docs/examples/github/, for the
# `engine github replay` examples of docs/github.md. Run from the checkout (or an
# instance directory) before starting `engine serve`.
set -euo pipefail
cat > config/repos.yaml <<'YAML'
repos:
  hello:
    github: Codertocat/Hello-World
    base: master
  octo:
    github: octo-org/octo-repo
    base: master
YAML
