"""The command supervisor (Linux). The command adapter starts every command as

    python -I -S supervisor.py WORKER_PID ARGV...

at the head of a new session and process group. This script imports nothing of the
engine (only the standard library, with site and the environment ignored). It is the
one parent of the run's whole process tree, and it outlives every process in it:

- it makes itself a child subreaper (PR_SET_CHILD_SUBREAPER): whatever a descendant
  starts stays its descendant, even one that leaves the group (setsid, setpgid) or
  whose parent exits (a double fork): an orphan is re-parented to the supervisor, not
  to init. So the run's processes are exactly the supervisor's descendants;
- it asks the kernel for SIGHUP when the worker dies (PR_SET_PDEATHSIG), and the worker
  sends it SIGHUP on a cancel, a lost lease and after a timeout's grace period. It
  answers by ending the tree (below) and then itself with SIGKILL. A worker killed with
  SIGKILL therefore leaves nothing of its run behind, and a cancel ends everything;
- it forks and execs the command, argv unchanged, in the same group, with the default
  signal dispositions, and reaps every orphan handed to it while the command runs;
- it ignores SIGTERM, which the worker sends to the whole group on a timeout: the command
  gets its grace period while the supervisor keeps watching the worker;
- when the command exits it ends the tree too (whatever the command left running) and
  ends as the command ended (the same exit code, or killed by the same signal), so the
  worker reads the command's own status.

Ending the tree: SIGKILL to every descendant found in /proc (each through a pidfd opened
while its parent is still in the tree, so a reused pid is never hit), then reap; again,
until the supervisor has no child left. A subreaper with no child has no descendant, so
nothing of the run is left when it exits. Only a SIGKILL of the supervisor itself, which
no signal of the engine's sends, could leave descendants behind (docs/runtime.md)."""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
from contextlib import suppress
from pathlib import Path
from types import FrameType

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
DEATH_SIGNAL = signal.SIGHUP
WORKER_GONE = 70  # the worker died before the supervisor was set up: nothing ran
CANNOT_RUN = 127  # the command could not be executed (not found, not executable)
RESET = (signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT)
PROC = Path("/proc")


def parents() -> dict[int, int]:
    """pid -> parent pid of every process /proc shows now."""
    found: dict[int, int] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            ppid = parent_of(int(entry.name))
            if ppid is not None:
                found[int(entry.name)] = ppid
    return found


def parent_of(pid: int) -> int | None:
    """The parent of `pid`, or None when it is gone. The command name in /proc's stat
    is in parentheses and may hold any character, so the fields are read after the
    last ')'."""
    try:
        stat = (PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    return int(stat.rsplit(b")", 1)[1].split()[1])


def descendants(root: int, tree: dict[int, int]) -> list[int]:
    """The descendants of `root` in the parent map `tree`, parents before children."""
    children: dict[int, list[int]] = {}
    for pid, ppid in tree.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    todo = [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found.extend(kids)
        todo.extend(kids)
    return found


def kill_exactly(pid: int, family: set[int]) -> None:
    """SIGKILL `pid` when it is still a child of a process in `family` (the supervisor
    and its descendants): a pidfd pins the process, then its parent is checked again,
    so a pid reused by an unrelated process since /proc was read is left alone."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:  # no pidfds (a kernel before 5.3): the plain kill
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        return
    try:
        if parent_of(pid) in family:
            with suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)


def end_tree() -> None:
    """SIGKILL every descendant and reap, until no child is left: a process that forked
    before it died is re-parented here and killed on the next round."""
    me = os.getpid()
    while True:
        found = descendants(me, parents())
        family = {me, *found}
        for pid in found:
            kill_exactly(pid, family)
        try:
            os.waitpid(-1, 0)
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return


def end_run(signum: int = 0, frame: FrameType | None = None) -> None:
    """The worker died or asked the run to end: the whole tree, then the supervisor."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {DEATH_SIGNAL})
    end_tree()
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> int:
    signal.signal(DEATH_SIGNAL, end_run)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1) != 0:
        print("cannot become the command's subreaper (prctl)", file=sys.stderr)
        return CANNOT_RUN
    if libc.prctl(PR_SET_PDEATHSIG, DEATH_SIGNAL) != 0:
        print("cannot ask for the worker's death signal (prctl)", file=sys.stderr)
        return CANNOT_RUN
    if os.getppid() != int(argv[1]):  # the worker died before prctl took effect
        return WORKER_GONE
    child = os.fork()
    if child == 0:
        _exec(argv[2:])
    status = _wait_for(child)
    signal.pthread_sigmask(signal.SIG_BLOCK, {DEATH_SIGNAL})  # the tree is ended below
    end_tree()
    return _end_as(status)


def _wait_for(child: int) -> int:
    """The command's wait status; orphans re-parented here meanwhile are reaped."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            return status


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
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})  # SIGHUP was blocked above
        os.kill(os.getpid(), sig)
        return 128 + sig  # a signal whose default is not to terminate: say which
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
