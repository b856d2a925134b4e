"""GitHub intake, pure: the `webhook github KIND` tables of loops/github.rules over
GitHub's own example deliveries (tests/data/github-payloads, used as they are)
and variants derived from them here; and X-Hub-Signature-256 verification over the
published signature vectors."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from dsl.diagnostics import Span
from dsl.expr import Literal
from dsl.model import Guard, Refusal
from engine.api.settings import Settings, parse_secrets
from engine.core.ruleset import Repo, RuleSet, WebhookTable
from engine.intake.github import (
    Admit,
    Ignored,
    Rejected,
    Translation,
    delivery_problem,
    repo_scope,
    sign,
    translate,
    verify_signature,
)
from engine.loading import Paths, load_rules

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "github-payloads"  # GitHub's own examples, MIT
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DELIVERY = "72d3162e-cc78-11e3-81ab-4c9367dc0958"

# The fixtures' repositories, configured as the short names the payloads carry.
REPOS = {
    "hello-world": Repo("hello-world", "Codertocat/Hello-World", "master", False),
    "octo-repo": Repo("octo-repo", "octo-org/octo-repo", "master", False),
    "octo-docs": Repo("octo-docs", "octo-org/octo-docs", "master", True),
}


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    shipped = load_rules(Paths(ROOT / "loops", ROOT / "registry", ROOT / "tests" / "no-config"))
    return replace(shipped, repos=REPOS)


@cache
def _raw(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def fixture(name: str) -> dict[str, Any]:
    """A fresh copy of a fixture delivery, free to change."""
    data: dict[str, Any] = json.loads(_raw(name))
    return data


def run(rules: RuleSet, kind: str, payload: dict[str, Any]) -> Translation:
    return translate(rules, kind, DELIVERY, payload, NOW)


def green_run(**run: Any) -> dict[str, Any]:
    """The fixture's completed run with one PR, turned into what GitHub sends for a
    successful pull-request workflow: event `pull_request`, the PR's head as the run's."""
    payload = fixture("workflow_run.completed.with-pull-requests.payload.json")
    wr = payload["workflow_run"]
    wr["event"] = "pull_request"
    wr["head_sha"] = wr["pull_requests"][0]["head"]["sha"]
    wr.update(run)
    return payload


def in_repo(payload: dict[str, Any], full_name: str) -> dict[str, Any]:
    payload["repository"]["full_name"] = full_name
    return payload


def ignored(result: Translation) -> str:
    assert isinstance(result, Ignored), result
    return result.reason


def admitted(result: Translation) -> Admit:
    assert isinstance(result, Admit), result
    return result


# ---- pull_request --------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "pull_request.opened.payload.json",
        "pull_request.opened.with-null-body.json",
        "pull_request.opened.with-organization.payload.json",
        "pull_request.synchronize.payload.json",
        "pull_request.ready_for_review.payload.json",
        "pull_request.ready_for_review.with-installation.payload.json",
    ],
)
def test_pull_request_on_the_base_admits_a_merge_request(rules: RuleSet, name: str) -> None:
    """opened / synchronize / ready_for_review on the configured base become
    factory.merge.requested {repo} with the short name as subject and the GUID as id."""
    envelope = admitted(run(rules, "pull_request", fixture(name))).envelope
    assert envelope.model_dump() == {
        "schemaVersion": "factory.event/v1",
        "eventId": DELIVERY,
        "type": "factory.merge.requested",
        "source": "github",
        "subject": "hello-world",
        "occurredAt": NOW,
        "correlationId": DELIVERY,
        "payload": {"repo": "hello-world"},
    }


@pytest.mark.parametrize(
    "action",
    [
        "assigned",
        "closed",
        "converted_to_draft",
        "labeled",
        "locked",
        "reopened",
        "review_request_removed",
        "review_requested",
        "unassigned",
        "unlabeled",
        "unlocked",
    ],
)
def test_other_pull_request_actions_are_unhandled_action(rules: RuleSet, action: str) -> None:
    """Every other pull_request action GitHub sends is ignored as unhandled_action."""
    payload = fixture(f"pull_request.{action}.payload.json")
    assert ignored(run(rules, "pull_request", payload)) == "unhandled_action"


def test_pull_request_on_another_base_is_not_base_branch(rules: RuleSet) -> None:
    """A pull request into a branch other than the configured base is not_base_branch."""
    payload = fixture("pull_request.opened.payload.json")
    payload["pull_request"]["base"]["ref"] = "develop"
    assert ignored(run(rules, "pull_request", payload)) == "not_base_branch"


def test_pull_request_of_an_unconfigured_repo(rules: RuleSet) -> None:
    """A repository with no `github:` match in repos.yaml is unconfigured_repo."""
    payload = in_repo(fixture("pull_request.opened.payload.json"), "someone/elsewhere")
    assert ignored(run(rules, "pull_request", payload)) == "unconfigured_repo"


def test_pull_request_of_a_report_only_repo_never_requests_a_merge(rules: RuleSet) -> None:
    """A report-only repository's pull request is repo_report_only, never a merge."""
    payload = in_repo(fixture("pull_request.synchronize.payload.json"), "octo-org/octo-docs")
    assert ignored(run(rules, "pull_request", payload)) == "repo_report_only"


