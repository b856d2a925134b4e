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


def spawn() -> None:
    """Start a grandchild of the worker that writes `late-effect` after argv[2] seconds
    (its pid in `grandchild.pid`), then linger argv[3] seconds and answer OK."""
    effect = "import pathlib, sys, time; time.sleep(float(sys.argv[1])); " + (
        "pathlib.Path('late-effect').write_text('landed')"
    )
    child = subprocess.Popen([sys.executable, "-c", effect, sys.argv[2]])
    with open("grandchild.pid", "w") as f:
        f.write(str(child.pid))
    with open(f"started-{os.getpid()}", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(int(sys.argv[3]))
    print(json.dumps({"outcome": "OK", "summary": "spawned"}))


MODES = {"garbage": garbage, "crash": crash, "forever": forever, "contract": contract}
MODES.update(sleep=sleep, spawn=spawn)
MODES[sys.argv[1]]()
