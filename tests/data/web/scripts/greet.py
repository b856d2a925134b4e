"""Greet the name in `--name=NAME`: a line of output, then the result line."""

import json
import sys

name = next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--name="))
print(f"hello, {name}")
print(json.dumps({"outcome": "OK", "summary": f"greeted {name}"}))