def test_repository_is_matched_whatever_the_case(rules: RuleSet) -> None:
    """repository.full_name matches a configured `github:` case-insensitively."""
    payload = in_repo(fixture("pull_request.opened.payload.json"), "CODERTOCAT/hello-WORLD")
    assert admitted(run(rules, "pull_request", payload)).envelope.subject == "hello-world"


def test_pull_request_without_its_base_is_malformed(rules: RuleSet) -> None:
    """A delivery lacking a field the table reads is rejected as malformed_payload,
    naming the rule and the missing field."""
    payload = fixture("pull_request.opened.payload.json")
    del payload["pull_request"]["base"]
    result = run(rules, "pull_request", payload)
    assert isinstance(result, Rejected) and result.reason == "malformed_payload"
    [error] = result.errors
    assert error.startswith("loops/github.rules:13:")
    assert error.endswith(": 'pull_request' has no field 'base'")


# ---- workflow_run --------------------------------------------------------------------


def test_green_pull_request_run_admits_a_scoped_merge_request(rules: RuleSet) -> None:
    """A successful pull-request run with one PR on the base becomes
    factory.merge.requested {repo, prNumbers} with id merge-pr:<repo>:<pr>:<headSha>."""
    payload = green_run()
    sha = payload["workflow_run"]["head_sha"]
    envelope = admitted(run(rules, "workflow_run", payload)).envelope
    assert envelope.eventId == f"merge-pr:octo-repo:2:{sha}"
    assert (envelope.type, envelope.subject) == ("factory.merge.requested", "octo-repo")
    assert envelope.payload == {"repo": "octo-repo", "prNumbers": [2]}
    assert envelope.correlationId == DELIVERY and envelope.source == "github"


def test_two_deliveries_of_one_green_run_converge_on_one_id(rules: RuleSet) -> None:
    """Duplicate green notifications (different GUIDs) translate to the same event id."""
    first = admitted(translate(rules, "workflow_run", "guid-1", green_run(), NOW))
    second = admitted(translate(rules, "workflow_run", "guid-2", green_run(), NOW))
    assert first.envelope.eventId == second.envelope.eventId


def test_pull_request_head_other_than_the_runs_head_is_not_admitted(rules: RuleSet) -> None:
    """A run whose pull request head SHA is not the run's head SHA is not_pull_request_head."""
    payload = green_run(head_sha="3484a3fb816e0859fd6e1cea078d76385ff50625")
    assert ignored(run(rules, "workflow_run", payload)) == "not_pull_request_head"


