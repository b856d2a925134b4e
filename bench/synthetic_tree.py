"""A synthetic but valid rule tree for the `engine check` benchmark (bench/check.py).

`write_tree(root, Shape(loops, chains, webhooks))` writes loops/, registry/ and config/
under `root`: `loops` loops (30% from a `for repo in repos where not repo.report_only`
block over config/repos.yaml, a fifth of the rest on `cron ... in Europe/Budapest`),
`chains` chain edges over definitions with ten outcomes each, `webhooks` lines across
several `webhook github KIND` tables, routes for every event type, event types with a
JSON Schema each, one output contract and a small schedule overlay of overrides."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.loading import Paths

EVENT_TYPES = 40
OUTCOMES = tuple(f"OUT_{k:02d}" for k in range(10))
TEMPLATES_PER_REPO = 3  # loops in the generated `for repo in repos` block
DECLS_PER_FILE = 100
EVERY = ("5m", "15m", "30m", "1h", "4h", "24h", "7d")
WEBHOOK_KINDS = (
    "pull_request",
    "workflow_run",
    "push",
    "issues",
    "issue_comment",
    "check_suite",
    "release",
    "pull_request_review",
)
CONTRACT_ID = "bench.result/v1"


@dataclass(frozen=True)
class Shape:
    loops: int
    chains: int
    webhooks: int

    @property
    def active_repos(self) -> int:
        """Repos the `for` block expands over: 3 loops each, 30% of all loops."""
        return self.loops // 10

    @property
    def definitions(self) -> int:
        return max(1, -(-self.chains // len(OUTCOMES)))


def event_type(i: int) -> str:
    return f"bench.kind-{i % EVENT_TYPES:02d}.requested"


def definition(i: int) -> str:
    return f"step-{i:03d}"


def mutating(i: int) -> bool:
    return i % 2 == 0


def schema(i: int) -> dict[str, Any]:
    count = {"type": "integer", "minimum": 0}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"bench kind {i}",
        "type": "object",
        "properties": {
            "repo": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]*$"},
            "shard": count,
            "prNumbers": {"type": "array", "items": {"type": "integer", "minimum": 1}},
            "headSha": {"type": "string", "pattern": "^[0-9a-f]{7,64}$"},
            "attempt": count,
            "runId": count,
            "loop": {"type": "string"},
            "slot": {"type": "string", "format": "date-time"},
            "cadenceSeconds": count,
            "skippedSlots": count,
        },
        "required": ["repo"],
        "additionalProperties": False,
    }


def event_types_yaml() -> str:
    lines = ["event_types:"]
    for i in range(EVENT_TYPES):
        lines += [
            f"  {event_type(i)}:",
            f"    description: Synthetic event type {i} for the check benchmark.",
            f"    schema: bench-{i:02d}.input.json",
        ]
        if i == EVENT_TYPES - 1:
            lines.append("    human_only: true")
    return "\n".join(lines) + "\n"


def definitions_yaml(shape: Shape) -> str:
    lines = ["definitions:"]
    for i in range(shape.definitions):
        lines += [
            f"  - id: {definition(i)}",
            "    version: 1",
            f"    description: Synthetic unit of work {i}.",
        ]
        if i % 10 == 5:
            lines += [
                "    adapter: command",
                '    argv: ["{python}", "-m", "bench_step", "--repo", "{repo}"]',
                "    params: {repo: {from: payload.repo, type: name}}",
            ]
        else:
            lines.append("    adapter: agent")
        lines += [
            f"    output_contract: {CONTRACT_ID}",
            f"    mutating: {str(mutating(i)).lower()}",
            "    timeout: 30m",
            f"    outcomes: [{', '.join(OUTCOMES)}]",
            "",
        ]
    return "\n".join(lines)


def contract() -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": CONTRACT_ID,
        "type": "object",
        "properties": {
            "outcome": {"enum": list(OUTCOMES)},
            "prNumber": {"type": "integer", "minimum": 1},
            "headSha": {"type": "string", "pattern": "^[0-9a-f]{7,64}$"},
            "summary": {"type": "string"},
        },
        "required": ["outcome"],
        "additionalProperties": False,
    }


def repos_yaml(shape: Shape) -> str:
    lines = ["repos:"]
    report_only = max(1, shape.active_repos // 5)
    for i in range(shape.active_repos + report_only):
        lines += [f"  repo-{i:04d}:", f"    github: bench-org/repo-{i:04d}", "    base: main"]
        if i >= shape.active_repos:
            lines.append("    report_only: true")
    return "\n".join(lines) + "\n"


def plain_loops(shape: Shape) -> int:
    return shape.loops - TEMPLATES_PER_REPO * shape.active_repos


def is_cron(i: int) -> bool:
    return i % 5 == 4


def schedule_yaml(shape: Shape) -> str:
    """Overrides only (a new overlay loop would change the loop count)."""
    lines = ["schedules:"]
    count = plain_loops(shape)
    for i in range(0, count, max(1, count // 10)):
        lines += [f"  job-{i:05d}:", "    enabled: true"]
        if not is_cron(i):
            lines.append("    every: 2h")
        lines.append("    payload: {shard: 1}")
    return "\n".join(lines) + "\n"


def loop_block(i: int) -> str:
    trigger = (
        f'cron "{i % 60} {i % 24} * * 1-5" in Europe/Budapest'
        if is_cron(i)
        else f"every {EVERY[i % len(EVERY)]}"
    )
    catch_up = ("none", "last", "all cap 3")[i % 3]
    lines = [
        f"loop job-{i:05d}",
        f"  {trigger}",
        f'  emit {event_type(i)} {{ repo: "r-{i % 97}", shard: {i % 8} }}',
        f"  catch_up {catch_up}",
        "  overlap skip" if i % 4 else "  overlap allow",
        "  approval watched",
        "  enabled true" if i % 3 == 0 else "  enabled false",
    ]
    if i % 7 == 0:
        lines.append(f'  description "synthetic loop {i}"')
    if i % 11 == 0:
        lines.append("  max_lateness 10m")
    return "\n".join(lines) + "\n"


def foreach_block() -> str:
    return (
        "for repo in repos where not repo.report_only\n"
        "  loop work-{repo.name}\n"
        "    every 30m\n"
        f"    emit {event_type(1)} {{ repo: repo.name }}\n"
        "    approval watched\n"
        "    enabled false\n"
        "\n"
        "  loop merge-{repo.name}\n"
        "    every 30m\n"
        f"    emit {event_type(2)} {{ repo: repo.name, shard: 0 }}\n"
        "    catch_up none\n"
        "    overlap skip\n"
        "    enabled false\n"
        "\n"
        "  loop nightly-{repo.name}\n"
        '    cron "0 6 * * 1-5" in Europe/Budapest\n'
        f"    emit {event_type(3)} {{ repo: repo.name }}\n"
        "    enabled false\n"
    )


def chain_blocks(shape: Shape) -> Iterator[str]:
    """`shape.chains` edges: mostly one outcome a block, some two, some `stop`."""
    e = 0
    while e < shape.chains:
        d, k = divmod(e, len(OUTCOMES))
        outcomes = [OUTCOMES[k]]
        if k % 5 == 3 and e + 1 < shape.chains:
            outcomes.append(OUTCOMES[k + 1])
        head = f"on {definition(d)}@1 outcome {', '.join(outcomes)}"
        yield head + "\n" + chain_body(e) + "\n"
        e += len(outcomes)


def chain_body(e: int) -> str:
    if e % 10 == 8:
        return "  stop"
    first = (
        f"  emit {event_type(e)} {{ repo: event.payload.repo, "
        "prNumbers: [result.prNumber], attempt: run.attempt }"
    )
    if e % 3:
        return first
    return (
        first + "\n"
        f'  emit {event_type(e + 7)} id "chain:{{event.payload.repo}}:{{result.headSha}}"'
        ' if result.prNumber > 0 and result.outcome != "OUT_00" {\n'
        "    repo: event.payload.repo,\n"
        "    headSha: result.headSha,\n"
        "  }"
    )


def webhook_line(j: int) -> str:
    variants = (
        f"  ignore unconfigured_{j} unless repo.configured",
        f'  ignore label_{j} if lower(label.name) == "skip-{j}"',
        f"  let v{j} = pull_request.head",
        f"  reject ambiguous_{j} if count(workflow_run.pull_requests) > {j}",
        f'  emit {event_type(j)} subject repo.name id "wh:{{delivery.id}}:{j}"'
        f' if action == "a{j}" {{\n    repo: repo.name,\n    runId: workflow_run.id,\n  }}',
        f'  ignore branch_{j} unless pull_request.base.ref in [repo.base, "release-{j}"]',
        f"  emit {event_type(j + 1)} unless repo.report_only {{ repo: repo.name }}",
    )
    return variants[j % len(variants)]


def webhook_tables(shape: Shape) -> Iterator[str]:
    kinds = WEBHOOK_KINDS[: max(1, min(len(WEBHOOK_KINDS), shape.webhooks // 20))]
    per_kind, extra = divmod(shape.webhooks, len(kinds))
    for n, kind in enumerate(kinds):
        count = per_kind + (1 if n < extra else 0)
        lines = [f"webhook github {kind}"]
        lines += ['  ignore unhandled_action unless action in ["opened", "synchronize"]']
        lines += [webhook_line(j) for j in range(1, count)]
        yield "\n".join(lines) + "\n"


def rules_files(shape: Shape) -> Iterator[tuple[str, list[str]]]:
    """(file name, declarations) for every generated rule file."""
    blocks = [loop_block(i) for i in range(plain_loops(shape))]
    for n in range(0, len(blocks), DECLS_PER_FILE):
        yield f"jobs-{n // DECLS_PER_FILE:03d}.rules", blocks[n : n + DECLS_PER_FILE]
    yield "repos.rules", [foreach_block()]
    chains = list(chain_blocks(shape))
    for n in range(0, len(chains), DECLS_PER_FILE):
        yield f"chains-{n // DECLS_PER_FILE:03d}.rules", chains[n : n + DECLS_PER_FILE]
    yield "github.rules", list(webhook_tables(shape))
    routes = []
    for i in range(EVENT_TYPES):
        d = i % shape.definitions
        auto = not mutating(d) and i % 3 == 0 and i != EVENT_TYPES - 1
        approval = " approval auto" if auto else ""
        routes.append(f"route {event_type(i)} to {definition(d)}@1{approval}\n")
    policies = [f"human_only {event_type(EVENT_TYPES - 1)}\n", "human_only step-000@1\n"]
    yield "routes.rules", ["".join(routes), "".join(policies)]


def write_tree(root: Path, shape: Shape) -> Paths:
    paths = Paths(root / "loops", root / "registry", root / "config")
    for folder in (paths.rules, paths.registry / "schemas", paths.registry / "contracts"):
        folder.mkdir(parents=True)
    paths.config.mkdir()
    for name, decls in rules_files(shape):
        (paths.rules / name).write_text("# generated by bench/check.py\n" + "\n".join(decls))
    (paths.registry / "event-types.yaml").write_text(event_types_yaml())
    (paths.registry / "definitions.yaml").write_text(definitions_yaml(shape))
    for i in range(EVENT_TYPES):
        (paths.registry / "schemas" / f"bench-{i:02d}.input.json").write_text(
            json.dumps(schema(i), indent=2)
        )
    contract_file = paths.registry / "contracts" / "bench.result.v1.json"
    contract_file.write_text(json.dumps(contract(), indent=2))
    (paths.config / "repos.yaml").write_text(repos_yaml(shape))
    (paths.config / "schedule.yaml").write_text(schedule_yaml(shape))
    return paths
