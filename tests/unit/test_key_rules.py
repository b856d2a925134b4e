"""A loop's semantic key in the rules (`key "TEMPLATE"`, docs/rules.md#semantic-keys-key):
what compiles, what the compiler fills, and each way it fails to load, with its
file:line:col, the two loops' key templates that can claim one key (E0405) first."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dsl.diagnostics import RulesError
from dsl.format import format_text
from dsl.parser import parse
from engine.core.loop_explain import explain_loop
from engine.core.ruleset import RuleSet
from engine.loading import Paths, load_rules

DATA = Path(__file__).resolve().parents[1] / "data" / "existing"
ROUTES = """
route ex.repair to look@1
route ex.scan to look@1
route ex.review to look@1
"""
TWO_REPOS = """repos:
  r1: {github: example/r1, base: main}
  r2: {github: example/r2, base: main}
"""


def tree(root: Path, rules: str, repos: str | None = TWO_REPOS) -> Paths:
    """The existing-work tree's registry, `rules` (with the routes) and `repos` as
    config/repos.yaml (None: no repository configured, as in CI)."""
    shutil.copytree(DATA / "registry", root / "registry")
    (root / "loops").mkdir()
    (root / "loops" / "t.rules").write_text(rules + ROUTES)
    (root / "config").mkdir()
    if repos is not None:
        (root / "config" / "repos.yaml").write_text(repos)
    return Paths(root / "loops", root / "registry", root / "config")


def loaded(root: Path, rules: str, repos: str | None = TWO_REPOS) -> RuleSet:
    return load_rules(tree(root, rules, repos))


def diagnostics(root: Path, rules: str, repos: str | None = TWO_REPOS) -> list[str]:
    """Each error as `file:line:col CODE message`."""
    with pytest.raises(RulesError) as caught:
        load_rules(tree(root, rules, repos))
    return [
        f"{Path(d.span.file).name}:{d.span.line}:{d.span.column} {d.code} {d.message}"
        for d in caught.value.diagnostics
    ]


def loop(name: str, key: str, emit: str = "ex.scan", extra: str = "") -> str:
    return f"""
loop {name}
  every 1h
  key {key}
  emit {emit} {{ repo: "r1" }}
{extra}"""


# ---- what compiles -----------------------------------------------------------------------


def test_a_for_blocks_placeholders_are_filled_and_payloads_are_left(tmp_path: Path) -> None:
    rules = loaded(
        tmp_path,
        """
for repo in repos
  loop repair-{repo.name}
    every 1h
    key "repair:{repo.name}@{payload.branch}"
    emit ex.repair { repo: repo.name }