def test_fixture_runs_as_sent_are_not_pull_request_heads(rules: RuleSet) -> None:
    """GitHub's example completed runs (repository_dispatch, with and without a PR) are
    not_pull_request_head."""
    for name in (
        "workflow_run.completed.payload.json",
        "workflow_run.completed.with-pull-requests.payload.json",
    ):
        assert ignored(run(rules, "workflow_run", fixture(name))) == "not_pull_request_head"


def test_empty_pull_requests_as_for_fork_prs_is_not_pull_request_head(rules: RuleSet) -> None:
    """A pull-request run with an empty pull_requests list (a fork PR) is not admitted."""
    payload = green_run(pull_requests=[])
    assert ignored(run(rules, "workflow_run", payload)) == "not_pull_request_head"


def test_more_than_one_pull_request_is_ambiguous(rules: RuleSet) -> None:
    """A green run naming two pull requests is rejected as ambiguous_pull_request_head."""
    payload = green_run()
    other = copy.deepcopy(payload["workflow_run"]["pull_requests"][0])
    other["number"] = 3
    payload["workflow_run"]["pull_requests"].append(other)
    result = run(rules, "workflow_run", payload)
    assert isinstance(result, Rejected) and result.reason == "ambiguous_pull_request_head"


def test_pull_request_into_another_base_is_not_base_branch(rules: RuleSet) -> None:
    """A green run whose one PR targets another branch is not_base_branch."""
    payload = green_run()
    payload["workflow_run"]["pull_requests"][0]["base"]["ref"] = "release"
    assert ignored(run(rules, "workflow_run", payload)) == "not_base_branch"


def test_failed_run_admits_a_ci_failure(rules: RuleSet) -> None:
    """A failed run becomes github.workflow-run.failed, subject ci, payload
    {repo: owner/name, runId}, with the GUID as id."""
    payload = fixture("workflow_run.completed.payload.json")
    payload["workflow_run"]["conclusion"] = "failure"
    envelope = admitted(run(rules, "workflow_run", payload)).envelope
    assert (envelope.eventId, envelope.type) == (DELIVERY, "github.workflow-run.failed")
    assert envelope.subject == "ci"
    run_id = payload["workflow_run"]["id"]
    assert envelope.payload == {"repo": "octo-org/octo-repo", "runId": run_id}


def test_report_only_repo_sends_ci_failures_but_never_merge_requests(rules: RuleSet) -> None:
    """A report-only repo's failed run is admitted; its green PR run is repo_report_only."""
    failed = in_repo(fixture("workflow_run.completed.payload.json"), "octo-org/octo-docs")
    failed["workflow_run"]["conclusion"] = "failure"
    envelope = admitted(run(rules, "workflow_run", failed)).envelope
    assert envelope.payload["repo"] == "octo-org/octo-docs"
    green = in_repo(green_run(), "octo-org/octo-docs")
    assert ignored(run(rules, "workflow_run", green)) == "repo_report_only"


def test_failed_run_of_an_unconfigured_repo(rules: RuleSet) -> None:
    """A failed run of a repository not in repos.yaml is unconfigured_repo."""
    payload = in_repo(fixture("workflow_run.completed.payload.json"), "someone/elsewhere")
    payload["workflow_run"]["conclusion"] = "failure"
    assert ignored(run(rules, "workflow_run", payload)) == "unconfigured_repo"


def test_runs_not_completed_or_neither_green_nor_red_are_unhandled_action(rules: RuleSet) -> None:
    """requested runs (as sent) and completed runs that were cancelled are unhandled_action."""
    cancelled = fixture("workflow_run.completed.payload.json")
    cancelled["workflow_run"]["conclusion"] = "cancelled"
    for payload in (
        fixture("workflow_run.requested.payload.json"),
        fixture("workflow_run.requested.with-conclusion.payload.json"),
        cancelled,
    ):
        assert ignored(run(rules, "workflow_run", payload)) == "unhandled_action"


def test_run_without_workflow_run_is_malformed(rules: RuleSet) -> None:
    """A completed workflow_run delivery without its run object is malformed_payload."""
    payload = fixture("workflow_run.completed.payload.json")
    del payload["workflow_run"]
    result = run(rules, "workflow_run", payload)
    assert isinstance(result, Rejected) and result.reason == "malformed_payload"


