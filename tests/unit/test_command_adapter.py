"""The command adapter's pure parts: filling the closed argv template, the environment
allowlist and reading the result line; and the fake adapter's answer."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from engine.adapters import Adapters, AgentAdapter, FakeAdapter, Job
from engine.adapters.command import (
    build_env,
    builtins_for,
    describe_exit,
    judge,
    parse_result,
)
from engine.adapters.fake import answer
from engine.core.argv import ArgumentRefused, build_argv, workspace_path
from engine.core.records import EventRecord, RunRecord
from engine.core.registry import Definition, FakeScript

BUILTINS = {"python": "/usr/bin/python3", "run_id": "run-1", "run_dir": "/r", "event_id": "ev-1"}


def command(**changes: Any) -> Definition:
    data: dict[str, Any] = {
        "id": "tool",
        "version": 1,
        "adapter": "command",
        "argv": ["{python}", "tool.py", "--title={title}", "{name}", "--sha", "{sha}", "{n}"],
        "params": {
            "title": {"from": "payload.title", "type": "text"},
            "name": {"from": "payload.repo.name", "type": "name"},
            "sha": {"from": "payload.sha", "type": "sha"},
            "n": {"from": "payload.n", "type": "int"},
        },
        "output_contract": "factory.command-result/v1",
        "mutating": False,
        "outcomes": ["OK"],
        **changes,
    }
    return Definition.model_validate(data)


def payload(**changes: Any) -> dict[str, Any]:
    return {"title": "Fix it", "repo": {"name": "web"}, "sha": "abc1234", "n": 3, **changes}


def test_template_fills_builtins_and_params() -> None:
    """Builtins and params fill their placeholders; the rest of the template is kept."""
    argv = build_argv(command(), BUILTINS, payload())
    assert argv == ["/usr/bin/python3", "tool.py", "--title=Fix it", "web", "--sha", "abc1234", "3"]


@pytest.mark.parametrize(
    "title",
    [
        "two words",
        "x --force --output=/etc/passwd",
        "a; rm -rf ~",
        "$(touch /tmp/pwned)",
        "`id`",
        "one\ntwo\n--three",
        "{run_id} {python}",
        "quote ' and \" and \\",
    ],
)
def test_a_text_value_stays_one_literal_element(title: str) -> None:
    """A text value lands verbatim inside its one element: no splitting, no expansion,
    no second pass over placeholders it contains."""
    argv = build_argv(command(), BUILTINS, payload(title=title))
    assert argv[2] == f"--title={title}"
    assert len(argv) == 7


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"repo": {"name": "--upload-pack=evil"}}, "may never start with '-'"),
        ({"repo": {"name": "-"}}, "not a valid name"),
        ({"repo": {"name": "a b"}}, "not a valid name"),
        ({"repo": {"name": "web\n"}}, "not a valid name"),
        ({"title": "-x"}, "may never start with '-'"),
        ({"title": "nul\x00byte"}, "not a valid text"),
        ({"sha": "HEAD"}, "not a valid sha"),
        ({"n": "3; ls"}, "not a valid int"),
        ({"n": -1}, "may never start with '-'"),
        ({"n": True}, "is a bool"),
        ({"repo": {}}, "is missing"),
        ({"repo": "web"}, "is missing"),
        ({"title": ["a", "b"]}, "is a list"),
        ({"title": {"a": 1}}, "is a dict"),
    ],
)
def test_a_value_outside_its_type_is_refused(changes: dict[str, Any], why: str) -> None:
    """A missing value, a value of the wrong kind, or one that fails its type's pattern
    (a whole-element value can never start with '-') refuses the whole argv."""
    with pytest.raises(ArgumentRefused) as err:
        build_argv(command(), BUILTINS, payload(**changes))
    assert why in err.value.message


def job(definition: Definition, run_dir: Path) -> Job:
    """The job of run `run-7` handling event `ev-42`."""
    event = EventRecord(
        "ev-42", "a.b", "manual", "", "2026-12-01T09:00:00Z", "ev-42", payload(), None, "", ""
    )
    run = RunRecord(
        "run-7", "event:ev-42", "ev-42", None, None, "tool@1", "started", "", 1, "w1", None, ""
    )
    return Job(run, event, definition, run_dir)


def test_builtins_name_the_interpreter_the_run_its_directory_and_its_event(
    tmp_path: Path,
) -> None:
    """{python}, {run_id}, {run_dir} and {event_id} fill with the engine's interpreter,
    the run's id, its artifact directory and the id of the event it handles."""
    argv = ["{python}", "{run_id}", "--out={run_dir}/out", "{event_id}"]
    definition = command(argv=argv, params={})
    filled = build_argv(definition, builtins_for(job(definition, tmp_path)), {})
    assert filled == [sys.executable, "run-7", f"--out={tmp_path}/out", "ev-42"]


def test_a_workspace_path_fills_like_argv(tmp_path: Path) -> None:
    """A workspace template fills its builtins and params as argv does; without a
    workspace a command runs in its run's directory (no path)."""
    params = {"name": {"from": "payload.repo.name", "type": "name"}}
    template = {"path": "{run_dir}/ws/{name}-{event_id}"}
    spaced = command(argv=["tool"], params=params, workspace=template)
    builtins = builtins_for(job(spaced, tmp_path))
    assert workspace_path(spaced, builtins, payload()) == tmp_path / "ws" / "web-ev-42"
    assert workspace_path(command(), builtins, payload()) is None


