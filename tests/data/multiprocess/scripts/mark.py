"""Leave MARK_DIR/<run id>.<pid> (one file per execution), then print the result line."""

import json
import os
import time

run_id = os.environ["ENGINE_RUN_ID"]
path = os.path.join(os.environ["MARK_DIR"], f"{run_id}.{os.getpid()}")
with open(path, "x") as out:
    out.write(f"{time.time()}\n")
print(json.dumps({"outcome": "OK", "summary": "marked"}))
