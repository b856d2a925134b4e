"""Browser probes decided without a browser (engine.core.browsing,
docs/rules.md#browser-probes): the allowlist matcher, the login markers, the
projection and its fingerprint, and the `kind: browser` entries of
registry/probes.yaml."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsl.diagnostics import Collector
from engine.core.browsing import (
    MAX_CHARS,
    BrowserSpec,
    LoginMarkers,
    Target,
    TargetError,
    allows,
    login_required,
    parse_target,
    parse_url,
    project,
)
from engine.loading import load_probes

# ---- the allowlist ------------------------------------------------------------------------

LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
HOST = st.lists(LABEL, min_size=1, max_size=4).map(".".join)
SEGMENT = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_~", min_size=1)
SEGMENTS = st.lists(SEGMENT.filter(lambda s: s not in (".", "..")), max_size=4)
SCHEME = st.sampled_from(["http", "https"])
PORT = st.one_of(st.none(), st.integers(1, 65535))


def url(scheme: str, host: str, port: int | None, segments: list[str]) -> str:
    at = "" if port is None else f":{port}"
    return f"{scheme}://{host}{at}/" + "/".join(segments)


@given(SCHEME, HOST, PORT, SEGMENTS, SEGMENTS, st.sampled_from(["", "?q=1", "#top", "/"]))
def test_a_url_below_an_allowed_prefix_is_allowed(
    scheme: str, host: str, port: int | None, prefix: list[str], more: list[str], tail: str
) -> None:
    """Appending whole segments (and a query, a fragment or a slash) to an allowed
    prefix stays allowed, whatever the case of the host."""
    allow = (parse_target(url(scheme, host, port, prefix)),)
    assert allows(allow, url(scheme, host.upper(), port, prefix + more) + tail)


@given(SCHEME, HOST, HOST, PORT, SEGMENTS, SEGMENTS)
def test_another_host_is_refused(
    scheme: str, host: str, other: str, port: int | None, prefix: list[str], more: list[str]
) -> None:
    """A URL on any other host is refused, a subdomain and a parent domain included."""
    allow = (parse_target(url(scheme, host, port, prefix)),)
    for elsewhere in {other, f"{other}.{host}", f"{host}.{other}"} - {host}:
        assert not allows(allow, url(scheme, elsewhere, port, prefix + more))


@given(SCHEME, HOST, PORT, SEGMENTS, SEGMENT, SEGMENTS)
def test_a_segment_that_only_starts_like_the_prefix_is_refused(
    scheme: str, host: str, port: int | None, prefix: list[str], extra: str, more: list[str]
) -> None:
    """`/incidents` admits `/incidents/…`, never `/incidentsX/…`: the prefix is matched
    by whole segments."""
    if not prefix:
        prefix = ["incidents"]
    allow = (parse_target(url(scheme, host, port, prefix)),)
    longer = [*prefix[:-1], prefix[-1] + extra, *more]
    assert not allows(allow, url(scheme, host, port, longer))


@given(HOST, SEGMENTS)
def test_another_scheme_or_port_is_refused(host: str, path: list[str]) -> None:
    """Scheme and port are exact: https does not admit http, nor port 443 port 8443; a
    written default port is the same place as none."""
    allow = (parse_target(url("https", host, None, path)),)
    assert not allows(allow, url("http", host, None, path))
    assert not allows(allow, url("https", host, 8443, path))
    assert allows(allow, url("https", host, 443, path))


@pytest.mark.parametrize(
    ("target", "address", "allowed"),
    [
        ("https://status.example.com/incidents", "https://status.example.com/incidents", True),
        ("https://status.example.com/incidents", "https://status.example.com/incidents/12", True),
        ("https://status.example.com/incidents/", "https://status.example.com/incidents", True),
        ("https://status.example.com/incidents", "https://status.example.com/incidentsX", False),
        ("https://status.example.com/incidents", "https://status.example.com/", False),
        ("https://status.example.com", "https://status.example.com/any/where", True),
        ("https://status.example.com/a", "https://status.example.com/a/../admin", False),
        ("https://status.example.com/a", "https://status.example.com/a/%2e%2e/admin", False),
        ("https://status.example.com/a", "https://status.example.com/%61/b", True),
        ("https://status.example.com/a", "https://user@status.example.com/a", False),
        ("https://status.example.com/a", "https://status.example.com\\@evil.com/a", False),
        ("https://status.example.com/a", "wss://status.example.com/a/live", True),
        ("https://status.example.com/a", "ws://status.example.com/a/live", False),
        ("https://status.example.com/a", "data:text/html,hello", False),
        ("http://[::1]:8080/a", "http://[0:0::1]:8080/a", False),
        ("http://[::1]:8080/a", "http://[::1]:8080/a/b", True),
    ],
)
def test_the_allowlist_on_examples(target: str, address: str, allowed: bool) -> None:
    """Dot segments and escaped dots are resolved before matching, escaped unreserved
    characters decoded; user info, a backslash and other schemes are never allowed;
    a WebSocket is matched as its HTTP counterpart."""
    assert allows((parse_target(target),), address) is allowed


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("status.example.com/incidents", "not an http or https URL"),
        ("ftp://status.example.com/", "not an http or https URL"),
        ("https:///incidents", "no valid host"),
        ("https://sta tus.example.com/", "whitespace"),
        ("https://user:pw@status.example.com/", "user name or password"),
        ("https://status.example.com:99999/", "invalid port"),
        ("https://status.example.com:/", "invalid port"),
        ("https://statüs.example.com/", "xn-- form"),
        ("https://status.example.com/a?b=1", "query or fragment"),
        ("https://status.example.com/a#b", "query or fragment"),
        ("https://[::1/", "is not a URL"),
    ],
)
def test_a_bad_allowlist_entry_says_why(entry: str, says: str) -> None:
    with pytest.raises(TargetError, match=says.replace("?", r"\?")):
        parse_target(entry)


def test_a_target_reads_back_in_its_normal_form() -> None:
    """A target prints as scheme, lower-case host, a port only when not the default,
    and its prefix."""
    assert parse_target("HTTPS://Status.Example.COM:443/incidents/") == Target(
        "https", "status.example.com", 443, "/incidents"
    )
    assert str(parse_target("http://example.com:8080/a")) == "http://example.com:8080/a"
    assert parse_url("https://example.com").path == "/"


# ---- login markers ----------------------------------------------------------------------------

MARKERS = LoginMarkers(urls=(r"/login\b", r"^https://sso\."), texts=("Your session has expired",))


@pytest.mark.parametrize(
    ("final_url", "text", "required"),
    [
        ("https://status.example.com/login?next=/", "", True),
        ("https://sso.example.com/authorize", "", True),
        ("https://status.example.com/loginhelp", "", False),
        ("https://status.example.com/", "Sorry,  your SESSION\nhas expired.", True),
        ("https://status.example.com/", "All systems operational", False),
    ],
)
def test_login_markers(final_url: str, text: str, required: bool) -> None:
    """A login URL pattern is searched in the final URL; a login text is found in the
    page's text whatever its case and whitespace."""
    assert login_required(MARKERS, final_url, text) is required