def test_a_workspace_value_outside_its_type_is_refused(tmp_path: Path) -> None:
    """A workspace placeholder's value must fit its param type too: nothing runs."""
    params = {"name": {"from": "payload.repo.name", "type": "name"}}
    spaced = command(argv=["tool"], params=params, workspace={"path": "/srv/{name}"})
    with pytest.raises(ArgumentRefused, match="not a valid name"):
        workspace_path(spaced, BUILTINS, payload(repo={"name": "../etc"}))


def test_a_long_refused_value_is_quoted_cut_at_80_characters() -> None:
    """A value that fails its type is quoted in the run's error at most its first 80
    characters, so a huge payload value never floods the run record or the journal."""
    with pytest.raises(ArgumentRefused) as err:
        build_argv(command(), BUILTINS, payload(sha="Q" * 10_000))
    quoted = "Q" * 80
    assert err.value.message == f"param 'sha' (payload.sha) = '{quoted}' is not a valid sha"


def test_environment_is_an_allowlist() -> None:
    """Only the base names and the definition's declared names are copied (when set),
    plus the run's ids."""
    environ = {
        "PATH": "/bin",
        "HOME": "/h",
        "GITHUB_TOKEN": "secret",
        "ENGINE_DB": "/db",
        "AWS_SECRET_ACCESS_KEY": "x",
    }
    env = build_env(command(env=["ENGINE_DB", "UNSET_NAME"]), environ, "run-1", "ev-1")
    assert env == {
        "PATH": "/bin",
        "HOME": "/h",
        "ENGINE_DB": "/db",
        "ENGINE_RUN_ID": "run-1",
        "ENGINE_EVENT_ID": "ev-1",
    }


@pytest.mark.parametrize(
    ("stdout", "result"),
    [
        ('progress\n{"outcome": "OK"}\n', {"outcome": "OK"}),
        ('{"outcome": "OK"}\n\n   \n', {"outcome": "OK"}),
        ('{"outcome": "OK"}\nbye\n', None),
        ('["OK"]\n', None),
        ("", None),
        ("{not json\n", None),
        pytest.param("[" * 100_000 + "\n", None, id="nested-too-deep"),
    ],
)
def test_result_is_the_last_non_empty_stdout_line(
    stdout: str, result: dict[str, Any] | None
) -> None:
    """The result document is the last non-empty stdout line, and only a JSON object."""
    assert parse_result(stdout) == result


def test_a_non_zero_exit_fails_with_the_stderr_tail() -> None:
    """A non-zero exit discards any result and names the exit code and stderr's tail."""
    stderr = "\n".join(f"line {n}" for n in range(100)) + "\nfatal: no such repo\n"
    result, error = judge(2, '{"outcome": "OK"}\n', stderr)
    assert result is None
    assert error is not None
    assert error.startswith("command exited with code 2; stderr tail:")
    assert error.endswith("fatal: no such repo")
    assert "line 50" not in error


def test_no_result_line_fails_naming_it() -> None:
    """A zero exit without a JSON result line is a failure that says so."""
    assert judge(0, "done\n", "") == (
        None,
        "command exited with code 0 but printed no JSON object on its last stdout line; "
        "stderr tail: (empty)",
    )


def test_a_zero_exit_with_a_result_line_succeeds() -> None:
    """A zero exit whose last stdout line is a JSON object is the run's result, no error."""
    assert judge(0, 'working\n{"outcome": "OK"}\n', "a warning\n") == ({"outcome": "OK"}, None)


def test_a_signal_is_named() -> None:
    """A process killed by a signal is described by the signal's name."""
    assert describe_exit(-9) == "was killed by SIGKILL"


def fake_definition(**changes: Any) -> Definition:
    data: dict[str, Any] = {
        "id": "pretend",
        "version": 2,
        "adapter": "fake",
        "fake": {"outcome": "OK", "result": {"summary": "fine", "outcome": "IGNORED"}},
        "output_contract": "factory.command-result/v1",
        "mutating": False,
        "outcomes": ["OK", "BLOCKED"],
        **changes,
    }
    return Definition.model_validate(data)


def test_fake_answers_its_script_with_the_outcome_winning() -> None:
    """The fake answer is the script's result with the script's outcome."""
    assert answer(fake_definition(), {}, {}) == {"summary": "fine", "outcome": "OK"}


def test_fake_payload_override_wins() -> None:
    """A payload `fake` object with an outcome replaces the scripted answer."""
    override = {"fake": {"outcome": "BLOCKED", "result": {"summary": "stuck"}}}
    assert answer(fake_definition(), override, {}) == {"summary": "stuck", "outcome": "BLOCKED"}
    without_outcome = answer(fake_definition(), {"fake": {"result": {}}}, {})
    assert without_outcome is not None and without_outcome["outcome"] == "OK"


def test_fake_scripts_answer_definitions_without_one() -> None:
    """Agent work answered by the fake adapter uses the script given by ref, or none."""
    agent = fake_definition(adapter="agent", fake=None)
    scripts = {"pretend@2": FakeScript(outcome="BLOCKED")}
    assert answer(agent, {}, scripts) == {"outcome": "BLOCKED"}
    assert answer(agent, {}, {}) is None


def test_adapters_can_be_overridden_by_name() -> None:
    """`Adapters(overrides=...)` swaps the adapter for a name and keeps the others."""
    fake = FakeAdapter()
    adapters = Adapters(overrides={"agent": fake})
    assert adapters.get("agent") is fake
    assert isinstance(Adapters().get("agent"), AgentAdapter)
    assert adapters.get("command") is not None
    assert adapters.get("nope") is None
