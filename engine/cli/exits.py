"""Exit codes of every `engine` command (docs/cli.md#exit-codes).

0 success. 1 a refusal, invalid rules, or something that may pass on a retry (the
database or the runtime unreachable or busy). 2 usage and configuration: what a
restart will not fix until someone changes an argument, a file or a setting.

The long-running `serve` and `worker` exit 2 for invalid rules too (`at_start`): under
a supervisor 1 means "restart me" and 2 "a person must fix this", the split a rendered
unit's `RestartPreventExitStatus=` acts on (docs/deploy.md#exit-codes)."""

from __future__ import annotations

from dsl.diagnostics import RulesError
from engine.errors import EngineError

OK = 0  # success; for `check`, the rules are valid
INVALID = 1  # invalid rules, a refused request, anomalies found (doctor), unavailable
USAGE = 2  # bad arguments, a missing or unreadable file or directory, a bad configuration

# Diagnostics about the file system rather than what the files say: a missing
# directory (E0900) or a file or directory that cannot be read (E0905); and a YAML
# file refused unread because its aliases would expand past what the engine reads
# (E0909, docs/rules.md#e0909-yaml-aliases-expand-too-far).
USAGE_CODES = frozenset({"E0900", "E0905", "E0909"})


def of_rules(err: RulesError) -> int:
    """2 when a diagnostic is about the file system, else 1 (invalid rules)."""
    return USAGE if any(d.code in USAGE_CODES for d in err.diagnostics) else INVALID


def at_start(err: EngineError | RulesError, code: int) -> int:
    """The exit of `serve` or `worker` refused at start with `code`: 2 for any problem
    in the rule files (a restart reads the same files again), else `code` itself (1
    when a retry may pass: a database unreachable or busy)."""
    return USAGE if isinstance(err, RulesError) else code