def test_bad_delivery_id_on_an_admitted_event_is_malformed(rules: RuleSet) -> None:
    """A delivery id that cannot be an event id rejects the delivery instead of raising."""
    result = translate(
        rules, "pull_request", "not a guid", fixture("pull_request.opened.payload.json"), NOW
    )
    assert isinstance(result, Rejected) and result.reason == "malformed_payload"
    assert any(line.startswith("eventId:") for line in result.errors)


# ---- kinds without a table, and the table machinery ------------------------------------


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("ping", "ping.payload.json"),
        ("ping", "ping.with-organization.payload.json"),
        ("push", "push.payload.json"),
        ("issues", "issues.opened.payload.json"),
        ("check_suite", "check_suite.completed.payload.json"),
        ("", "ping.payload.json"),
    ],
)
def test_kinds_without_a_table_are_unhandled_event(rules: RuleSet, kind: str, name: str) -> None:
    """ping and every other kind with no table (or no X-GitHub-Event) is unhandled_event."""
    assert run(rules, kind, fixture(name)) == Ignored("unhandled_event")


def test_table_where_no_line_matches_is_unhandled_event(rules: RuleSet) -> None:
    """A table whose every line's guard fails ignores the delivery as unhandled_event."""
    at = Span("x.rules", 1, 1)
    never = Refusal("reject", "never", Guard(Literal(True, at), negate=True), at)
    table = WebhookTable("github", "push", (never,), at)
    custom = replace(rules, webhooks={("github", "push"): table})
    assert run(custom, "push", fixture("push.payload.json")) == Ignored("unhandled_event")


def test_the_repo_a_table_reads(rules: RuleSet) -> None:
    """`repo` is the configured repository matched by `repository.full_name`, or for an
    unknown one the stand-in docs/github.md gives: not configured, not report-only."""
    assert repo_scope(rules, {"full_name": "octo-org/OCTO-docs"}) == REPOS["octo-docs"].as_scope()
    assert repo_scope(rules, {"full_name": "someone/elsewhere"}) == {
        "configured": False,
        "name": None,
        "github": "someone/elsewhere",
        "base": None,
        "report_only": False,
    }
    assert repo_scope(rules, {"full_name": 7})["github"] is None


def test_repo_and_delivery_win_over_payload_fields(rules: RuleSet) -> None:
    """A payload field named `repo` cannot stand in for the configured repository."""
    payload = in_repo(fixture("pull_request.opened.payload.json"), "someone/elsewhere")
    payload["repo"] = {"configured": True, "name": "hello-world", "base": "master"}
    assert ignored(run(rules, "pull_request", payload)) == "unconfigured_repo"


# ---- signatures ----------------------------------------------------------------------


