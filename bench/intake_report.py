"""The figures of bench/intake.py as numbers (`summarise`, `durability`) and as text
(`report`): one table of requests/s, p50, p99 and the ratios, then what each server
answered and what the engine's file holds."""

from __future__ import annotations

import signal
import statistics
from typing import Any

TARGET_OF_BARE = 0.5
GOAL_OF_PEER = 1.0
ORDER = ("bare", "peer", "engine")
STOPPED = -signal.SIGTERM  # how Node exits when stopped; aiohttp servers exit 0


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median requests/s (the lower middle of an even count)."""
    return sorted(runs, key=lambda r: r["rps"])[(len(runs) - 1) // 2]


def ratio(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    if "run" not in a or "run" not in b or not b["run"]["rps"]:
        return None
    return float(a["run"]["rps"] / b["run"]["rps"])


def round_ratios(a: dict[str, Any], b: dict[str, Any]) -> list[float]:
    """a's requests/s over b's, round by round (the two ran back to back)."""
    if "runs" not in a or "runs" not in b:
        return []
    return [x["rps"] / y["rps"] for x, y in zip(a["runs"], b["runs"], strict=True) if y["rps"]]


def durability(engine: dict[str, Any], counts: dict[str, Any], connections: int) -> dict[str, Any]:
    """The rows in the file against the 2xx answers the clients saw (every delivery is
    new, so each 2xx is a 202 admission unless the rows say otherwise). Requests in
    flight when a load run stops may be admitted without their answer being read: at
    most one per connection per run."""
    runs = [engine["warmup"], *engine["runs"], *engine.get("profile_runs", [])]
    accepted = 1 + sum(r["ok"] for r in runs)  # 1: the probe
    rows = counts["merge_requested"]
    bound = connections * len(runs)
    return {
        "accepted_2xx": accepted,
        "rows": rows,
        "rows_minus_2xx": rows - accepted,
        "in_flight_bound": bound,
        "durable": 0 <= rows - accepted <= bound,
    }


def summarise(f: dict[str, Any]) -> dict[str, Any]:
    bare, peer, engine = (f["servers"][key] for key in ORDER)
    of_bare, of_peer = ratio(engine, bare), ratio(engine, peer)
    by_round = round_ratios(engine, bare)
    return {
        "engine_rps": engine["run"]["rps"],
        "bare_rps": bare["run"]["rps"],
        "peer_rps": peer["run"]["rps"] if "run" in peer else None,
        "engine_of_bare": of_bare,
        "engine_of_peer": of_peer,
        "engine_of_bare_by_round": by_round,
        "engine_of_bare_round_median": statistics.median(by_round) if by_round else None,
        "engine_of_peer_by_round": round_ratios(engine, peer),
        "cpu_us_per_request": {
            key: figures["run"]["server_cpu_us_per_request"]
            for key, figures in f["servers"].items()
            if "run" in figures
        },
        "target_met": of_bare is not None and of_bare >= TARGET_OF_BARE,
        "goal_met": of_peer is not None and of_peer >= GOAL_OF_PEER,
        "durable": f["durability"]["durable"],
    }


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def row(key: str, s: dict[str, Any], servers: dict[str, Any]) -> list[str]:
    figures = servers[key]
    if "run" not in figures:
        return [f"{key}: {figures['label']}", *"------", f"not run: {figures['error']}"]
    run = figures["run"]
    target = "-"
    if key == "engine":
        target = (
            f">= {TARGET_OF_BARE:.2f}x bare: {'met' if s['target_met'] else 'MISSED'}; "
            f"= peer: {'met' if s['goal_met'] else 'not yet'}"
        )
    return [
        f"{key}: {figures['label']}",
        f"{run['rps']:,.0f}",
        f"{run['p50_ms']:.2f}",
        f"{run['p99_ms']:.2f}",
        f"{run['server_cpu_us_per_request']:,.0f}",
        fmt_ratio(ratio(figures, servers["bare"])),
        fmt_ratio(ratio(figures, servers["peer"])),
        target,
    ]


def table(f: dict[str, Any]) -> list[str]:
    columns = ["server", "req/s", "p50 ms", "p99 ms", "CPU us/req", "vs bare", "vs peer", "target"]
    cells = [row(key, f["summary"], f["servers"]) for key in ORDER]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    right = {1, 2, 3, 4, 5, 6}

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if i in right else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ).rstrip()

    return [line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)]


def answers(f: dict[str, Any]) -> list[str]:
    lines = []
    for key in ORDER:
        figures = f["servers"][key]
        if "run" not in figures:
            continue
        run, probe = figures["run"], figures["probe"]
        errors = sum(sum(r["errors"].values()) for r in figures["runs"])
        non_2xx = sum(r["non_2xx"] for r in figures["runs"])
        rounds = " / ".join(f"{r['rps']:,.0f}" for r in figures["runs"])
        lines.append(
            f"{key}: probe {probe['status']} {probe['answer'][:90]}; "
            f"req/s by round {rounds}; {non_2xx:,} answers not 2xx"
            + (f", {errors} socket errors" if errors else "")
            + f"; p90 {run['p90_ms']:.2f} ms, max {run['max_ms']:.1f} ms"
            + (f"; exited {code}" if (code := figures["exit_code"]) not in (0, STOPPED) else "")
        )
    return lines


def durability_line(f: dict[str, Any]) -> str:
    d, counts = f["durability"], f["counts"]
    verdict = "durable" if d["durable"] else "NOT as expected"
    actors = ", ".join(f"{k} {v:,}" for k, v in counts["events_by_actor"].items())
    return (
        f"durability: {d['rows']:,} factory.merge.requested rows admitted by github for "
        f"{d['accepted_2xx']:,} answers 2xx (the probe's 202, the warm-up and every run); "
        f"{d['rows_minus_2xx']:+,} (in flight when a load run stopped: at most "
        f"{d['in_flight_bound']}): {verdict}. Planned by the runtime loop "
        f"{counts['planned']:,}, journal rows {counts['journal_rows']:,}, admitted by {actors}"
    )


def report(f: dict[str, Any]) -> str:
    load, s = f["load"], f["summary"]
    head = [
        f"GitHub intake: signed {load['body_bytes']:,}-byte pull_request deliveries, "
        f"{load['connections']} connections; {load['rounds']} round(s) of "
        f"{load['duration_s']} s per server after a {load['warmup_s']} s warm-up; load by "
        f"{load['tool']}" + (f" ({load['threads']} threads)" if load["tool"] == "wrk" else ""),
        f"engine at {f['revision']}, Python {f['python']}, aiohttp {f['aiohttp']}, "
        f"{f['node']}, {f['cpus']} CPUs",
        "",
    ]
    rounds = ""
    if len(s["engine_of_bare_by_round"]) > 1:
        rounds = "engine vs bare by round: " + ", ".join(
            f"{x:.2f}x" for x in s["engine_of_bare_by_round"]
        )
    tail = [
        *(["", rounds] if rounds else []),
        "",
        *answers(f),
        "",
        "CPU us/req: the server process's user + system CPU time (every thread) over the "
        "answers of the same run; less swayed by a busy machine than req/s",
        durability_line(f),
        "1-minute load average before/after: "
        + " / ".join(f"{x:.2f}" for x in f["load_average_1m"]),
    ]
    return "\n".join(head + table(f) + tail)
