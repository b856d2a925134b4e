"""The `command` adapter: a closed argv template run without a shell.

The template is filled by engine.core.argv: `{name}` placeholders are filled by the
builtins ({python}, {run_id}, {run_dir}, {event_id}) or by declared params read from
the event payload, each value in its own element and fitting its param type, so a
payload can never add an argument or an option; a value that does not fit refuses the
run before anything executes. The child sees an allowlisted environment and runs in
the run's artifact directory, in a session and process group of its own that is killed
whole on a timeout (SIGTERM, then SIGKILL after a grace period), on a cancel or a lost
lease (SIGKILL), and when the command exits (whatever it left running). On Linux the
supervisor below holds every process the command starts, also one that leaves the group
(setsid, a double fork), and ends them all then, and when the worker dies. Its result
is the last non-empty stdout line, parsed as a JSON object (`factory.command-result/v1`)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.adapters import workspaces
from engine.core.argv import ArgumentRefused, build_argv, workspace_path
from engine.core.registry import Definition
from engine.service.runs import Execution

if TYPE_CHECKING:
    from engine.adapters import Job

BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "HOME")
DEFAULT_STDOUT = "stdout.log"
STDERR = "stderr.log"
TAIL_LINES = 20
TAIL_CHARS = 2000
STDOUT_TAIL_BYTES = 1 << 20  # the result line is the last one; a bigger one is not read
KILL_GRACE_SECONDS = 2.0

# On Linux the command is started through a tiny supervisor (engine/adapters/
# supervisor.py, standard library only): the subreaper of everything the command starts,
# which ends that whole tree when the worker dies (PR_SET_PDEATHSIG), when the worker
# asks (a cancel, a lost lease, a timeout) and when the command exits. A worker killed
# mid-run never leaves its command, nor anything the command started (in its group or
# not), running beside a retry. No Python code runs between fork and exec in the worker.
SUPERVISOR = str(Path(__file__).with_name("supervisor.py"))
SUPERVISED = sys.platform == "linux"
# A supervisor ends its tree in milliseconds; one that has not after this long (a
# process stuck in the kernel) has its group SIGKILLed instead.
END_SECONDS = 10.0


# ---- the argv template (pure: engine.core.argv) --------------------------------------


def builtins_for(job: Job) -> dict[str, str]:
    return {
        "python": sys.executable,
        "run_id": job.run.run_id,
        "run_dir": str(job.run_dir),
        "event_id": job.event.event_id,
    }


def allowed_env(names: tuple[str, ...], environ: Mapping[str, str]) -> dict[str, str]:
    """BASE_ENV and `names`, copied from `environ` when set; nothing else of it."""
    return {name: environ[name] for name in (*BASE_ENV, *names) if name in environ}


def build_env(
    definition: Definition, environ: Mapping[str, str], run_id: str, event_id: str
) -> dict[str, str]:
    """The allowlist: BASE_ENV and the definition's `env` names, copied when set, plus
    ENGINE_RUN_ID and ENGINE_EVENT_ID. Nothing else of the engine's environment."""
    env = allowed_env(definition.env, environ)
    env["ENGINE_RUN_ID"] = run_id
    env["ENGINE_EVENT_ID"] = event_id
    return env


# ---- reading what the command left (pure) ----------------------------------------


