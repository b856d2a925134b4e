"""The `controller` adapter: a wake launches a work item's controller
(docs/work.md#waking-the-controller).

The controller's argv template (registry/controllers.yaml) is filled with the work's id
and, for `context: file`, the file that holds its context; it runs without a shell,
under the same supervisor, process group and allowlisted environment as a command (see
engine.adapters.command). The work's context reaches it on stdin or in that file. Its
controller token reaches it **only through its environment**, in the variable the entry
names (`token_env`), with ENGINE_URL (where to report back) and ENGINE_WORK_ID: never in
argv (nor the process title), a file, a log line or the journal; command.json beside
the output names the environment's variables, never their values.

The engine does not claim the work for the controller: the controller calls
`POST /work/{id}/continue` with its own token. While it runs, the adapter asks every
second whether that happened (`Wake.claimed`, which reads the store in a thread); a
controller that has not claimed within its launch reservation is stopped and the wake
ends `DID_NOT_CLAIM` (an infrastructure failure of the occurrence). A controller that
exits 0 after claiming ends `WOKEN`; one that exits otherwise fails the run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.adapters.command import (
    STDERR,
    _read_tail,
    _write_command,
    allowed_env,
    describe_exit,
    kill_group,
    spawn_argv,
    stop_group,
    tail,
)
from engine.core.controllers import Controller
from engine.core.instances import DID_NOT_CLAIM, WOKEN
from engine.service.executions import Execution

if TYPE_CHECKING:
    from engine.adapters import Job

STDOUT = "stdout.log"
CONTEXT_FILE = "context.json"
POLL_SECONDS = 1.0
TOKENS_ENV = "ENGINE_CONTROLLER_TOKEN"
URL_ENV = "ENGINE_URL"


@dataclass(frozen=True)
class Wake:
    """What a wake's adapter may use beside the run: the controller entry, the work's
    id and context document, and a way to ask whether the controller claimed it."""

    controller: Controller
    work_id: str
    context: Mapping[str, Any]
    claimed: Callable[[], bool]


def token_of(text: str, name: str) -> str | None:
    """The token `name:token` pairs (ENGINE_CONTROLLER_TOKEN) give `name`; the first."""
    for entry in (e.strip() for e in text.split(",")):
        who, sep, token = entry.partition(":")
        if sep and who == name and token:
            return token
    return None


def fill(argv: tuple[str, ...], work_id: str, context_file: str) -> list[str]:
    """The argv template with `{work_id}` and `{context_file}` filled, each value in the
    element its placeholder sits in (never a new element, never an option)."""
    return [a.replace("{work_id}", work_id).replace("{context_file}", context_file) for a in argv]


class ControllerAdapter:
    """Runs wakes; `environ` is the engine's environment (os.environ by default), the
    allowlist and the controller tokens are read from; `url` is where the controller
    reports back (ENGINE_URL of `environ` when it is set)."""

    def __init__(self, environ: Mapping[str, str] | None = None, url: str | None = None) -> None:
        self.environ = environ
        self.url = url

    async def execute(self, job: Job) -> Execution:
        wake = job.wake
        if wake is None:
            return Execution(result=None, error="a wake without its work; nothing was run")
        environ = os.environ if self.environ is None else self.environ
        controller = wake.controller
        token = token_of(environ.get(TOKENS_ENV, ""), controller.id)
        if token is None:
            why = f"no token for controller:{controller.id} in {TOKENS_ENV}; nothing was run"
            return Execution(result=None, error=why)
        context = json.dumps(wake.context, separators=(",", ":"), sort_keys=True).encode()
        context_path = job.run_dir / CONTEXT_FILE
        if controller.context == "file":
            context_path.write_bytes(context)
        argv = fill(controller.argv, wake.work_id, str(context_path))
        env = allowed_env(controller.env, environ)
        env.update(
            ENGINE_RUN_ID=job.run.run_id,
            ENGINE_WORK_ID=wake.work_id,
            ENGINE_URL=environ.get(URL_ENV) or self.url or "",
        )
        env[controller.token_env] = token
        _write_command(job.run_dir, argv, env)
        stdin = context if controller.context == "stdin" else None
        try:
            return await self._run(job.run_dir, argv, env, stdin, wake)
        except OSError as err:
            return Execution(result=None, error=f"cannot start {argv[0]!r}: {err}")

    async def _run(
        self, run_dir: Path, argv: list[str], env: dict[str, str], stdin: bytes | None, wake: Wake
    ) -> Execution:
        controller = wake.controller
        stdout, stderr = run_dir / STDOUT, run_dir / STDERR
        started = time.monotonic()
        reserved_until = started + controller.reservation_seconds
        deadline = started + controller.timeout_seconds
        claimed = False
        with stdout.open("wb") as out, stderr.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                *spawn_argv(argv),
                cwd=run_dir,
                env=env,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                if stdin is not None and proc.stdin is not None:
                    await _feed(proc.stdin, stdin)
                while True:
                    try:
                        await asyncio.wait_for(proc.wait(), POLL_SECONDS)
                        break
                    except TimeoutError:
                        pass
                    claimed = claimed or await asyncio.to_thread(wake.claimed)
                    now = time.monotonic()
                    if not claimed and now >= reserved_until:
                        await stop_group(proc)
                        return _unclaimed(controller)
                    if now >= deadline:
                        await stop_group(proc)
                        why = f"timed out after {controller.timeout}; its process group was killed"
                        return Execution(
                            result=None, error=why, timed_out=True, artifact=str(stdout)
                        )
            except asyncio.CancelledError:
                await stop_group(proc)
                raise
            finally:
                kill_group(proc.pid, signal.SIGKILL)
        code = proc.returncode
        assert code is not None
        if code != 0:
            why = f"controller {controller.id} {describe_exit(code)}; stderr tail: "
            return Execution(
                result=None,
                error=why + tail(_read_tail(stderr, 8000)),
                artifact=str(stdout),
            )
        if claimed or await asyncio.to_thread(wake.claimed):
            return Execution(result={"outcome": WOKEN}, artifact=str(stdout))
        return _unclaimed(controller)


def _unclaimed(controller: Controller) -> Execution:
    return Execution(
        result={"outcome": DID_NOT_CLAIM},
        error=(
            f"controller {controller.id} did not claim the work within its launch "
            f"reservation ({controller.launch_reservation})"
        ),
    )


async def _feed(pipe: asyncio.StreamWriter, data: bytes) -> None:
    """Hand the context on stdin and close it; a controller that exits without reading
    it all is no error of the wake."""
    try:
        pipe.write(data)
        await pipe.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        pipe.close()