"""
        + loop("scan", '"scan:r1"'),
    )
    r1, r2, scan = (rules.loops[n].key for n in ("repair-r1", "repair-r2", "scan"))
    assert r1 is not None and r2 is not None and scan is not None
    assert (str(r1), str(r2)) == ("repair:r1@{payload.branch}", "repair:r2@{payload.branch}")
    assert scan.pattern.concrete == "scan:r1"
    assert (scan.origin.line, scan.origin.column) == (10, 7)  # the quoted template
    assert rules.loops["scan"].key is not None
    assert rules.loops["repair-r1"].key != rules.loops["repair-r2"].key


def test_a_loop_without_a_key_has_none(tmp_path: Path) -> None:
    rules = loaded(tmp_path, 'loop plain\n  every 1h\n  emit ex.scan { repo: "r1" }\n')
    assert rules.loops["plain"].key is None


def test_the_formatter_keeps_a_key_line_as_it_is() -> None:
    text = 'loop scan\n  every 1h\n  key   "pr:{payload.repo}#{payload.n}"\n  emit ex.scan\n'
    formatted = format_text(text, "t.rules").text
    assert '  key "pr:{payload.repo}#{payload.n}"\n' in formatted
    assert format_text(formatted, "t.rules").text == formatted
    (decl,) = parse(formatted, "t.rules").decls
    assert [(s.key, s.args[0].value) for s in decl.settings if s.key == "key"] == [  # type: ignore[union-attr]
        ("key", "pr:{payload.repo}#{payload.n}")
    ]


# ---- two loops on one key: E0405 ----------------------------------------------------------


def test_two_loops_with_one_key_do_not_load(tmp_path: Path) -> None:
    """The second loop is reported at its key, naming the first and where its key is."""
    rules = loop("scan", '"scan:r1"') + loop("scan-again", '"scan:r1"')
    assert diagnostics(tmp_path, rules) == [
        "t.rules:9:7 E0405 loop 'scan-again' can claim the same semantic key as loop 'scan'"
        " (key \"scan:r1\" at loops/t.rules:4:7): both claim 'scan:r1'"
    ]


def test_a_placeholder_can_be_any_text_so_a_template_meets_a_key(tmp_path: Path) -> None:
    rules = loop("any-pr", '"pr:{payload.repo}#{payload.pr}"') + loop("one-pr", '"pr:r1#7"')
    assert diagnostics(tmp_path, rules) == [
        "t.rules:9:7 E0405 loop 'one-pr' can claim the same semantic key as loop 'any-pr'"
        " (key \"pr:{…}#{…}\" at loops/t.rules:4:7): both claim 'pr:r1#7'"
    ]


def test_two_templates_meet_where_their_texts_can(tmp_path: Path) -> None:
    rules = loop("by-repo", '"pr:{payload.repo}#7"') + loop("by-number", '"pr:r1#{payload.n}"')
    (only,) = diagnostics(tmp_path, rules)
    assert only.startswith("t.rules:9:7 E0405 loop 'by-number'") and "'pr:r1#7'" in only


def test_keys_that_can_never_meet_load(tmp_path: Path) -> None:
    """Different texts, and a placeholder that is never empty: "pr:{x}" never claims
    "pr:"; each expansion of a for block takes its own repository's key."""
    rules = loaded(
        tmp_path,
        loop("a", '"pr:{payload.repo}#{payload.n}"')
        + loop("b", '"review:{payload.repo}"')
        + loop("c", '"pr:"')
        + """
for repo in repos
  loop repair-{repo.name}
    every 1h
    key "repair:{repo.name}"
    emit ex.repair { repo: repo.name }
""",
    )
    assert {n for n, lp in rules.loops.items() if lp.key is not None} == {
        "a",
        "b",
        "c",
        "repair-r1",
        "repair-r2",
    }


def test_expansions_of_one_template_collide_when_they_fill_it_alike(tmp_path: Path) -> None:
    """`{repo.base}` is `main` for both repositories: one key for two loops."""
    rules = """
for repo in repos
  loop repair-{repo.name}
    every 1h
    key "repair:{repo.base}"
    emit ex.repair { repo: repo.name }
"""
    assert diagnostics(tmp_path, rules) == [
        "t.rules:5:9 E0405 loop 'repair-r2' can claim the same semantic key as loop"
        " 'repair-r1' (key \"repair:main\" at loops/t.rules:5:9): both claim 'repair:main'"
    ]


def test_with_no_repository_a_for_blocks_keys_are_checked_as_templates(tmp_path: Path) -> None:
    """In CI (no config/repos.yaml) a for block expands to nothing: its variable's
    placeholders are left open, so two of its loops on one template, or a template and
    a key it could fill, do not load there either."""
    rules = """
for repo in repos
  loop repair-{repo.name}
    every 1h
    key "repair:{repo.name}"
    emit ex.repair { repo: repo.name }

  loop fix-{repo.name}
    every 1h
    key "repair:{repo.name}"
    emit ex.repair { repo: repo.name }
""" + loop("repair-r9", '"repair:r9"')
    assert diagnostics(tmp_path, rules, repos=None) == [
        "t.rules:10:9 E0405 loop 'fix-{repo.name}' can claim the same semantic key as loop"
        " 'repair-{repo.name}' (key \"repair:{…}\" at loops/t.rules:5:9): both claim 'repair:x'",
        "t.rules:15:7 E0405 loop 'repair-r9' can claim the same semantic key as loop"
        " 'repair-{repo.name}' (key \"repair:{…}\" at loops/t.rules:5:9): both claim 'repair:r9'",
    ]