def parse_result(stdout: str) -> dict[str, Any] | None:
    """The last non-empty stdout line as a JSON object; None when it is not one."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        value = json.loads(lines[-1])
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses
        return None
    return value if isinstance(value, dict) else None


def tail(text: str) -> str:
    lines = text.strip().splitlines()[-TAIL_LINES:]
    return "\n".join(lines)[-TAIL_CHARS:] or "(empty)"


def describe_exit(code: int) -> str:
    if code < 0:
        with suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def judge(code: int, stdout: str, stderr: str) -> tuple[dict[str, Any] | None, str | None]:
    """(result, error) of a finished process."""
    result = parse_result(stdout)
    if code == 0 and result is not None:
        return result, None
    why = describe_exit(code)
    if code == 0:
        why += " but printed no JSON object on its last stdout line"
    return None, f"command {why}; stderr tail: {tail(stderr)}"


# ---- the process -------------------------------------------------------------------


def spawn_argv(argv: list[str]) -> list[str]:
    """What is executed: the argv under the supervisor on Linux, else the argv."""
    if not SUPERVISED:
        return argv
    return [sys.executable, "-I", "-S", SUPERVISOR, str(os.getpid()), *argv]


def kill_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def end_tree(proc: asyncio.subprocess.Process) -> None:
    """End the run's processes now. On Linux the supervisor is asked (SIGHUP) and
    SIGKILLs every descendant, also those that left the group, before it ends itself;
    elsewhere, or should the supervisor not end within END_SECONDS, the process group
    is SIGKILLed."""
    if SUPERVISED:
        with suppress(ProcessLookupError):  # it has ended and been reaped already
            proc.send_signal(signal.SIGHUP)
        with suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), END_SECONDS)
    kill_group(proc.pid, signal.SIGKILL)
    await proc.wait()


async def stop_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group, and end the tree after a grace period."""
    kill_group(proc.pid, signal.SIGTERM)
    with suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), KILL_GRACE_SECONDS)
    await end_tree(proc)


async def wait_or_stop(proc: asyncio.subprocess.Process, timeout: float) -> bool:
    """Wait for the process; True when it timed out (its group is then stopped).
    Cancelling the wait ends the tree at once. Whatever the command left running when
    it exited is ended too (by the supervisor, and the group by this): a run's
    processes end with the run."""
    try:
        await asyncio.wait_for(proc.wait(), timeout)
        return False
    except TimeoutError:
        await stop_group(proc)
        return True
    except asyncio.CancelledError:
        await end_tree(proc)
        raise
    finally:
        kill_group(proc.pid, signal.SIGKILL)


class CommandAdapter:
    """Runs command definitions; `environ` is the engine's environment to copy the
    allowlist from (os.environ by default)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ = environ

    async def execute(self, job: Job) -> Execution:
        definition = job.definition
        try:
            argv = build_argv(definition, builtins_for(job), job.event.payload)
        except ArgumentRefused as err:
            return Execution(result=None, error=f"refused, nothing was run: {err.message}")
        environ = os.environ if self.environ is None else self.environ
        env = build_env(definition, environ, job.run.run_id, job.event.event_id)
        stdout = job.run_dir / (definition.capture_stdout or DEFAULT_STDOUT)
        stderr = job.run_dir / STDERR
        _write_command(job.run_dir, argv, env)
        try:
            place = await asyncio.to_thread(
                workspaces.enter,
                definition,
                workspace_path(definition, builtins_for(job), job.event.payload),
                job.run_dir,
            )
        except ArgumentRefused as err:
            return Execution(result=None, error=f"refused, nothing was run: {err.message}")
        except workspaces.WorkspaceRefused as err:
            return Execution(result=None, error=str(err), workspace_refused=True)
        try:
            code = await _run(argv, env, place.cwd, stdout, stderr, definition.timeout_seconds)
        except OSError as err:
            return Execution(result=None, error=f"cannot start {argv[0]!r}: {err}")
        finally:
            await asyncio.to_thread(place.leave)
        if code is None:
            killed = f"timed out after {definition.timeout}; its process group was killed"
            return Execution(result=None, error=killed, timed_out=True, artifact=str(stdout))
        result, error = judge(
            code, _read_tail(stdout, STDOUT_TAIL_BYTES), _read_tail(stderr, TAIL_CHARS * 4)
        )
        return Execution(result=result, error=error, artifact=str(stdout))


async def _run(
    argv: list[str], env: dict[str, str], cwd: Path, stdout: Path, stderr: Path, timeout: float
) -> int | None:
    """The exit code, or None when the command timed out."""
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *spawn_argv(argv),
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        if await wait_or_stop(proc, timeout):
            return None
    assert proc.returncode is not None
    return proc.returncode


def _write_command(run_dir: Path, argv: list[str], env: dict[str, str]) -> None:
    """Note what ran (argv and the environment's names, not its values) beside the output."""
    note = {"argv": argv, "env": sorted(env)}
    (run_dir / "command.json").write_text(json.dumps(note, indent=2) + "\n", encoding="utf-8")


def _read_tail(path: Path, limit: int) -> str:
    """The last `limit` bytes of a file (all of a small one), decoded leniently."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - limit))
            return f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
