"""Misbehave as the first argument says; each mode holds one adapter behaviour."""

import json
import os
import subprocess
import sys
import time


def garbage() -> None:
    print("this is not a JSON result")


def crash() -> None:
    print(json.dumps({"outcome": "OK"}))
    print("boom: the probe crashed on purpose", file=sys.stderr)
    sys.exit(3)


def forever() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open("pids.json", "w") as f:
        json.dump({"probe": os.getpid(), "child": child.pid}, f)
    time.sleep(600)


def contract() -> None:
    print(json.dumps({"outcome": "OK", "unexpected": True}))


def sleep() -> None:
    """Sleep on the first attempt only (a retry answers at once); each attempt leaves a
    `started-<pid>` marker in the run directory."""
    retry = any(name.startswith("started-") for name in os.listdir("."))
    with open(f"started-{os.getpid()}", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(0 if retry else int(sys.argv[2]))
    print(json.dumps({"outcome": "OK", "summary": "retried" if retry else "slept"}))


{"garbage": garbage, "crash": crash, "forever": forever, "contract": contract, "sleep": sleep}[
    sys.argv[1]
]()
