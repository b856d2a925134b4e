"""How fast `engine simulate` (docs/simulate.md) predicts a year, beside its floor.

One enabled `every 5m` loop routed to a read-only `fake` definition, simulated over a
year: 105,120 slots, each fired through the real scheduler, decided by
`engine.core.decide`, written to the in-memory store, and (by scenario) approved and
run. Three scenarios, each timed end to end in this process (`simulate()` and reading
the prediction back):

* `auto`: `approval auto`, every slot a run that succeeds (the heaviest: each slot is
  a decision, a run claimed, started, finished and settled);
* `watched`: `approval watched`, `--approve none`: each slot a proposal that supersedes
  the one before;
* `approved`: `approval watched`, `--approve all`: each slot a proposal approved at
  once by an operator, and its run.

The floor, measured in the same invocation: the pure decisions alone, `decide` of the
same 105,120 ticks on facts held constant (no store, no scheduler, no runs): what any
simulation that runs the engine's own decisions must at least pay. No peer predicts
decisions (APScheduler, Temporal and Airflow list fire times at best), so there is no
peer figure. Target: a year in at most 5 s. Figures are printed, never asserted.

    .venv/bin/python bench/simulate.py                 # the year, every scenario
    .venv/bin/python bench/simulate.py --days 30       # a shorter window
    .venv/bin/python bench/simulate.py --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from check import revision  # noqa: E402
from scheduler_tree import DEFINITIONS_YAML, EVENT_TYPE, EVENT_TYPES_YAML, contract, tick_schema  # noqa: E402

from engine.core.decide import Facts, decide  # noqa: E402
from engine.core.envelope import iso, parse_iso  # noqa: E402
from engine.core.machines import Lifecycle  # noqa: E402
from engine.core.planner import admitted_record  # noqa: E402
from engine.core.ruleset import RuleSet  # noqa: E402
from engine.core.slots import slots_of  # noqa: E402
from engine.core.ticks import tick  # noqa: E402
from engine.loading import Paths, load_rules  # noqa: E402
from engine.service.simulate import Scenario, simulate  # noqa: E402

TARGET_S = 5.0
START = parse_iso("2026-01-01T00:00:00Z")
SCENARIOS = {
    "auto": ("auto", None),
    "watched": ("watched", None),
    "approved": ("watched", timedelta(0)),
}


def write_tree(root: Path, approval: str) -> Paths:
    for sub in ("loops", "registry/schemas", "registry/contracts", "config"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "registry" / "event-types.yaml").write_text(EVENT_TYPES_YAML)
    (root / "registry" / "definitions.yaml").write_text(DEFINITIONS_YAML)
    (root / "registry" / "schemas" / "bench-tick.input.json").write_text(json.dumps(tick_schema()))
    (root / "registry" / "contracts" / "bench.result.json").write_text(json.dumps(contract()))
    (root / "loops" / "year.rules").write_text(
        f"loop year\n  every 5m\n  emit {EVENT_TYPE}\n  approval {approval}\n  enabled\n"
        f"route {EVENT_TYPE} to tick-work@1\n"
    )
    return Paths(root / "loops", root / "registry", root / "config")


def timed_simulation(root: Path, name: str, days: int) -> dict[str, Any]:
    approval, after = SCENARIOS[name]
    rules = load_rules(write_tree(root / name, approval))
    scenario = Scenario(
        start=START,
        end=START + timedelta(days=days) - timedelta(seconds=1),
        approve_after=after,
    )
    began = time.perf_counter()
    done = simulate(rules, scenario, root / name / "artifacts")
    simulated = time.perf_counter() - began
    doc = done.prediction()
    total = time.perf_counter() - began
    summary = doc["loops"]["year"]
    return {
        "scenario": name,
        "slots": summary["fired"],
        "runs": summary["runs"],
        "proposals": summary["proposals"],
        "simulate_s": simulated,
        "s": total,
        "us_per_slot": total / max(summary["fired"], 1) * 1e6,
    }


def floor(rules: RuleSet, days: int) -> dict[str, Any]:
    """`decide` of each tick of the window on constant facts: the pure decisions."""
    loop = rules.loops["year"]
    seq = slots_of(loop.trigger)
    assert seq is not None
    machines = Lifecycle(rules)
    end = START + timedelta(days=days)
    slots = []
    slot = START
    while slot < end:
        slots.append(slot)
        nxt = seq.after(slot)
        assert nxt is not None
        slot = nxt
    facts = Facts()
    began = time.perf_counter()
    for at in slots:
        envelope = tick(loop, at, 0)
        event = admitted_record(rules, envelope, "schedule", iso(at))
        decide(event, rules, facts, machines, iso(at))
    took = time.perf_counter() - began
    return {"slots": len(slots), "s": took, "us_per_slot": took / len(slots) * 1e6}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=365, help="the window (default: a year)")
    parser.add_argument(
        "--scenario", action="append", choices=sorted(SCENARIOS), help="(default: all)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = args.scenario or list(SCENARIOS)
    with tempfile.TemporaryDirectory(prefix="bench-simulate-") as scratch:
        root = Path(scratch)
        base = floor(load_rules(write_tree(root / "floor", "auto")), args.days)
        results = [timed_simulation(root, name, args.days) for name in names]
    figures = {"revision": revision(), "days": args.days, "floor": base, "scenarios": results}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"engine simulate, {args.days} days of an every-5m loop ({revision()})")
    print(
        f"  floor (decide alone, constant facts): {base['slots']} slots in {base['s']:.2f} s"
        f" = {base['us_per_slot']:.0f} us/slot"
    )
    for r in results:
        year = r["us_per_slot"] * 105_120 / 1e6
        verdict = "met" if year <= TARGET_S else "MISSED"
        print(
            f"  {r['scenario']:9s} {r['slots']} slots, {r['runs']} runs, {r['proposals']} proposals"
            f" in {r['s']:.2f} s = {r['us_per_slot']:.0f} us/slot"
            f" ({r['us_per_slot'] / base['us_per_slot']:.1f}x the floor);"
            f" a year at this rate {year:.1f} s: target <= {TARGET_S:.0f} s {verdict}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
