"""A bounded schemathesis run against a real `engine serve` subprocess (tests/data/api,
a real SQLite file holding proposals and runs, an operator token configured): for every
operation of the document it serves, requests generated from the document, with a fixed
seed and a few examples each, get no 5xx and no answer outside the document (status,
content type and body as documented)."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from conftest import Serve
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

EXAMPLES = 12  # per operation: the run stays well under a minute
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def envelope(n: int, type: str) -> dict[str, Any]:
    return {
        "eventId": f"schemathesis-{n}",
        "type": type,
        "source": "manual",
        "occurredAt": "2026-11-30T09:00:00Z",
        "payload": {"repo": "alpha"},
    }


@pytest.fixture(scope="module")
def busy_serve(api_serve: Serve) -> Serve:
    """The serve with proposals, an approved one's runs and a chained event, so lists
    answer records the document must describe."""
    token = api_serve.token("alice")
    batch = [envelope(n, t) for n, t in enumerate(["api.work.requested", "api.ship.requested"])]
    assert api_serve.request("POST", "/inject", batch)[0] == 202
    found = api_serve.wait_for("/proposals", lambda a: len(a["proposals"]) >= 2, token)
    first = found["proposals"][0]["proposalId"]
    assert api_serve.request("POST", f"/proposals/{first}/approve", {}, token=token)[0] == 200
    api_serve.wait_for("/runs", lambda a: len(a["runs"]) >= 1, token)
    return api_serve


def test_no_request_the_document_allows_gets_a_5xx_or_an_undocumented_answer(
    busy_serve: Serve,
) -> None:
    """Every operation, a fixed seed, EXAMPLES examples each: every answer is one the
    document describes, and none is a server error."""
    status, doc = busy_serve.request("GET", "/openapi.json")
    assert status == 200
    schema = schemathesis.openapi.from_dict(doc)
    auth = {"Authorization": f"Bearer {busy_serve.token('alice')}"}
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == sum(len(ops) for ops in doc["paths"].values())
    for operation in operations:

        @settings(
            max_examples=EXAMPLES,
            derandomize=True,  # the fixed seed: the same requests on every run
            database=None,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            response = case.call(base_url=busy_serve.url, headers=auth, timeout=30)
            case.validate_response(response, checks=CHECKS)

        try:
            check()
        except Exception as err:  # collected, so one run reports every operation
            failures.append(f"{operation.method.upper()} {operation.path}: {err}")
    assert not failures, "\n\n".join(failures)