# ---- a key that does not compile ------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "error"),
    [
        ("scan", "t.rules:4:7 E0105 'key' takes a quoted template"),
        ('"  "', "t.rules:4:7 E0105 a key is not empty"),
        ('"a" "b"', "t.rules:4:11 E0105 'key' takes \"TEMPLATE\""),
        ('"{loop.name}"', "t.rules:4:8 E0601 unknown name 'loop' in a loop key"),
        (
            '"pr:{payload.repo"',
            "t.rules:4:11 E0602 unclosed '{' in string template (write '{{' for a brace)",
        ),
        ('"' + "k" * 201 + '"', "t.rules:4:7 E0105 the key is 201 characters; at most 200"),
    ],
)
def test_a_bad_key_is_located(tmp_path: Path, key: str, error: str) -> None:
    assert diagnostics(tmp_path, loop("scan", key)) == [error]


def test_a_for_blocks_key_reads_only_its_variable_and_the_payload(tmp_path: Path) -> None:
    rules = """
for repo in repos
  loop repair-{repo.name}
    every 1h
    key "repair:{repo.nope}"
    emit ex.repair { repo: repo.name }
"""
    assert diagnostics(tmp_path, rules) == [
        "t.rules:5:17 E0607 'repo' has no field 'nope'",
    ]


def test_a_work_bound_shape_takes_no_key(tmp_path: Path) -> None:
    """An instance works on its work item's key."""
    shapes = Path(__file__).resolve().parents[1] / "data" / "shapes" / "registry"
    paths = tree(tmp_path, "")
    shutil.copy(shapes / "controllers.yaml", paths.registry / "controllers.yaml")
    (paths.rules / "t.rules").write_text(
        """
loop nudge
  work continuation controller coder
  every 1h
  key "repair:r1"
  emit ex.scan { repo: "r1" }
  cooldown 30m
  backoff base 5m max 2h
  budget daily_runs 12
"""
        + ROUTES
    )
    with pytest.raises(RulesError) as caught:
        load_rules(paths)
    assert [(d.span.line, d.span.column, d.code) for d in caught.value.diagnostics] == [
        (5, 7, "E0105")
    ]
    message = caught.value.diagnostics[0].message
    assert "an instance works on its work item's semantic key" in message


# ---- triage reads `existing` ---------------------------------------------------------------


def test_triage_reads_what_the_checks_found_two_levels_deep(tmp_path: Path) -> None:
    triage = """  triage
    nothing_to_do if existing.work and existing.work.lease_live note "a controller has it"
    run_readonly_check if existing.failed_attempt.failure_class == "implementation_failure"
    nothing_to_do if existing.key == "scan:r1" and existing.job.status == "under_review"
"""
    rules = loaded(tmp_path, loop("scan", '"scan:r1"', extra=triage))
    assert [r.reads_existing for r in rules.loops["scan"].triage] == [True, True, True]


@pytest.mark.parametrize(
    ("guard", "error"),
    [
        ("existing.work.owner", "t.rules:7:22 E0601 'existing.work' has no field 'owner' in a"),
        ("existing.key.text", "t.rules:7:22 E0601 'existing.key' has no fields in a"),
        ("existing.job.run.id", "t.rules:7:22 E0601 'existing.job.run' has no fields in a"),
        ("existing.jobs", "t.rules:7:22 E0601 'existing' has no field 'jobs' in a"),
    ],
)
def test_a_field_existing_does_not_have_is_located(tmp_path: Path, guard: str, error: str) -> None:
    triage = f"  triage\n    nothing_to_do if {guard}\n"
    assert diagnostics(tmp_path, loop("scan", '"scan:r1"', extra=triage)) == [
        error + " triage rule"
    ]