def test_no_markers_never_require_login() -> None:
    assert not login_required(LoginMarkers(), "https://x/login", "Your session has expired")


# ---- the projection ---------------------------------------------------------------------------

SPEC = BrowserSpec("status", "https://s.example.com/", (parse_target("https://s.example.com"),))


def test_the_projection_collapses_whitespace_and_drops_blank_lines() -> None:
    """Runs of spaces and tabs become one space, lines are trimmed, blank lines go; the
    fingerprint is the SHA-256 of what remains."""
    seen = project("  Status:\t\tOK  \n\n\n  Region   eu \n", SPEC)
    assert seen.text == "Status: OK\nRegion eu"
    assert seen.fingerprint == hashlib.sha256(b"Status: OK\nRegion eu").hexdigest()
    assert not seen.truncated


def test_ignore_patterns_are_removed_before_the_fingerprint() -> None:
    """A relative time ignored by a pattern does not change the fingerprint; a line left
    empty by the patterns is dropped."""
    spec = replace(SPEC, ignore_patterns=(r"\d+ minutes? ago", "^Ad:.*"))
    one = project("Operational, updated 1 minute ago\nAd: buy now", spec)
    other = project("Operational, updated 17 minutes ago\nAd: sell", spec)
    assert one == other and one.text == "Operational, updated"
    assert project("Degraded, updated 1 minute ago", spec).fingerprint != one.fingerprint


def test_include_terms_keep_only_the_lines_that_mention_them() -> None:
    """With include terms only the lines naming one count (case and spacing aside), so a
    change elsewhere on the page changes nothing."""
    spec = replace(SPEC, include_terms=("eu-west", "major  OUTAGE"))
    one = project("Header 1\neu-west: operational\nMajor outage in us-east\nFooter", spec)
    other = project("Header 2\neu-west: operational\nMajor outage in us-east\nFooter 2", spec)
    assert one.text == "eu-west: operational\nMajor outage in us-east"
    assert one == other


def test_the_projection_is_cut_at_max_chars() -> None:
    spec = replace(SPEC, max_chars=5)
    seen = project("abcdefgh", spec)
    assert (seen.text, seen.truncated) == ("abcde", True)
    assert project("abcde", spec).truncated is False


# ---- registry/probes.yaml ----------------------------------------------------------------------

GOOD = """\
probes:
  - id: vendor-status
    description: The vendor's incidents page.
    kind: browser
    timeout: 20s
    browser:
      allow: ["https://status.example.com/incidents", "https://cdn.example.com/assets"]
      url: https://status.example.com/incidents
      selector: "main .incidents"
      include_terms: [eu-west]
      ignore_patterns: ["\\\\d+ minutes? ago"]
      max_chars: 5000
      login: {urls: ["/login"], texts: ["Sign in to continue"]}
  - id: ci
    argv: [gh, run, list]
"""


