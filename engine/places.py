"""Places: how the engine names a file it read, in every diagnostic, decision, journal
entry, page and answer (docs/rules.md#places). A file is named by the instance layout,
relative to the directory of its kind (`loops/web.rules`, `registry/definitions.yaml`,
`config/repos.yaml`), never as the working directory saw it, so a place recorded on
one machine means the same on another and after the rules move. Made here, once, when
the loader reads a file; read back here when a page shows a recorded rule's lines."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


def display(path: Path) -> str:
    """A path relative to the working directory where possible: how a directory the
    user named is shown (a file the engine reads is named by its Root)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError, RuntimeError):  # elsewhere, or a symbolic link loop
        return str(path)


@dataclass(frozen=True, slots=True)
class Root:
    """A directory whose files are named by the instance layout (docs/rules.md#places):
    a file under the rules directory is `loops/<its path there>`, under the registry
    `registry/...`, under the configuration `config/...`, whatever the directory is
    called and wherever the working directory is. The one place where the name of a
    file the engine reads is made: every diagnostic, decision, journal entry, page and
    answer carries it, so a recorded place means the same on another machine and after
    the rules move."""

    label: str  # "loops", "registry" or "config" (engine.home.LAYOUT)
    path: Path

    def name(self, file: Path) -> str:
        """`label/<file's path under the root>` (compared as given, then absolute, then
        resolved); a file outside it as `display` shows it."""
        for inside, root in self._pairs(file):
            try:
                return f"{self.label}/{inside.relative_to(root).as_posix()}"
            except ValueError:
                continue
        return display(file)

    def _pairs(self, file: Path) -> Iterator[tuple[Path, Path]]:
        yield file, self.path
        yield file.absolute(), self.path.absolute()
        try:
            yield file.resolve(), self.path.resolve()
        except (OSError, RuntimeError):  # a symbolic link loop: not below the root
            return

    def file(self, name: str) -> Path | None:
        """The file a place under this root names (the inverse of `name`), None for a
        place of another root or none (an older engine's absolute or working-directory
        place)."""
        label, _, rest = name.partition("/")
        return self.path / rest if label == self.label and rest else None


def locate(name: str, roots: Iterable[Root]) -> Path:
    """The file a recorded place names: under the root its label names, else the path as
    it was recorded (what an older engine wrote: absolute, or relative to its working
    directory)."""
    return next((f for r in roots if (f := r.file(name)) is not None), Path(name))
