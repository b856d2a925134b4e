"""The dirty-workspace guard (docs/occurrences.md#dirty-workspaces) for command definitions that
declare a `workspace`: the engine never treats a workspace as disposable. Before a run it asks git
whether the workspace has uncommitted changes; a clean one is used as it is; with `isolate:
worktree` the run gets a fresh `git worktree` of HEAD in its artifact directory (removed afterwards;
the user's checkout is never touched); a dirty one without isolation is refused, and the run's
occurrence waits for a person (`human_attention_required`). No `git reset`, `clean` or `stash`,
ever."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.core.registry import Definition

GIT_TIMEOUT_S = 60


class WorkspaceRefused(Exception):
    """The run must not start here; a person has to look (never retried)."""


class Dirty(WorkspaceRefused):
    pass


@dataclass
class Place:
    """Where a command runs, and how to leave it."""

    cwd: Path
    cleanup: Callable[[], None] | None = None

    def leave(self) -> None:
        if self.cleanup is not None:
            self.cleanup()


def _git(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(path), *args],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_S,
        check=False,
    )


def changes(path: Path) -> list[str]:
    """`git status --porcelain` lines of the workspace; WorkspaceRefused when it is no
    git workspace."""
    if not path.is_dir():
        raise WorkspaceRefused(f"workspace {path} does not exist")
    status = _git(path, "status", "--porcelain", "--untracked-files=normal")
    if status.returncode != 0:
        raise WorkspaceRefused(f"workspace {path} is not a git workspace: {status.stderr.strip()}")
    return [line for line in status.stdout.splitlines() if line.strip()]


def enter(definition: Definition, path: Path | None, run_dir: Path) -> Place:
    """The place to run a job: the run directory (no workspace declared), the
    workspace itself (clean), or a worktree of it (`isolate: worktree`); Dirty when the
    workspace has changes and may not be isolated."""
    if path is None or definition.workspace is None:
        return Place(run_dir)
    dirty = changes(path)
    if definition.workspace.isolate == "worktree":
        tree = run_dir / "worktree"
        added = _git(path, "worktree", "add", "--detach", str(tree), "HEAD")
        if added.returncode != 0:
            raise WorkspaceRefused(f"cannot isolate {path} in a worktree: {added.stderr.strip()}")

        def remove() -> None:  # only the worktree the engine made
            _git(path, "worktree", "remove", "--force", str(tree))

        return Place(tree, remove)
    if dirty:
        shown = "; ".join(dirty[:5]) + (" …" if len(dirty) > 5 else "")
        raise Dirty(
            f"workspace {path} has uncommitted changes ({len(dirty)}: {shown}); the engine "
            "never resets, cleans or stashes them: commit or move them yourself, or declare "
            "`isolate: worktree`"
        )
    return Place(path)
