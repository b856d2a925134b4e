"""Sleep for argv[1] seconds, then print the one result line."""

import json
import sys
import time

time.sleep(float(sys.argv[1]))
print(json.dumps({"outcome": "OK", "summary": "napped"}))
