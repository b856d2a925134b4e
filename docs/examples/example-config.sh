#!/usr/bin/env bash
# The example instance configuration of docs/cli.md: four repos and the example
# schedule overlay. Run from the checkout (or an instance directory).
set -euo pipefail
cp config/repos.example.yaml config/repos.yaml
cp config/schedule.example.yaml config/schedule.yaml
