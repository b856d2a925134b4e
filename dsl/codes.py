"""The catalogue of diagnostic codes. Every code a diagnostic carries is listed here
with a one-line title; docs/rules.md explains each with an example and a fix. An E code
is an error (nothing loads); a W code a warning (the rules load, and say what to fix)."""

from __future__ import annotations

CODES: dict[str, str] = {
    # syntax
    "E0001": "syntax error",
    "E0002": "inconsistent indentation",
    # loop settings
    "E0101": "unknown loop setting",
    "E0102": "setting given twice or conflicting",
    "E0103": "loop without a trigger",
    "E0104": "loop must emit exactly one event type",
    "E0105": "wrong arguments or value for a setting",
    "E0106": "work-bound loop shape without its bounds",
    # triage tables (a loop's `triage` block)
    "E0110": "unknown triage decision",
    "E0111": "a rule promotes a finding",
    "E0112": "candidate finding without a key",
    "E0113": "key or category on a decision that takes none",
    "E0114": "unreachable triage line",
    # values and references to the registry
    "E0201": "unparseable duration or cadence",
    "E0202": "bad cron expression",
    "E0203": "unknown (unregistered) event type",
    "E0204": "unknown time zone",
    "E0205": "bad timestamp",
    "E0206": "tick payload does not fit the event type's input schema",
    "E0207": "invalid loop name",
    "E0208": "loop payload sets a reserved tick field",
    "E0209": "unknown probe, or a probe param the loop payload does not fill",
    "E0210": "unknown controller",
    # approval safety
    "E0301": "approval auto on a loop that is not enabled",
    "E0302": "approval auto on a human-approval-only event type or definition",
    "E0303": "approval auto on a route to a mutating definition",
    "E0304": "approval auto or shadow mode in the unreviewed overlay",
    "E0305": "approval auto on an on_event loop of mutating work",
    # duplicates
    "E0401": "duplicate loop",
    "E0402": "duplicate route",
    "E0403": "duplicate chain edge",
    "E0404": "duplicate webhook table",
    "E0405": "two loops can claim the same semantic key",
    # definitions and routes
    "E0501": "unknown definition",
    "E0502": "unknown definition version",
    "E0503": "chain on an outcome the definition does not declare",
    "E0504": "event type without a route",
    "E0505": "malformed definition reference",
    # expressions
    "E0601": "unknown name in an expression",
    "E0602": "bad string template",
    "E0603": "unknown function",
    "E0604": "duplicate key in an object",
    "E0606": "unknown collection in a for block",
    "E0607": "expression failed while expanding",
    "E0608": "expression nested too deeply",
    # webhooks
    "E0701": "unknown webhook source",
    # the overlay (config/schedule.yaml)
    "E0801": "overlay changes a pinned field of a kernel loop",
    "E0802": "invalid overlay entry",
    "E0803": "incomplete new overlay loop",
    "E0804": "inconsistent overlay loop fields",
    # host clocks (config/schedule.yaml `host_clocks:`, docs/deploy.md#2-the-host-clock-bridge)
    "E0805": "invalid host clock entry",
    "E0806": "host clock disagrees with its bridge loop",
    # the triggers that wait (`after LOOP`)
    "E1001": "after names an unknown loop",
    "E1002": "loops wait for each other in a circle",
    "E1003": "after waits for an outcome or state the upstream never reaches",
    # files
    "E0900": "rules, registry or config directory not found",
    "E0901": "invalid YAML",
    "E0902": "invalid registry or configuration entry",
    "E0903": "invalid or missing JSON Schema",
    "E0904": "unknown output contract",
    "E0905": "file or directory cannot be read",
    "E0906": "duplicate registry entry",
    "E0907": "file is not UTF-8 text",
    "E0908": "YAML or JSON nested too deeply",
    "E0909": "YAML aliases expand too far",
    "E0910": "browser probe URL outside its allowlist",
    # warnings: the rules load
    "W0901": "old spelling (loads for one release; engine fmt --write rewrites it)",
}