def vectors(group: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(_raw("signature-vectors.json"))[group]
    return found


def body_of(vector: dict[str, Any]) -> bytes:
    """The byte-exact body: payload_utf8_hex where given, else the payload as UTF-8."""
    if "payload_utf8_hex" in vector:
        return bytes.fromhex(vector["payload_utf8_hex"])
    return str(vector["payload"]).encode()


@pytest.mark.parametrize("vector", vectors("single_secret"), ids=lambda v: v["id"])
def test_published_signature_vectors(vector: dict[str, Any]) -> None:
    """Every published single-secret vector verifies exactly as expected."""
    secrets = [vector["secret"].encode()]
    assert verify_signature(secrets, body_of(vector), vector["signature"]) is vector["expect_valid"]


@pytest.mark.parametrize("vector", vectors("secret_rotation_fallback"), ids=lambda v: v["id"])
def test_rotation_accepts_any_configured_secret(vector: dict[str, Any]) -> None:
    """With several secrets (rotation) a signature by any one of them verifies."""
    secrets = [s.encode() for s in vector["secrets_in_order"]]
    assert verify_signature(secrets, body_of(vector), vector["signature"]) is vector["expect_valid"]


def test_reserialised_json_fails_the_delivered_signature() -> None:
    """Verifying re-encoded JSON instead of the raw bytes fails (the derived vector)."""
    [vector] = vectors("derived_not_upstream")
    body, secret = body_of(vector), [vector["secret"].encode()]
    assert sign(secret[0], body) == vector["hmac_of_this_payload"]
    assert not verify_signature(secret, body, vector["delivered_signature"])


def test_real_delivery_signed_raw_fails_once_reserialised() -> None:
    """A fixture delivery verifies as sent and fails after a JSON round trip."""
    raw = _raw("pull_request.opened.payload.json")
    header = sign(b"s3cret", raw)
    assert verify_signature([b"s3cret"], raw, header)
    assert not verify_signature([b"s3cret"], json.dumps(json.loads(raw)).encode(), header)
    compact = json.dumps(json.loads(raw), separators=(",", ":")).encode()
    assert not verify_signature([b"s3cret"], compact, header)


def test_no_secret_or_no_header_never_verifies() -> None:
    """Without a configured secret or without the header nothing verifies."""
    assert not verify_signature([], b"data", sign(b"", b"data"))
    assert not verify_signature([b"secret"], b"data", None)
    assert not verify_signature([b"secret"], b"data", "")


@pytest.mark.parametrize(
    "header", ["sha256=é" + "0" * 63, "sha256=" + "\u0663" * 64, "ünïcode", "sha256=\x00"]
)
def test_a_non_ascii_signature_header_fails_verification(header: str) -> None:
    """A signature header with characters outside ASCII is a signature that does not
    verify (a 401), never an error (a 500)."""
    assert verify_signature([b"s3cret"], b"data", header) is False


def test_secrets_are_read_from_the_environment_comma_separated() -> None:
    """ENGINE_GITHUB_WEBHOOK_SECRET holds one or more secrets; blank entries are ignored."""
    assert parse_secrets("new, old,,") == (b"new", b"old")
    env = {"ENGINE_GITHUB_WEBHOOK_SECRET": "new,old"}
    assert Settings.from_env(env).github_secrets == (b"new", b"old")
    assert Settings.from_env({}).github_secrets == ()
    assert "new" not in repr(Settings.from_env(env))


# ---- refusals: commit ids, a missing repository, ids and subjects that are not text -----


@pytest.mark.parametrize("sha", [None, "", "null", "abc123", "g" * 40, "a" * 41, 7, ["a" * 40]])
def test_green_run_whose_head_sha_is_not_a_commit_id_is_refused(rules: RuleSet, sha: Any) -> None:
    """A green pull-request run whose head SHA (and its PR's) is null, empty, short, not
    hex or not a string is 422 malformed_payload, never admitted as merge-pr:…:null."""
    payload = green_run(head_sha=sha)
    payload["workflow_run"]["pull_requests"][0]["head"]["sha"] = sha
    result = run(rules, "workflow_run", payload)
    assert isinstance(result, Rejected) and result.reason == "malformed_payload", result
    assert result.errors[0].startswith("loops/github.rules:")


def test_green_run_whose_pr_head_sha_alone_is_null_is_refused(rules: RuleSet) -> None:
    """A good run head SHA with a null PR head SHA is refused too, not ignored."""
    payload = green_run()
    payload["workflow_run"]["pull_requests"][0]["head"]["sha"] = None
    result = run(rules, "workflow_run", payload)
    assert isinstance(result, Rejected) and result.reason == "malformed_payload"


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("pull_request", "pull_request.opened.payload.json"),
        ("pull_request", "pull_request.synchronize.payload.json"),
        ("workflow_run", "workflow_run.completed.payload.json"),
    ],
)
@pytest.mark.parametrize("repository", ["absent", None, {}, {"full_name": None}, {"full_name": ""}])
def test_delivery_without_a_repository_is_malformed(
    rules: RuleSet, kind: str, name: str, repository: Any
) -> None:
    """A pull_request or workflow_run without `repository` (or its full name) is 422
    malformed_payload, not ignored as unconfigured_repo."""
    payload = fixture(name)
    if repository == "absent":
        del payload["repository"]
    else:
        payload["repository"] = repository
    result = run(rules, kind, payload)
    assert isinstance(result, Rejected) and result.reason == "malformed_payload", result


