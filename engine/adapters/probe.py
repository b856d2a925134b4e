"""Running a watch's probe (docs/scheduling.md, "Condition watches").

A probe is a closed argv template like a command definition's (engine.adapters.command
fills it: whole arguments, typed params from the loop's static payload, no shell). It
runs in a fresh empty directory with the allowlisted environment, in a session and
process group of its own, killed whole on its timeout (SIGTERM, then SIGKILL) and when
it exits (whatever it left running); on Linux the same supervisor as a command's holds
everything it starts (also what leaves the group) and ends it then, and when the engine
dies. Only the first STDOUT_MAX bytes of stdout are read. Nothing
the probe prints becomes an event payload: the scheduler keeps its fingerprint alone.
The values of the probe's `env` are replaced by `***` in whatever it printed, so they
reach neither a diagnostic nor the fingerprint.

The runner is synchronous: the scheduler calls it from serve's runtime thread, before
and outside any store transaction."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from contextlib import suppress
from typing import IO, Any

from engine.adapters.command import (
    END_SECONDS,
    KILL_GRACE_SECONDS,
    SUPERVISED,
    allowed_env,
    describe_exit,
    kill_group,
    spawn_argv,
    tail,
)
from engine.core.argv import ArgumentRefused, build_argv
from engine.core.probes import STDOUT_MAX, ProbeRun
from engine.core.registry import Probe

STDERR_MAX = 4000  # bytes of stderr read for a failure's diagnostic


class ProbeRunner:
    """Runs probes; `environ` is the environment the allowlist copies from
    (os.environ by default)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ = environ

    def __call__(self, probe: Probe, payload: Mapping[str, Any]) -> ProbeRun:
        environ = os.environ if self.environ is None else self.environ
        try:
            argv = build_argv(probe, {"python": sys.executable}, payload)
        except ArgumentRefused as err:
            return ProbeRun(failure=f"refused, nothing was run: {err.message}")
        env = allowed_env(probe.env, environ)
        secrets = [env[name] for name in probe.env if env.get(name)]
        run = _run(argv, env, float(probe.timeout_seconds), probe.timeout)
        if run.failure is None:
            return ProbeRun(stdout=redact_bytes(run.stdout, secrets))
        return ProbeRun(failure=redact(run.failure, secrets))


def redact(text: str, secrets: list[str]) -> str:
    """`text` with every value of the probe's declared environment replaced by `***`."""
    for value in sorted(secrets, key=len, reverse=True):
        text = text.replace(value, "***")
    return text


def redact_bytes(data: bytes, secrets: list[str]) -> bytes:
    """`redact` for stdout: a secret the probe printed reaches neither a diagnostic nor
    the fingerprint (a rotated token is no change)."""
    for value in sorted(secrets, key=len, reverse=True):
        data = data.replace(value.encode("utf-8"), b"***")
    return data


def _run(argv: list[str], env: dict[str, str], timeout: float, shown: str) -> ProbeRun:
    with (
        tempfile.TemporaryDirectory(prefix="engine-probe-") as cwd,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        try:
            proc = subprocess.Popen(
                spawn_argv(argv),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as error:
            return ProbeRun(failure=f"cannot start {argv[0]!r}: {error.strerror or error}")
        try:
            code = _wait(proc, timeout)
        finally:
            end_tree(proc)
        if code is None:
            return ProbeRun(failure=f"timed out after {shown}; its process group was killed")
        stdout = _head(out, STDOUT_MAX + 1)
        if code != 0:
            stderr = _head(err, STDERR_MAX).decode("utf-8", "replace")
            return ProbeRun(failure=f"probe {describe_exit(code)}; stderr tail: {tail(stderr)}")
        return ProbeRun(stdout=stdout)


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The exit code, or None when the probe outlived `timeout` (its group is then
    stopped: SIGTERM, SIGKILL after a grace period)."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(KILL_GRACE_SECONDS)
        return None


def end_tree(proc: subprocess.Popen[bytes]) -> None:
    """engine.adapters.command.end_tree, synchronously: the supervisor ends every
    descendant (and the probe's group is SIGKILLed after it, or instead of it)."""
    if SUPERVISED:
        proc.send_signal(signal.SIGHUP)  # nothing once the supervisor has been reaped
        with suppress(subprocess.TimeoutExpired):
            proc.wait(END_SECONDS)
    kill_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _head(file: IO[bytes], limit: int) -> bytes:
    file.seek(0)
    return file.read(limit)
