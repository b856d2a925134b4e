"""The shell examples of README.md and docs/*.md, run against a fresh instance and held
to what they show (docs/testing.md#the-docs-test).

`ENGINE_DOCS_REGEN=1 python -m pytest tests/docs` writes what each example printed back
into its block instead of failing, keeping its commands, annotation and `...` lines.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import docs_harness as h
import pytest

REGEN = os.environ.get("ENGINE_DOCS_REGEN") == "1"
BLOCKS = h.all_blocks()
RUN = [b for b in BLOCKS if b.not_run is None]
NOT_RUN = [b for b in BLOCKS if b.not_run is not None]


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Callable[[tuple[str, ...]], Path]:
    """The instance a block starts from, by its setup scripts: a copy of the checkout's
    instance files with those scripts run in it, made once per test session (shared by
    the pytest-xdist workers, under a lock) from the instance of all but the last script
    (a history built in steps builds each step once, not once per block). A setup that
    failed fails every block that needs it, without running again."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "docs-templates"
    shared.mkdir(exist_ok=True)

    def instance_for(setup: tuple[str, ...]) -> Path:
        name = hashlib.sha256("\0".join(setup).encode()).hexdigest()[:16]
        into, failed = shared / name, shared / f"{name}.failed"
        with (shared / f"{name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if failed.exists():
                raise h.ExampleError(failed.read_text())
            if not into.exists():
                making = shared / f"{name}.making"
                shutil.rmtree(making, ignore_errors=True)
                try:
                    if setup:  # a copy of the instance the earlier scripts made, then the last
                        shutil.copytree(instance_for(setup[:-1]), making, symlinks=True)
                        h.run_setup(setup[-1:], making)
                    else:
                        making.mkdir()
                        h.make_template(making)
                except (h.ExampleError, subprocess.TimeoutExpired) as err:
                    failed.write_text(str(err))
                    raise
                making.rename(into)
        return into

    return instance_for


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_example_prints_what_the_docs_show(block: h.Block, template: Path, tmp_path: Path) -> None:
    """Each command of a shell example prints, on a fresh instance, what the docs show
    after it (ids, times, durations, ports and temporary paths aside)."""
    if REGEN and block.pending:
        pytest.skip(f"pending, not regenerated: {block.pending}")
    instance = tmp_path / "instance"
    shutil.copytree(template(block.setup), instance, symlinks=True)
    outputs = h.run_block(block, instance)
    if REGEN:
        write_back(block, outputs)
        return
    failures = [
        h.diff(block, command, printed)
        for command, printed in zip(block.commands, outputs, strict=True)
        if not h.matches(command.output, printed)
    ]
    if block.pending:
        if failures:
            pytest.xfail(f"pending: {block.pending}")
        pytest.fail(f"{block.id} passes: remove its `pending` annotation", pytrace=False)
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


def write_back(block: h.Block, outputs: list[list[str]]) -> None:
    """Rewrite the block's expected output in its file, under a lock (pytest-xdist runs
    blocks of one file in several processes)."""
    path = h.ROOT / block.file
    with path.open("r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        text = f.read()
        new = h.rewrite(text, block, outputs)
        if new != text:
            f.seek(0)
            f.write(new)
            f.truncate()


def test_few_examples_are_not_run() -> None:
    """Only the examples that cannot run here (a long-running foreground command, a
    host's service manager) are exempt, each with its reason; the list stays short."""
    reasons = {b.id: b.not_run for b in NOT_RUN}
    pending = [b.id for b in RUN if b.pending]
    print(f"{len(RUN)} examples run ({len(pending)} pending), {len(NOT_RUN)} not run: {reasons}")
    assert all(reasons.values())
    assert len(NOT_RUN) <= 12, reasons


# "seed N §M", the spec's sections and the tickets of a tracker outside the repository;
# never a Markdown link to a section of the same page. (`\s` and the ticket prefixes in a
# group keep this line from matching itself.)
CITATION = re.compile(r"[Ss]eed [0-9]+ §|SPEC\s§|\b(?:WM|OPS)-[0-9]+\b|shared/seed[s]/|SPEC[.]md")
DOC_FILES = ["README.md", "docs"]
CODE_FILES = ["engine", "dsl", "tests", "bench", "loops", "config", "CHANGELOG.md"]
SUFFIXES = {".md", ".py", ".rules", ".yaml", ".txt", ".lark"}


def printed_lines(path: Path, text: str) -> set[int]:
    """The 1-based lines of a page that are an example's output: what a command prints
    is the code's text, held by the code test, and regenerated from it."""
    if path.suffix != ".md":
        return set()
    blocks = h.find_blocks(path.relative_to(h.ROOT).as_posix(), text)
    return {
        n + 1
        for b in blocks
        for c in b.commands
        for n in range(c.output_start, c.output_start + len(c.output))
    }


def cites_outside(tops: list[str]) -> list[str]:
    """Every line under `tops` that cites a design document outside the repository."""
    found = []
    for top in tops:
        root = h.ROOT / top
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if not path.is_file() or path.suffix not in SUFFIXES:
                continue
            text = path.read_text(errors="replace")
            printed = printed_lines(path, text)
            for n, line in enumerate(text.split("\n"), 1):
                if CITATION.search(line) and n not in printed:
                    found.append(f"{path.relative_to(h.ROOT)}:{n}: {line.strip()}")
    return found


def test_docs_cite_only_the_projects_own_documents() -> None:
    """README and docs/ point at a docs page, never at a design document
    outside the repository ("seed N §M")."""
    assert cites_outside(DOC_FILES) == []


def test_code_cites_only_the_projects_own_documents() -> None:
    """Comments and docstrings under engine/, dsl/, tests/, bench/, loops/ and config/, and
    CHANGELOG.md, cite docs pages too."""
    assert cites_outside(CODE_FILES) == []
