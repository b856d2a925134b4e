"""Exit codes of every `engine` command."""

OK = 0  # success; for `check`, the rules are valid
INVALID = 1  # invalid rules, a refused request, or anomalies found (doctor)
USAGE = 2  # bad arguments, a missing directory or file
