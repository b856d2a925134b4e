"""The generic webhook's Standard Webhooks signature and the masking of sinks' secrets
(engine.notify.signing, engine.notify.redact; docs/notifications.md)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook

from engine.core.records import NotificationRecord
from engine.notify import message, signing
from engine.notify.config import secret_parts
from engine.notify.redact import MASK, hidden_parts, scrub, web_url

# The example of the Standard Webhooks specification's reference libraries.
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID, SPEC_TIME = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

NOTE = NotificationRecord(
    3, "2026-12-01T10:00:00.000000Z", "occurrence", "repair", "r1", "failed",
    {"loop": "repair", "runs": ["run-1", "run-2"]}, "implementation_failure (FAILED)",
    "occurrence|repair|r1",
)  # fmt: skip


def test_the_signature_is_the_specifications_example() -> None:
    """Signing the specification's example message gives its signature."""
    key = signing.secret_key(SPEC_SECRET)
    assert signing.sign(key, SPEC_ID, SPEC_TIME, SPEC_BODY) == SPEC_SIGNATURE


@given(body=st.binary(max_size=200), stamp=st.integers(0, 2**33))
def test_the_signature_is_hmac_sha256_of_id_timestamp_and_body(body: bytes, stamp: int) -> None:
    """For any body and time: `v1,` and the base64 HMAC-SHA256 of "id.timestamp.body"
    under the secret's bytes, computed independently here."""
    key = signing.secret_key(SPEC_SECRET)
    mac = hmac.new(key, f"msg_1.{stamp}.".encode() + body, hashlib.sha256).digest()
    assert signing.sign(key, "msg_1", stamp, body) == "v1," + base64.b64encode(mac).decode()


def test_a_receivers_library_verifies_the_headers_the_webhook_sends() -> None:
    """The headers and body of one notification verify with the standardwebhooks
    library, and a body changed on the way does not."""
    now = int(datetime.now(UTC).timestamp())  # the library checks the time is near
    body = message.body(NOTE)
    sent = signing.headers(signing.secret_key(SPEC_SECRET), signing.message_id(NOTE), now, body)
    assert Webhook(SPEC_SECRET).verify(body, sent)["seq"] == 3
    with pytest.raises(Exception, match="signature"):
        Webhook(SPEC_SECRET).verify(body.replace(b"failed", b"passed"), sent)


def test_a_message_id_is_the_same_for_a_notification_and_differs_between_them() -> None:
    """Every attempt at one notification carries one id; another notification (even
    with the same seq, in a database started again) another."""
    again = dataclasses.replace(NOTE, attempts=3, last_error="refused")
    assert signing.message_id(NOTE) == signing.message_id(again)
    other = NotificationRecord(3, "2026-12-02T10:00:00.000000Z", *NOTE_TAIL)
    assert signing.message_id(other) != signing.message_id(NOTE)


NOTE_TAIL = ("occurrence", "repair", "r1", "failed", {}, "m", "occurrence|repair|r1")


@pytest.mark.parametrize(
    ("secret", "why"),
    [
        ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "must start with 'whsec_'"),
        ("whsec_not base64!", "is not base64"),
        ("whsec_c2hvcnQ=", "holds 5 bytes"),
    ],
)
def test_a_secret_that_is_no_whsec_key_is_refused_without_echoing_it(secret: str, why: str) -> None:
    """A secret without the prefix, not base64, or too short is refused, and the
    reason does not quote it."""
    with pytest.raises(signing.BadSecret) as refused:
        signing.secret_key(secret)
    assert why in str(refused.value) and secret.removeprefix("whsec_") not in str(refused.value)


def test_the_json_document_and_the_chat_message() -> None:
    """The webhook's body is the notification's document, compact with sorted keys; a
    chat message has a title naming loop, repository and state and a text with each
    link."""
    assert message.body(NOTE).startswith(b'{"at":"2026-12-01T10:00:00.000000Z","kind":')
    assert message.title(NOTE) == "engine: repair (r1) failed"
    assert message.text(NOTE).splitlines() == [
        "implementation_failure (FAILED)",
        "loop: repair",
        "runs: run-1, run-2",
        "at 2026-12-01T10:00:00.000000Z (notification 3)",
    ]


def test_a_webhook_url_is_shown_without_its_path_query_or_user() -> None:
    """Only scheme, host and port are shown; a token anywhere else is masked."""
    assert web_url("https://u:p@hooks.example.org:8443/in/T0K?k=v") == (
        f"https://hooks.example.org:8443/{MASK}"
    )
    assert web_url("http://[::1]:9000") == "http://[::1]:9000"


def test_the_parts_a_shown_url_hides_are_masked_wherever_quoted() -> None:
    """Each part of the URL that its shown form leaves out is masked in any text, also
    percent-decoded; the parts it shows are kept."""
    url = "json://bot:p%40ssw0rd@127.0.0.1:8080/hooks"
    shown = "json://bot:****@127.0.0.1:8080/hooks"
    hidden = hidden_parts(url, shown)
    assert hidden == {"p%40ssw0rd", "p@ssw0rd"}
    said = scrub("could not log in as bot with p@ssw0rd at 127.0.0.1/hooks", hidden)
    assert said == f"could not log in as bot with {MASK} at 127.0.0.1/hooks"


@settings(deadline=None)  # the first example loads Apprise's plugins (most of a second)
@given(
    password=st.text(
        st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~"),
        min_size=1,
        max_size=24,
    )
)
def test_a_password_never_survives_masking_whatever_it_is(password: str) -> None:
    """For any password of an Apprise URL (even one spelt like its host, user or
    path), a text quoting the URL and the password, masked with what the sink keeps
    secret, holds the password nowhere."""
    url = f"json://bot:{password}@127.0.0.1:8080/hooks"
    hidden = secret_parts(url)
    said = scrub(f"could not reach {url}: the password {password} was refused", hidden | {url})
    assert password not in said
