"""The command supervisor (Linux). The command adapter starts every command as

    python -I -S supervisor.py WORKER_PID ARGV...

at the head of a new session and process group. This script imports nothing of the
engine (only the standard library, with site and the environment ignored) and:

- asks the kernel for SIGHUP when the worker dies (PR_SET_PDEATHSIG) and answers it by
  killing its whole process group with SIGKILL: the command, everything the command
  started that stayed in the group, and itself last. A worker killed with SIGKILL
  therefore leaves nothing of its run behind;
- forks and execs the command, argv unchanged, in the same group, with the default
  signal dispositions;
- ignores SIGTERM, which the worker sends to the whole group on a timeout: the command
  gets its grace period while the supervisor keeps watching the worker;
- ends as the command ended (the same exit code, or killed by the same signal), so the
  worker reads the command's own status. The worker then kills what is left of the
  group: a run's processes end with the run.

A descendant that leaves the group on purpose (setsid, setpgid) escapes it, as it would
any process-group supervisor; only a container or a cgroup holds such a process."""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
from contextlib import suppress
from types import FrameType

PR_SET_PDEATHSIG = 1
DEATH_SIGNAL = signal.SIGHUP
WORKER_GONE = 70  # the worker died before the supervisor was set up: nothing ran
CANNOT_RUN = 127  # the command could not be executed (not found, not executable)
RESET = (signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT)


def kill_group(signum: int = 0, frame: FrameType | None = None) -> None:
    """SIGKILL to the supervisor's own process group, itself included."""
    os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> int:
    signal.signal(DEATH_SIGNAL, kill_group)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, DEATH_SIGNAL) != 0:
        print("cannot ask for the worker's death signal (prctl)", file=sys.stderr)
        return CANNOT_RUN
    if os.getppid() != int(argv[1]):  # the worker died before prctl took effect
        return WORKER_GONE
    child = os.fork()
    if child == 0:
        _exec(argv[2:])
    _, status = os.waitpid(child, 0)
    return _end_as(status)


def _exec(argv: list[str]) -> None:
    """In the forked child: the command, with default signal dispositions."""
    try:
        for sig in RESET:
            signal.signal(sig, signal.SIG_DFL)
        os.execvp(argv[0], argv)
    except OSError as err:
        print(f"cannot run {argv[0]!r}: {err}", file=sys.stderr)
    os._exit(CANNOT_RUN)


def _end_as(status: int) -> int:
    """Exit as the command did: killed by its signal (without a core file), or with
    its exit code."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with suppress(OSError, ValueError):  # SIGKILL has no disposition to reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig  # a signal whose default is not to terminate: say which
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
