"""Print the arguments and environment this command got, as one result line."""

import json
import os
import sys

print("echo: starting")
result = {
    "outcome": "OK",
    "summary": "echoed",
    "details": {"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd()},
}
print(json.dumps(result))
