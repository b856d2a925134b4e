"""The probe of the watch tests: prints the JSON document kept in the file named by its
argument, as a real probe prints a service's state. The file may instead ask it to
fail: {"exit": N, "stderr": "..."}, {"raw": "not json"} or {"sleep": SECONDS}."""

import json
import sys
import time

with open(sys.argv[1], encoding="utf-8") as file:
    state = json.load(file)
if "sleep" in state:
    time.sleep(state["sleep"])
if "exit" in state:
    print(state.get("stderr", ""), file=sys.stderr)
    sys.exit(state["exit"])
print(state["raw"] if "raw" in state else json.dumps(state["doc"]))
