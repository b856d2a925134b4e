"""A fake controller for the wake tests (tests/integration/test_work_wake.py): started by
the engine with the work's context on stdin and its token in ENGINE_WORK_TOKEN, it
records what it was given (its argv, its /proc cmdline and its parent's, the names of
its environment, whether the token came, the context) in the file named by argv[2],
then acts by its mode (argv[1]):

- `claim`: claims the work (POST /work/{id}/continue) with its own token, completes
  it, exits 0;
- `silent`: never claims; sleeps until it is stopped;
- `fail`: claims nothing, exits 3.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from pathlib import Path


def call(path: str, body: dict[str, object]) -> None:
    request = urllib.request.Request(
        os.environ["ENGINE_URL"] + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + os.environ["ENGINE_WORK_TOKEN"]},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def main() -> int:
    mode, record, work_id = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    context = json.loads(sys.stdin.read() or "null")
    with Path(f"{record}.launches").open("a") as launches:
        launches.write(f"{os.getpid()}\n")
    record.write_text(
        json.dumps(
            {
                "argv": sys.argv,
                "cmdline": cmdline(os.getpid()),
                "parentCmdline": cmdline(os.getppid()),
                "env": sorted(os.environ),
                "hasToken": bool(os.environ.get("ENGINE_WORK_TOKEN")),
                "context": context,
            }
        )
    )
    if mode == "claim":
        call(f"/work/{work_id}/continue", {"session": "fake-1", "ttl": 600})
        call(f"/work/{work_id}/complete", {"note": "done by the fake controller"})
        return 0
    if mode == "silent":
        time.sleep(600)
        return 0
    return 3


if __name__ == "__main__":
    sys.exit(main())
