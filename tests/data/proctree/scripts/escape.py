"""Start a descendant that leaves the run's process group, as argv[1] says, then linger
argv[2] seconds and answer OK.

- `setsid`: a child in a session of its own (`setsid sleep`), its parent still here;
- `daemon`: a double fork: a child that calls setsid and forks the descendant, then
  exits, so the descendant is orphaned (a daemon).

The descendant writes its pid to `escapee.pid` and sleeps 300 seconds. The command
writes `started-<pid>` once the descendant has written its pid."""

import json
import os
import sys
import time
from pathlib import Path

LATE = (
    "import os, pathlib, time; pathlib.Path('escapee.pid').write_text(str(os.getpid())); "
    "time.sleep(300)"
)


def descendant() -> None:
    """In a forked process: become the descendant (its own session)."""
    os.setsid()
    os.execv(sys.executable, [sys.executable, "-c", LATE])


def daemon() -> None:
    """In a forked child: fork the descendant in a new session, and exit at once."""
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", LATE])
    os._exit(0)


def main(how: str, linger: int) -> None:
    child = os.fork()
    if child == 0:
        descendant() if how == "setsid" else daemon()
    if how == "daemon":
        os.waitpid(child, 0)  # the daemon's parent is gone: it is an orphan now
    while not Path("escapee.pid").exists() or not Path("escapee.pid").read_text():
        time.sleep(0.01)
    Path(f"started-{os.getpid()}").write_text(str(os.getpid()))
    time.sleep(linger)
    print(json.dumps({"outcome": "OK", "summary": f"left a {how} descendant"}))


main(sys.argv[1], int(sys.argv[2]))