def load(root: Path, text: str) -> tuple[Collector, dict[str, object]]:
    (root / "probes.yaml").write_text(text)
    collector = Collector()
    found = load_probes(root, collector)
    return collector, {p.value.id: p.value for p in found}


def test_a_browser_probe_loads_into_its_spec(tmp_path: Path) -> None:
    """A `kind: browser` entry loads beside a command probe (whose kind is `command` by
    default), and its spec is what the block says, the timeout in seconds."""
    collector, probes = load(tmp_path, GOOD)
    assert collector.items == []
    probe, command = probes["vendor-status"], probes["ci"]
    assert (probe.kind, command.kind) == ("browser", "command")  # type: ignore[attr-defined]
    assert probe.browser_spec == BrowserSpec(  # type: ignore[attr-defined]
        probe="vendor-status",
        url="https://status.example.com/incidents",
        allow=(
            Target("https", "status.example.com", 443, "/incidents"),
            Target("https", "cdn.example.com", 443, "/assets"),
        ),
        selector="main .incidents",
        include_terms=("eu-west",),
        ignore_patterns=(r"\d+ minutes? ago",),
        max_chars=5000,
        timeout_seconds=20,
        login=LoginMarkers(("/login",), ("Sign in to continue",)),
    )


def test_the_defaults_of_a_browser_block(tmp_path: Path) -> None:
    text = "probes:\n  - id: p\n    kind: browser\n    browser:\n      allow: [https://e.com]\n"
    _, probes = load(tmp_path, text + "      url: https://e.com/\n")
    spec = probes["p"].browser_spec  # type: ignore[attr-defined]
    assert (spec.selector, spec.max_chars, spec.timeout_seconds) == ("body", MAX_CHARS, 30)


BLOCK = "probes:\n  - id: p\n    kind: browser\n    browser:\n"
SITE = "      allow: [https://e.com]\n      url: https://e.com/\n"


@pytest.mark.parametrize(
    ("entry", "line", "column", "code", "says"),
    [
        ("      allow: [https://e.com/a]\n      url: https://e.com/b\n", 6, 7, "E0910", "outside"),
        ("      allow: [https://e.com]\n      url: https://f.com/\n", 6, 7, "E0910", "outside"),
        ("      allow: [e.com/a]\n      url: https://e.com/a\n", 5, 7, "E0902", "not an http"),
        ("      allow: [https:///a]\n      url: https://e.com/a\n", 5, 7, "E0902", "no valid"),
        ("      allow: [https://e.com]\n      url: file:///etc\n", 6, 7, "E0902", "not an http"),
        ("      allow: []\n      url: https://e.com/\n", 5, 7, "E0902", "at least 1"),
        (
            SITE + "      ignore_patterns: ['(']\n",
            7,
            7,
            "E0902",
            "is not a regex",
        ),
        (
            SITE + "      login: {urls: ['[']}\n",
            7,
            15,
            "E0902",
            "is not a regex",
        ),
        (
            SITE + "      max_chars: 200001\n",
            7,
            7,
            "E0902",
            "less than or equal to 200000",
        ),
        (
            SITE + "      include_terms: [' ']\n",
            7,
            7,
            "E0902",
            "not blank",
        ),
    ],
)
def test_a_bad_browser_block_is_a_located_error(
    tmp_path: Path, entry: str, line: int, column: int, code: str, says: str
) -> None:
    """Each bad browser block is one load error at the key of the value that is wrong:
    a url off its own allowlist is E0910, any other bad value E0902; nothing loads."""
    collector, probes = load(tmp_path, BLOCK + entry)
    assert probes == {}
    ((span, got, message),) = [(d.span, d.code, d.message) for d in collector.items]
    assert (span.line, span.column, got) == (line, column, code)
    assert says in message


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("  - id: p\n    kind: browser\n", "needs a `browser:` block"),
        ("  - id: p\n    browser: {allow: [https://e.com], url: https://e.com/}\n", "belongs to"),
        ("  - id: p\n    kind: command\n", "needs an argv template"),
        (
            "  - id: p\n    kind: browser\n    argv: [a]\n"
            "    browser: {allow: [https://e.com], url: https://e.com/}\n",
            "argv belong to command probes",
        ),
        ("  - id: p\n    kind: chrome\n    argv: [a]\n", "'command' or 'browser'"),
    ],
)
def test_kind_and_fields_must_agree(tmp_path: Path, entry: str, says: str) -> None:
    """A browser probe has a browser block and no argv; a command probe the reverse."""
    collector, probes = load(tmp_path, "probes:\n" + entry)
    assert probes == {}
    ((code, message),) = [(d.code, d.message) for d in collector.items]
    assert code == "E0902" and says in message
