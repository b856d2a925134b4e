"""`GET /metrics` of a real `engine serve` (docs/observability.md#metrics): an exposition
`promtool check metrics` finds no problem in, with the build info, each loop's last
and next slot, the run histograms, counters ending in `_total`, and HTTP requests
counted by route template, never by raw path."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
from typing import Any

import pytest
from conftest import API_TREE, OPERATOR_TOKENS, SCHEDULING_TREE
from prometheus_client.parser import text_string_to_metric_families

from engine.api.wire import version
from engine.service.metrics import histogram

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
ALICE = OPERATOR_TOKENS["alice"]
ENV = {"ENGINE_OPERATOR_TOKEN": f"alice:{ALICE}"}


def promtool() -> str:
    """promtool's path; in CI it must be installed (Debian's prometheus package)."""
    found = shutil.which("promtool")
    if found is None:
        assert not os.environ.get("CI"), "promtool is required in CI (apt-get install prometheus)"
        pytest.skip("promtool is not installed (Debian's prometheus package)")
    return found


def scraped(url: str) -> str:
    req = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {ALICE}"})
    with _NO_PROXY.open(req, timeout=30) as response:
        assert response.status == 200
        return str(response.read().decode())


def test_a_live_exposition_passes_promtool(serve_factory: Any) -> None:
    """After a few requests (one to /runs/{id} with a raw id), the exposition of a
    serve with enabled hourly loops passes `promtool check metrics` with no output,
    and holds the figures an operator graphs, by their conventional names."""
    checker = promtool()
    serve = serve_factory(SCHEDULING_TREE, ENV)
    for path in ("/runs/run-0000000000000001", "/runs/run-0000000000000002", "/healthz"):
        serve.request("GET", path, token=ALICE)
    text = scraped(serve.url)
    checked = subprocess.run(
        [checker, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", ""), text

    families = {f.name: f for f in text_string_to_metric_families(text)}
    (build,) = families["engine_build_info"].samples
    assert build.labels == {"version": version()} and build.value == 1
    due = {s.labels["loop"] for s in families["engine_loop_next_due_timestamp_seconds"].samples}
    assert {"hourly", "hourly-all"} <= due
    for name in ("engine_run_queue_wait_seconds", "engine_run_duration_seconds"):
        assert families[name].type == "histogram"
    for name in ("engine_decisions", "engine_retries", "engine_http_requests"):
        assert families[name].type == "counter"
        assert all(s.name.endswith(("_total", "_created")) for s in families[name].samples)
    routes = {
        (s.labels["route"], s.labels["status"]): s.value
        for s in families["engine_http_requests"].samples
        if s.name.endswith("_total")
    }
    assert routes[("/runs/{id}", "404")] == 2 and routes[("/healthz", "200")] == 1
    assert not any("run-0000" in route for route, _ in routes)
    durations = families["engine_http_request_duration_seconds"]
    assert durations.type == "histogram"
    assert serve.stop() == 0


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """A family's samples named `name`, by their sorted labels."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == name
    }


def planning_passes(text: str) -> float:
    return samples(text, "engine_planning_duration_seconds_count").get((), 0.0)


def test_intake_and_planning_are_observed_by_the_serve(serve_factory: Any) -> None:
    """An envelope injected: the intake histogram counts its request under its route,
    and the runtime-loop pass that planned it is observed."""
    serve = serve_factory(API_TREE, ENV)
    doc = {
        "eventId": "metrics-1",
        "type": "api.work.requested",
        "source": "manual",
        "occurredAt": "2026-11-30T09:00:00Z",
        "payload": {"repo": "alpha"},
    }
    assert serve.request("POST", "/inject", doc)[0] == 202
    serve.wait_for("/events/metrics-1", lambda a: a["decision"] is not None, ALICE)
    deadline = time.monotonic() + 10
    while planning_passes(text := scraped(serve.url)) < 1:  # the pass records after it ends
        assert time.monotonic() < deadline, text
        time.sleep(0.05)
    assert samples(text, "engine_intake_duration_seconds_count") == {(("route", "/inject"),): 1}
    assert serve.stop() == 0


def test_histogram_buckets_are_cumulative() -> None:
    """Each bucket counts the values at most its bound; +Inf counts all; the sum adds
    them."""
    h = histogram([0.05, 0.1, 2.0, 7200.0, 20000.0], (0.1, 1.0, 3600.0))
    assert h.buckets == (("0.1", 2), ("1", 2), ("3600", 3), ("+Inf", 5))
    assert h.total == pytest.approx(27202.15)


def test_a_negative_duration_counts_as_zero() -> None:
    """A run claimed on a host whose clock is behind the queueing host's has a negative
    wait; it counts in the lowest bucket and adds nothing to the sum."""
    h = histogram([-9.5, 0.5], (0.1, 1.0))
    assert h.buckets == (("0.1", 1), ("1", 2), ("+Inf", 2))
    assert h.total == pytest.approx(0.5)
