"""Leave MARK_DIR/<run id>.<pid> (one file per execution), then print the result line.

With the argument `late` (mutating work), a child process leaves a second file,
MARK_DIR/<run id>.<pid>.late, a moment later, and the command waits for it: a side
effect that lands after the command started, as real mutating work's does. A worker
killed meanwhile takes the whole process group with it, so no late mark appears for a
run that was not recorded as run."""

import json
import os
import subprocess
import sys
import time

run_id = os.environ["ENGINE_RUN_ID"]
path = os.path.join(os.environ["MARK_DIR"], f"{run_id}.{os.getpid()}")
with open(path, "x") as out:
    out.write(f"{time.time()}\n")
if sys.argv[1:] == ["late"]:
    late = f"import time; time.sleep(0.3); open({path + '.late'!r}, 'x').close()"
    subprocess.run([sys.executable, "-S", "-c", late], check=True)
print(json.dumps({"outcome": "OK", "summary": "marked"}))
