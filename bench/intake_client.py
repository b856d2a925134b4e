"""The fallback load generator of bench/intake.py, used only where wrk is not installed:
CONNECTIONS aiohttp client tasks, each sending the signed delivery in a loop over one
keep-alive connection until SECONDS have passed, then one `BENCH {json}` line in the
shape wrk's Lua script prints. Python on the same cores is a slower client than wrk, so
its figures are lower bounds; the report says which generator ran. Loopback only.

    python bench/intake_client.py URL BODY_FILE SIGNATURE CONNECTIONS SECONDS NONCE
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from intake_load import EVENT, delivery_id

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


async def lane(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: dict[str, str],
    deadline: float,
    out: tuple[list[float], Counter[int], Counter[str]],
    ids: tuple[str, int],
) -> None:
    latencies, statuses, errors = out
    nonce, number = ids
    counter = 0
    while time.perf_counter() < deadline:
        counter += 1
        sent = dict(headers, **{"X-GitHub-Delivery": delivery_id(nonce, number, counter)})
        start = time.perf_counter()
        try:
            async with session.post(url, data=body, headers=sent) as response:
                await response.read()
                statuses[response.status] += 1
        except (aiohttp.ClientError, TimeoutError) as err:
            errors[type(err).__name__] += 1
            continue
        latencies.append(time.perf_counter() - start)


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def run(
    url: str, body: bytes, signature: str, connections: int, seconds: float, nonce: str
) -> dict[str, Any]:
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": EVENT,
        "X-Hub-Signature-256": signature,
    }
    out: tuple[list[float], Counter[int], Counter[str]] = ([], Counter(), Counter())
    connector = aiohttp.TCPConnector(limit=connections)
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = time.perf_counter()
        deadline = start + seconds
        await asyncio.gather(
            *(
                lane(session, url, body, headers, deadline, out, (nonce, i + 1))
                for i in range(connections)
            )
        )
        elapsed = time.perf_counter() - start
    latencies, statuses, errors = out
    ordered = sorted(ms * 1e3 for ms in latencies)
    return {
        "requests": sum(statuses.values()),
        "non_2xx": sum(n for code, n in statuses.items() if not 200 <= code < 300),
        "duration_s": elapsed,
        "p50_ms": percentile(ordered, 0.50),
        "p90_ms": percentile(ordered, 0.90),
        "p99_ms": percentile(ordered, 0.99),
        "max_ms": ordered[-1] if ordered else 0.0,
        "mean_ms": sum(ordered) / len(ordered) if ordered else 0.0,
        "statuses": {str(k): v for k, v in statuses.items()},
        "errors": dict(errors),
    }


def main(argv: list[str]) -> int:
    url, body_file, signature, connections, seconds, nonce = argv
    if urlsplit(url).hostname not in LOOPBACK:
        sys.exit(f"error: {url} is not a loopback address")
    body = Path(body_file).read_bytes()
    result = asyncio.run(run(url, body, signature, int(connections), float(seconds), nonce))
    print("BENCH " + json.dumps(result, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
