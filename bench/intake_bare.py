"""The floor of bench/intake.py: the engine's stack (aiohttp on this interpreter) with
nothing of the engine in it. `POST /github` reads the body and answers a small JSON
object; no verification, parsing or storage. No access log.

    python bench/intake_bare.py PORT      (serves on 127.0.0.1:PORT until SIGTERM/SIGINT)
"""

from __future__ import annotations

import sys

from aiohttp import web


async def github(request: web.Request) -> web.Response:
    body = await request.read()
    return web.json_response({"received": len(body)}, status=202)


def main(argv: list[str]) -> int:
    app = web.Application()
    app.router.add_post("/github", github)
    web.run_app(app, host="127.0.0.1", port=int(argv[0]), access_log=None, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
