"""Reading the sinks (engine.notify.config, docs/notifications.md#configuring-sinks):
config/notifications.yaml checked with file:line:col and a code, the environment's
variables checked naming the variable and never its value."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dsl.diagnostics import RulesError
from engine.core.delivery import Policy
from engine.errors import ConfigError
from engine.notify import config
from engine.notify.sinks import AppriseSink, LogSink, WebhookSink

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def written(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "config"
    folder.mkdir(exist_ok=True)
    (folder / "notifications.yaml").write_text(textwrap.dedent(text))
    return folder


def problems(folder: Path) -> list[tuple[int, int, str, str]]:
    with pytest.raises(RulesError) as refused:
        config.check_file(folder)
    return [(d.span.line, d.span.column, d.code, d.message) for d in refused.value.diagnostics]


def test_sinks_come_from_the_environment_then_the_file(tmp_path: Path) -> None:
    """The environment's sinks (url-N, webhook, log) come first, then the file's by
    name, each of its variables read; the file's policy holds; a relative log path is
    under the instance directory."""
    folder = written(
        tmp_path,
        """\
        delivery:
          attempts: 4
          backoff: 1m
          max_backoff: 2h
        sinks:
          team-chat:
            url_env: TEAM_CHAT_URL
          receiver:
            webhook_env: RECEIVER_URL
            secret_env: RECEIVER_SECRET
          topic:
            url: ntfy://ntfy.example.org/engine-alerts
          archive:
            log: var/notify.jsonl
        """,
    )
    environ = {
        "ENGINE_NOTIFY_URLS": "json://127.0.0.1:8080/a form://127.0.0.1:8080/b",
        "ENGINE_NOTIFY_WEBHOOK": "https://hooks.example.org/in/T0KEN",
        "TEAM_CHAT_URL": "json://bot:pw@chat.example.org/hook",
        "RECEIVER_URL": "https://receiver.example.org/engine",
        "RECEIVER_SECRET": SECRET,
    }
    found = config.load(folder, environ)
    assert found.names == ("url-1", "url-2", "webhook", "team-chat", "receiver", "topic", "archive")
    assert found.policy == Policy(4, 60, 7200)
    kinds = {s.name: type(s) for s in found.sinks}
    assert kinds["team-chat"] is AppriseSink and kinds["receiver"] is WebhookSink
    archive = found.sinks[-1]
    assert isinstance(archive, LogSink) and archive.path == tmp_path / "var" / "notify.jsonl"
    shown = {d["name"]: d["target"] for d in found.describe()}
    assert shown["webhook"] == "https://hooks.example.org/****"
    assert shown["team-chat"] == "json://bot:****@chat.example.org/hook"
    assert "T0KEN" not in str(found.describe()) and ":pw@" not in str(found.describe())


def test_no_file_and_no_variable_is_no_sink(tmp_path: Path) -> None:
    """Without the file and the variables, nothing is delivered: no sink, the default
    policy."""
    found = config.load(tmp_path, {})
    assert (found.sinks, found.policy) == ((), Policy())


def test_every_mistake_of_the_file_is_reported_at_its_place(tmp_path: Path) -> None:
    """Unknown fields, a bad duration, two targets, a URL holding a secret, a scheme
    Apprise does not know, a bad or reserved name, a secret for no webhook: each with
    its line and column (the field's, where one field is wrong)."""
    folder = written(
        tmp_path,
        """\
        delivery:
          backof: 30s
          max_backoff: soon
        sinks:
          two:
            url: json://127.0.0.1/x
            log: var/n.jsonl
          leaky:
            url: json://bot:hunter2@chat.example.org/hook
          typo:
            url: slak://T1/B2/C3
          Bad Name:
            log: x
          webhook:
            log: x
          loose:
            log: x
            secret_env: X
        """,
    )
    found = problems(folder)
    assert [(line, col) for line, col, _, _ in found] == [
        (2, 3), (3, 3), (5, 3), (9, 5), (11, 5), (12, 3), (14, 3), (16, 3),
    ]  # fmt: skip
    assert {code for _, _, code, _ in found} == {"E0902"}
    messages = [m for _, _, _, m in found]
    assert messages[0] == "backof: unknown field 'backof'"
    assert "is not a duration" in messages[1]
    assert "exactly one of" in messages[2] and "url and log" in messages[2]
    assert "holds a secret" in messages[3] and "url_env" in messages[3]
    assert "hunter2" not in " ".join(messages)
    assert "scheme 'slak'" in messages[4]
    assert "must be lower-case" in messages[5]
    assert "from the environment" in messages[6]
    assert "secret_env signs a webhook" in messages[7]


def test_a_file_of_another_shape_is_refused(tmp_path: Path) -> None:
    """A top-level key the file does not hold is refused at its place."""
    folder = written(tmp_path, "sink:\n  a:\n    log: x\n")
    ((line, col, code, message),) = problems(folder)
    assert (line, col, code) == (1, 1, "E0902")
    assert "unknown top-level key 'sink'" in message


@pytest.mark.parametrize(
    ("environ", "said", "never"),
    [
        (
            {"ENGINE_NOTIFY_URLS": "json://127.0.0.1/a, slak://xoxb-T0KEN@team"},
            "ENGINE_NOTIFY_URLS: entry 2: not a URL Apprise can use (scheme 'slak'",
            "T0KEN",
        ),
        (
            {"ENGINE_NOTIFY_WEBHOOK_SECRET": SECRET},
            "ENGINE_NOTIFY_WEBHOOK_SECRET is set but ENGINE_NOTIFY_WEBHOOK is not",
            SECRET,
        ),
        (
            {"ENGINE_NOTIFY_WEBHOOK": "ftp://files.example.org/T0KEN"},
            "ENGINE_NOTIFY_WEBHOOK: not an http(s) URL",
            "T0KEN",
        ),
        (
            {
                "ENGINE_NOTIFY_WEBHOOK": "https://h.example.org/",
                "ENGINE_NOTIFY_WEBHOOK_SECRET": "s3cr3t",
            },
            "the webhook secret of sink 'webhook' must start with 'whsec_'",
            "s3cr3t",
        ),
    ],
)
def test_a_variable_that_cannot_be_used_is_named_never_echoed(
    tmp_path: Path, environ: dict[str, str], said: str, never: str
) -> None:
    """A bad variable is a configuration error (exit 2) that names it and what is
    wrong, without its value."""
    with pytest.raises(ConfigError) as refused:
        config.load(tmp_path, environ)
    assert said in refused.value.message and never not in refused.value.message
    assert refused.value.exit_code == 2


def test_a_variable_the_file_names_must_be_set(tmp_path: Path) -> None:
    """A sink whose url_env names an unset variable stops serve, naming the file's
    line, the sink and the variable."""
    folder = written(tmp_path, "sinks:\n  chat:\n    url_env: CHAT_URL\n")
    with pytest.raises(ConfigError) as refused:
        config.load(folder, {})
    assert refused.value.message.endswith(
        "notifications.yaml:2: sink 'chat': url_env names CHAT_URL, which is not set"
    )


def test_a_log_sink_that_is_a_directory_stops_the_runtime(tmp_path: Path) -> None:
    """ENGINE_NOTIFY_LOG, or a file's `log:`, naming a directory could never be
    appended to: a configuration error at start (exit 2) naming it, not a sink that
    fails every delivery."""
    with pytest.raises(ConfigError) as refused:
        config.load(tmp_path, {"ENGINE_NOTIFY_LOG": str(tmp_path)})
    assert (
        refused.value.message
        == f"ENGINE_NOTIFY_LOG: {tmp_path} is a directory, not a file to append to"
    )
    assert refused.value.exit_code == 2
    (tmp_path / "c").mkdir()
    folder = written(tmp_path / "c", "sinks:\n  file:\n    log: /\n")
    with pytest.raises(ConfigError) as refused:
        config.load(folder, {})
    assert "sink 'file': / is a directory" in refused.value.message
