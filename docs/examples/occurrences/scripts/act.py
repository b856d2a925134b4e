"""Answer what the test asked for in $OCC_CONTROL/<loop> (default OK): an outcome
(OK, FAILED, BLOCKED, CONFLICT, NOTHING_TO_DO), or CRASH (exit 3, no result line).
Each execution appends its run id to $OCC_CONTROL/executions."""

import json
import os
import sys
from pathlib import Path

control = Path(os.environ["OCC_CONTROL"])
loop = sys.argv[1]
with (control / "executions").open("a") as out:
    out.write(f"{os.environ['ENGINE_RUN_ID']} {loop} {os.getcwd()}\n")
wanted = control / loop
answer = wanted.read_text().strip() if wanted.is_file() else "OK"
if answer == "CRASH":
    sys.exit(3)
print(json.dumps({"outcome": answer, "summary": f"{loop} answered {answer}"}))
