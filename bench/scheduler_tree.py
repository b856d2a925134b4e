"""Rule trees for the scheduler benchmark (bench/scheduler.py).

`write_wave_tree(root, loops)` writes `loops` enabled `every 60m` loops (`w00000`,
`w00001`, ...) that all share one slot; `write_catchup_tree(root)` writes one enabled
`every 1m` loop under `catch-up all cap 50000`. Both emit `bench.tick` under `approval
watched`, so every tick is planned into a proposal, routed to a read-only `fake`
definition with an output contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.loading import Paths

EVENT_TYPE = "bench.tick"
DEFINITION = "tick-work"
CONTRACT_ID = "bench.result/v1"
LOOPS_PER_FILE = 100
CATCHUP_LOOP = "catchup"
CATCHUP_CAP = 50_000


def wave_loop(i: int) -> str:
    return f"w{i:05d}"


def tick_schema() -> dict[str, Any]:
    """The bookkeeping fields every tick carries, and nothing else."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "bench tick",
        "type": "object",
        "properties": {
            "loop": {"type": "string"},
            "slot": {"type": "string", "format": "date-time"},
            "cadenceSeconds": {"type": "integer", "minimum": 0},
            "skippedSlots": {"type": "integer", "minimum": 0},
        },
        "required": ["loop", "slot"],
        "additionalProperties": False,
    }


def contract() -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": CONTRACT_ID,
        "type": "object",
        "properties": {"outcome": {"enum": ["OK", "FAILED"]}},
        "required": ["outcome"],
    }


EVENT_TYPES_YAML = f"""event_types:
  {EVENT_TYPE}:
    description: A scheduler benchmark tick.
    schema: bench-tick.input.json
"""

DEFINITIONS_YAML = f"""definitions:
  - id: {DEFINITION}
    version: 1
    description: Read-only work a benchmark tick proposes.
    adapter: fake
    fake: {{outcome: OK}}
    output_contract: {CONTRACT_ID}
    mutating: false
    timeout: 5m
    outcomes: [OK, FAILED]
"""


def loop_block(name: str, every: str, catch_up: str | None = None) -> str:
    lines = [f"loop {name}", f"  every {every}", f"  emit {EVENT_TYPE}"]
    if catch_up:
        lines.append(f"  catch-up {catch_up}")
    return "\n".join([*lines, "  approval watched", "  enabled"]) + "\n"


def write_registry(paths: Paths) -> None:
    for folder in (paths.rules, paths.registry / "schemas", paths.registry / "contracts"):
        folder.mkdir(parents=True)
    paths.config.mkdir()
    (paths.registry / "event-types.yaml").write_text(EVENT_TYPES_YAML)
    (paths.registry / "definitions.yaml").write_text(DEFINITIONS_YAML)
    schema = paths.registry / "schemas" / "bench-tick.input.json"
    schema.write_text(json.dumps(tick_schema(), indent=2))
    contract_file = paths.registry / "contracts" / "bench.result.v1.json"
    contract_file.write_text(json.dumps(contract(), indent=2))
    (paths.rules / "routes.rules").write_text(f"route {EVENT_TYPE} to {DEFINITION}@1\n")


def tree_paths(root: Path) -> Paths:
    return Paths(root / "loops", root / "registry", root / "config")


def write_wave_tree(root: Path, loops: int) -> Paths:
    paths = tree_paths(root)
    write_registry(paths)
    blocks = [loop_block(wave_loop(i), "60m") for i in range(loops)]
    for n in range(0, len(blocks), LOOPS_PER_FILE):
        text = "\n".join(blocks[n : n + LOOPS_PER_FILE])
        (paths.rules / f"wave-{n // LOOPS_PER_FILE:03d}.rules").write_text(text)
    return paths


def write_catchup_tree(root: Path) -> Paths:
    paths = tree_paths(root)
    write_registry(paths)
    block = loop_block(CATCHUP_LOOP, "1m", f"all cap {CATCHUP_CAP}")
    (paths.rules / "catchup.rules").write_text(block)
    return paths