def test_a_loop_without_a_key_cannot_read_existing(tmp_path: Path) -> None:
    rules = 'loop plain\n  every 1h\n  emit ex.scan { repo: "r1" }\n  triage\n'
    rules += "    nothing_to_do if existing.work\n"
    assert diagnostics(tmp_path, rules) == [
        "t.rules:5:22 E0601 'existing' is read by a loop without a key: nothing is checked"
    ]


def test_explain_shows_a_loops_key_where_it_is_written(tmp_path: Path) -> None:
    rules = loaded(tmp_path, loop("scan", '"scan:{payload.repo}"'))
    (row,) = [r for r in explain_loop(rules, "scan") if r.setting == "key"]
    assert (row.value, row.source) == ('"scan:{payload.repo}"', "loops/t.rules:4")
    plain = loaded(tmp_path / "p", 'loop plain\n  every 1h\n  emit ex.scan { repo: "r1" }\n')
    assert [r for r in explain_loop(plain, "plain") if r.setting == "key"] == []


# ---- the examples of docs/rules.md ---------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def section_blocks(title: str) -> list[str]:
    """The ```rules blocks of one section of docs/rules.md."""
    text = DOCS.read_text(encoding="utf-8")
    start = text.index(f"\n### {title}\n")
    end = text.index("\n## ", start + 1)
    body = text[start:end].split("\n### ")[1]
    return [part.split("```", 1)[0] for part in body.split("```rules\n")[1:]]


def test_the_docs_examples_of_keys_load_with_the_shipped_registry(tmp_path: Path) -> None:
    """The examples of docs/rules.md#semantic-keys-key and #existing-work-first compile
    beside the shipped rules (none of which has a key), with two repositories."""
    shipped = Path(__file__).resolve().parents[2]
    shutil.copytree(shipped / "registry", tmp_path / "registry")
    shutil.copytree(shipped / "loops", tmp_path / "loops")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "repos.yaml").write_text(
        "repos:\n  bj29: {github: example/bj29}\n  factory: {github: example/factory}\n"
    )
    blocks = section_blocks("Semantic keys: `key`") + section_blocks("Existing work first")
    assert len(blocks) == 2
    (tmp_path / "loops" / "zz-docs.rules").write_text("\n".join(blocks))
    rules = load_rules(Paths(tmp_path / "loops", tmp_path / "registry", tmp_path / "config"))
    keys = {name: str(loop.key) for name, loop in rules.loops.items() if loop.key is not None}
    assert keys == {
        "repair-bj29": "repair:bj29",
        "repair-factory": "repair:factory",
        "review": "pr:{payload.trigger.payload.repo}#{payload.trigger.payload.prNumbers[0]}",
        "scan": "scan:r1",
    }
    assert [r.reads_existing for r in rules.loops["scan"].triage] == [True, True, True]


def test_the_catalogue_example_of_e0405_prints_what_the_docs_show(tmp_path: Path) -> None:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("\n#### E0405 ")
    section = text[start : text.index("\n### ", start)]
    rules, output = (part.split("```", 1)[0] for part in section.split("```text\n")[1:3])
    golden = Path(__file__).resolve().parents[1] / "data" / "rules" / "invalid"
    case = golden / "e0405_two_loops_one_key"
    for part in ("registry", "config"):
        shutil.copytree(case / part, tmp_path / part)
    (tmp_path / "loops").mkdir()
    shutil.copy(case / "loops" / "routes.rules", tmp_path / "loops" / "routes.rules")
    (tmp_path / "loops" / "example.rules").write_text(rules)
    with pytest.raises(RulesError) as caught:
        load_rules(Paths(tmp_path / "loops", tmp_path / "registry", tmp_path / "config"))
    (only,) = caught.value.diagnostics
    rendered = only.render().replace(str(tmp_path) + "/", "")
    assert rendered == output.rstrip("\n")
