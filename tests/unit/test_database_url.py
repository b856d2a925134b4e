"""A PostgreSQL URL the engine cannot use is a one-line ConfigError that never shows
its password, however malformed the URL, and so is a connection the server refuses
(a restart will not help) while one it cannot make yet is Unavailable; the engine's
connection defaults (keepalives among them) apply only where the URL says nothing."""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from engine.errors import ConfigError, Unavailable
from engine.store.limits import KEEPALIVES_IDLE_S
from engine.store.postgres import _connect_options, redacted, scrubbed
from engine.store.postgres_url import connect_error

# Passwords people write, including characters that URLs and libpq treat specially.
# Each holds a "§", which no message text does, so finding the password in a message
# means it leaked (not that "bas" happens to be part of "database").
_PART = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="*§"),
    min_size=1,
    max_size=12,
)
PASSWORD = st.builds(lambda a, b: f"{a}§{b}", _PART, _PART)
BROKEN = [
    "postgresql://engine:{pw}@[db/engine",  # an IPv6 bracket never closed
    "postgresql://engine:{pw}@db/engine?bogus=1",  # an option libpq does not know
    "postgresql://engine:{pw}@db:port/engine",  # a port that is not a number
    "postgresql://engine:{pw}%zz@db/engine",  # a bad percent escape
    "postgresql://engine@db/engine?password={pw}&nope=1",  # the password as a parameter
]


@settings(max_examples=300, deadline=None)
@given(PASSWORD, st.sampled_from(BROKEN))
@example("0§%80", "postgresql://engine:{pw}@db:port/engine")  # decodes to no UTF-8 text
def test_a_malformed_url_is_one_line_without_its_password(password: str, template: str) -> None:
    """Whatever the password holds, the refusal of a malformed URL names the URL with
    the password replaced, on one line, and the password appears nowhere in it."""
    assume(password not in template)  # a password that is also the user name says nothing
    url = template.format(pw=password)
    try:
        _connect_options(url, redacted(url))
    except ConfigError as err:
        assert password not in err.message
        assert "\n" not in err.message
        assert err.exit_code == 2
    else:  # libpq read it after all (an odd password can make the URL well-formed)
        assert password not in redacted(url)


@settings(max_examples=300, deadline=None)
@given(PASSWORD)
def test_redacted_urls_and_scrubbed_messages_never_hold_the_password(password: str) -> None:
    """A URL with a password, well-formed or not, is shown without it, and so is a
    driver message that quotes the URL or the password itself."""
    url = f"postgresql://engine:{password}@db.internal:5432/engine"
    assume(password not in url.replace(password, ""))
    assert password not in redacted(url)
    message = f'could not parse "{url}" near "{password}"'
    assert password not in scrubbed(message, url)


def test_the_engine_defaults_do_not_override_the_url() -> None:
    """Keepalives and a connect timeout are added unless the URL sets its own."""
    options = _connect_options("postgresql://engine@db/engine", "db")
    assert options["keepalives_idle"] == KEEPALIVES_IDLE_S and options["keepalives"] == 1
    own = _connect_options("postgresql://engine@db/engine?keepalives_idle=5&connect_timeout=2", "x")
    assert "keepalives_idle" not in own and "connect_timeout" not in own


@pytest.mark.parametrize("url", ["postgresql://engine@db/engine?bogus=1"])
def test_an_unknown_option_names_it(url: str) -> None:
    """An option libpq does not know is named in the refusal."""
    with pytest.raises(ConfigError, match="bogus"):
        _connect_options(url, redacted(url))


# ---- a failed connection: a refusal (exit 2) or the server not there yet (exit 1) -----

URL = "postgresql://engine:pw§x@db:5432/engine"
AT = 'connection failed: connection to server at "10.0.0.5", port 5432 failed: '
REFUSED = [
    AT + 'FATAL:  database "engine" does not exist',
    AT + 'FATAL:  role "engine" does not exist',
    AT + 'FATAL:  password authentication failed for user "engine"',
    AT + 'FATAL:  Peer authentication failed for user "engine"',
    AT + 'FATAL:  no pg_hba.conf entry for host "10.0.0.9", user "engine", database "engine"',
    AT + 'FATAL:  permission denied for database "engine"',
    AT + 'FATAL:  role "engine" is not permitted to log in',
    AT + 'FATAL:  database "engine" is not currently accepting connections',
    AT + "fe_sendauth: no password supplied",
    'connection is bad: invalid sslmode value: "bogus"',
    'invalid integer value "x" for connection option "port"',
]
PASSING = [
    AT
    + "Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?",
    AT + "FATAL:  the database system is starting up",
    AT + "FATAL:  the database system is shutting down",
    AT + "FATAL:  sorry, too many clients already",
    AT + "FATAL:  terminating connection due to administrator command",
    "connection timeout expired",
    'connection failed: could not translate host name "db" to address: Temporary failure',
]


@pytest.mark.parametrize("message", REFUSED)
def test_a_refused_connection_is_a_configuration_error(message: str) -> None:
    """A database or role that does not exist, a refused password or login, an option
    libpq cannot use: ConfigError (exit 2, a restart will not help) naming the refusal
    alone, on one line, without the password."""
    err = connect_error(psycopg.OperationalError(message), URL)
    assert isinstance(err, ConfigError) and err.exit_code == 2
    assert "\n" not in err.message and "pw§x" not in err.message
    assert "a restart will not help" in err.message
    assert "connection to server at" not in err.message  # libpq's preamble left out


@pytest.mark.parametrize("message", PASSING)
def test_a_server_not_there_yet_may_pass_on_a_restart(message: str) -> None:
    """A server down, starting, stopping, full or not found yet: Unavailable (exit 1),
    so a supervisor tries again."""
    err = connect_error(psycopg.OperationalError(message), URL)
    assert type(err) is Unavailable and err.exit_code == 1
