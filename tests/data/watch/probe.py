"""The probe of the watch tests: prints the JSON document kept in the file named by its
argument, as a real probe prints a service's state. The file may instead ask it to
fail: {"exit": N, "stderr": "..."}, {"raw": "not json"} or {"sleep": SECONDS} (after
writing its pid to "pidfile"), or hold its answer until {"until": PATH} exists. What it
prints has $WATCH_SECRET replaced by the value of that environment variable, as a
careless probe would print its token."""

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
while "until" in state and not os.path.exists(state["until"]):
    time.sleep(0.02)
secret = os.environ.get("WATCH_SECRET", "")
if "exit" in state:
    print(state.get("stderr", "").replace("$WATCH_SECRET", secret), file=sys.stderr)
    sys.exit(state["exit"])
text = state["raw"] if "raw" in state else json.dumps(state["doc"])
print(text.replace("$WATCH_SECRET", secret))