def table_rules(tmp_path: Path, emit: str) -> RuleSet:
    """The shipped rules with loops/github.rules replaced by one `webhook github
    pull_request` table: the `emit` line."""
    loops = tmp_path / "loops"
    loops.mkdir(exist_ok=True)
    for shipped in (ROOT / "loops").glob("*.rules"):
        (loops / shipped.name).write_bytes(shipped.read_bytes())
    (loops / "github.rules").write_text(f"webhook github pull_request\n  {emit}\n")
    return load_rules(Paths(loops, ROOT / "registry", ROOT / "tests" / "no-config"))


@pytest.mark.parametrize(
    ("emit", "says"),
    [
        ("subject pull_request.user", "'pull_request.user' is an object"),
        ("subject pull_request.locked", "'pull_request.locked' is a boolean"),
        ("subject pull_request.labels", "'pull_request.labels' is a list"),
        ("subject pull_request.milestone", "'pull_request.milestone' is null"),
        ("subject (pull_request.locked == false)", "the value is a boolean"),
        ("id pull_request.locked", "'pull_request.locked' is a boolean"),
        ("id pull_request.head", "'pull_request.head' is an object"),
        ('id "pr-{pull_request.milestone}"', "'pull_request.milestone' is null"),
        ('id "pr-{pull_request.draft}"', "'pull_request.draft' is a boolean"),
    ],
)
def test_object_boolean_or_null_as_subject_or_id_is_refused(
    tmp_path: Path, emit: str, says: str
) -> None:
    """An object, list, boolean or null read as an event's subject or id (or into a
    `{placeholder}` of one) rejects the delivery as malformed_payload, naming the path
    it read (or "the value" for an expression that is not one)."""
    payload = fixture("pull_request.opened.payload.json")
    assert payload["pull_request"]["milestone"] is None
    rules = table_rules(tmp_path, f'emit factory.merge.requested {emit} {{ repo: "x" }}')
    result = run(rules, "pull_request", payload)
    assert isinstance(result, Rejected) and result.reason == "malformed_payload", result
    assert f": {says}; an event id or subject is text or a number" in result.errors[0]


def test_numbers_and_strings_still_make_ids_and_subjects(tmp_path: Path) -> None:
    """A number or a string read as an id or subject is printed into it as before."""
    emit = 'emit factory.merge.requested subject pull_request.title id "pr-{number}" { repo: "x" }'
    payload = fixture("pull_request.opened.payload.json")
    envelope = admitted(run(table_rules(tmp_path, emit), "pull_request", payload)).envelope
    assert envelope.eventId == f"pr-{payload['number']}"
    assert envelope.subject == payload["pull_request"]["title"]


@pytest.mark.parametrize(
    "delivery", ["72d3162e-cc78-11e3-81ab-4c9367dc0958", "replay-0123456789ab", "d-1", "x"]
)
def test_guid_like_delivery_ids_pass(delivery: str) -> None:
    """GitHub's GUIDs and the replay command's ids are accepted."""
    assert delivery_problem(delivery) is None


@pytest.mark.parametrize(
    "delivery", ["-x", "a" * 65, "a b", "a/b", "a:b", "ä", "a\x00", "a.b", "{}", "%"]
)
def test_bad_delivery_ids_have_their_own_reason(delivery: str) -> None:
    """An X-GitHub-Delivery that is not GUID-like (odd characters, too long) is refused
    as bad_delivery_id; an empty one as missing_delivery_id."""
    refused = delivery_problem(delivery)
    assert refused is not None and refused.reason == "bad_delivery_id"
    missing = delivery_problem("")
    assert missing is not None and missing.reason == "missing_delivery_id"
