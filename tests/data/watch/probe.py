"""The probe of the watch tests: prints the JSON document kept in the file named by its
argument, as a real probe prints a service's state. The file may instead ask it to
fail: {"exit": N, "stderr": "..."} (the text may name $WATCH_SECRET, which it then
prints), {"raw": "not json"} or {"sleep": SECONDS} (after writing its pid to "pidfile")."""

import json
import os
import sys
import time

with open(sys.argv[1], encoding="utf-8") as file:
    state = json.load(file)
if "pidfile" in state:
    with open(state["pidfile"], "w", encoding="utf-8") as out:
        out.write(str(os.getpid()))
if "sleep" in state:
    time.sleep(state["sleep"])
if "exit" in state:
    print(
        state.get("stderr", "").replace("$WATCH_SECRET", os.environ.get("WATCH_SECRET", "")),
        file=sys.stderr,
    )
    sys.exit(state["exit"])
print(state["raw"] if "raw" in state else json.dumps(state["doc"]))
