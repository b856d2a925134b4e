#!/usr/bin/env bash
# After queue-demo-1.sh: a worker w1 claims both queued runs at 12:00:06 under a 2 s
# lease and dies before it starts them (as a worker killed with `kill -KILL` leaves its
# runs), so their leases expire at 12:00:08 (docs/cli.md#engine-reap,
# docs/runtime.md#runs). It claims through the engine's own service, as `engine worker`
# does. Run from the checkout (or an instance directory).
set -euo pipefail
ENGINE_NOW=2026-11-30T12:00:06Z python3 - <<'PY'
from engine.bootstrap import open_service
from pathlib import Path

from engine.loading import Paths

service = open_service("var/engine.db", Paths(Path("loops"), Path("registry"), Path("config")))
while service.claim("w1", lease_seconds=2) is not None:
    pass
PY
