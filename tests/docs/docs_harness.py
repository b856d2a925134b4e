"""The shell examples of README.md and docs/*.md: finding them, running them against a
fresh instance, comparing what they print, and writing what they printed back
(docs/testing.md#the-docs-test).

An example is a fenced block whose lines start with `$ `: each such line is a command
(a trailing backslash continues it on the next line), and the lines after it up to the
next command are what it prints. An HTML comment on the line just before the fence
says how the block runs:

    <!-- example: fresh -->                        the default
    <!-- example: setup docs/examples/NAME.sh -->  run a shipped script first
    <!-- example: serve -->                        a real `engine serve` in the background
    <!-- example: setup docs/examples/NAME.sh; serve -->
    <!-- example: not run — REASON -->             shown, never run

Parsing, normalising, comparing and regenerating are pure functions of text; `run_block`
is the one that starts processes.
"""

from __future__ import annotations

import difflib
import itertools
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTANCE_PARTS = ("loops", "registry", "config", "docs/examples")
ELISION = "..."
ELISIONS = frozenset({ELISION, "…"})  # a line that is one of these, indented or not


def is_elision(line: str) -> bool:
    """Whether an expected line stands for any number of lines (an excerpt of indented
    JSON indents its elisions too)."""
    return line.strip() in ELISIONS


FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
ANNOTATION = re.compile(r"^<!--\s*example:\s*(.*?)\s*-->\s*$")
NOT_RUN = re.compile(r"^not run\s*(?:—|--|-|:)\s*(.+)$")
PENDING = re.compile(r"^pending\s*(?:—|--|-|:)\s*(.+)$")


class AnnotationError(ValueError):
    """An `<!-- example: ... -->` comment the harness does not understand."""


@dataclass(frozen=True)
class Command:
    """One `$ ` command of a block: its text (continuations joined by newlines), the
    line (0-based, in the file) of its first `$ `, and the expected output lines."""

    text: str
    line: int
    output: tuple[str, ...]
    output_start: int  # 0-based file line of the first output line


@dataclass(frozen=True)
class Block:
    """A shell example: where it is, how it runs, and its commands."""

    file: str  # relative to the checkout, e.g. "docs/cli.md"
    line: int  # 1-based line of the opening fence
    index: int  # its position among the file's examples (stable under regeneration)
    commands: tuple[Command, ...]
    setup: tuple[str, ...] = ()
    serve: bool = False
    not_run: str | None = None
    now: str | None = None  # ENGINE_NOW for the commands (and serve), as the prose says
    body: tuple[int, int] = (0, 0)  # 0-based [first, end) file lines inside the fences
    pending: str | None = None  # known to fail until the state it needs is shipped

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Mode:
    setup: list[str] = field(default_factory=list)
    serve: bool = False
    not_run: str | None = None
    now: str | None = None
    pending: str | None = None


def parse_annotation(text: str) -> Mode:
    """`fresh`, `serve`, `setup PATH`, `now ISO-8601`, `not run — REASON` and
    `pending — REASON`, several joined by `;`."""
    mode = Mode()
    for part in (p.strip() for p in text.split(";")):
        if (reason := NOT_RUN.match(part)) is not None:
            mode.not_run = reason.group(1).strip()
        elif (reason := PENDING.match(part)) is not None:
            mode.pending = reason.group(1).strip()
        elif part == "fresh":
            continue
        elif part == "serve":
            mode.serve = True
        elif part.startswith("now "):
            mode.now = part.removeprefix("now ").strip()
        elif part.startswith("setup "):
            script = part.removeprefix("setup ").strip()
            if not script.startswith("docs/examples/"):
                raise AnnotationError(f"setup script {script!r} is not under docs/examples/")
            mode.setup.append(script)
        else:
            raise AnnotationError(f"unknown example annotation {part!r}")
    return mode


def split_commands(lines: Sequence[str], first: int) -> tuple[Command, ...]:
    """The commands of a block body starting at file line `first`; lines before the
    first `$ ` are not part of any command (there should be none)."""
    commands: list[Command] = []
    i = 0
    while i < len(lines) and not lines[i].startswith("$ "):
        i += 1
    while i < len(lines):
        start = i
        text = [lines[i][2:]]
        while text[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            text.append(lines[i])
        i += 1
        out_start = i
        while i < len(lines) and not lines[i].startswith("$ "):
            i += 1
        commands.append(
            Command("\n".join(text), first + start, tuple(lines[out_start:i]), first + out_start)
        )
    return tuple(commands)


def find_blocks(file: str, text: str) -> list[Block]:
    """Every shell example of one Markdown file, in order."""
    lines = text.split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        fence = opened.group(1)
        end = i + 1
        while end < len(lines) and not lines[end].startswith(fence[0] * len(fence)):
            end += 1
        body = lines[i + 1 : end]
        if any(line.startswith("$ ") for line in body):
            before = i - 1
            while before >= 0 and not lines[before].strip():
                before -= 1
            note = ANNOTATION.match(lines[before].strip()) if before >= 0 else None
            mode = parse_annotation(note.group(1)) if note else Mode()
            blocks.append(
                Block(
                    file,
                    i + 1,
                    len(blocks),
                    split_commands(body, i + 1),
                    tuple(mode.setup),
                    mode.serve,
                    mode.not_run,
                    mode.now,
                    (i + 1, end),
                    mode.pending,
                )
            )
        i = end + 1
    return blocks


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def all_blocks(root: Path = ROOT) -> list[Block]:
    found: list[Block] = []
    for path in documents(root):
        found += find_blocks(path.relative_to(root).as_posix(), path.read_text())
    return found


# ---- normalising ------------------------------------------------------------------------
# Only what differs from one run to the next; a digest, a count or a name never does.

NORMALISERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"/tmp/[^\s'\"`,)\]]+"), "<tmp>"),
    (re.compile(r"\b(127\.0\.0\.1|localhost):\d{2,5}\b"), r"\1:<port>"),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d([.,]\d+)?)?(Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"\b(run|prop|find|req)-[0-9a-f]{16}\b"), r"\1-<id>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<uuid>"),
    (re.compile(r"\b\d+(\.\d+)?\s?ms\b"), "<duration>"),
    (re.compile(r"\b\d+\.\d+\s?s\b"), "<duration>"),
    # `engine stats`' budget line: runs counted, the wall-clock seconds they took measured.
    (re.compile(r"\b(\d+ runs)/\d+s\b"), r"\1/<duration>"),
    # ... and the same seconds in a triage snapshot's budget and in `engine stats --json`
    # (pretty-printed; a reservation is written compact, `"wall_clock_seconds":30`, and kept).
    (re.compile(r'"(daily_wall_clock_(?:used|left))":\s?\d+'), r'"\1":<duration>'),
    (re.compile(r'"wall_clock_seconds": \d+'), '"wall_clock_seconds": <duration>'),
    (re.compile(r"\b\d+[smhd]( \d+[smhd])? ago\b"), "<ago>"),
    (re.compile(r"\bjust now\b"), "<ago>"),  # under a few seconds ago (engine/core/timefmt.py)
    (re.compile(r"\bin \d+[smhd]( \d+[smhd])?\b"), "in <later>"),
    (re.compile(r"\bengine \d+\.\d+\.\d+\S*"), "engine <version>"),
    # A paging cursor encodes the page's last instant and id (engine/core/paging.py).
    (re.compile(r"(--before |\"next\": \")[A-Za-z0-9_-]{16,}"), r"\1<cursor>"),
)


# A table's columns are as wide as their widest value, so a relative time that grows a
# digit (`9s ago`, `10s ago`) shifts the columns after it and lengthens the rule line:
# column padding (two spaces or more) and a rule line compare by their presence only.
PADDING = re.compile(r" {2,}")
RULE = re.compile(r"─+")


def normalise(line: str) -> str:
    """One output line with what varies between runs replaced by placeholders."""
    for pattern, placeholder in NORMALISERS:
        line = pattern.sub(placeholder, line)
    return RULE.sub("─", PADDING.sub("  ", line.rstrip()))


def trimmed(lines: Sequence[str]) -> list[str]:
    """Trailing whitespace of each line and trailing blank lines dropped."""
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def matches(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """Whether the actual lines are the expected ones after normalising; a line that is
    exactly `...` in the expected output stands for any number of lines."""
    want, got = [normalise(x) for x in trimmed(expected)], [normalise(x) for x in trimmed(actual)]
    if not any(is_elision(w) for w in want):
        return want == got
    pattern = "".join(r"(?:[^\n]*\n)*?" if is_elision(w) else re.escape(w + "\n") for w in want)
    return re.fullmatch(pattern, "".join(g + "\n" for g in got)) is not None


def diff(block: Block, command: Command, actual: Sequence[str]) -> str:
    """A unified diff of one command's expected and actual output, after normalising,
    headed by where the block and the command are."""
    want = [normalise(x) for x in trimmed(command.output)]
    got = [normalise(x) for x in trimmed(actual)]
    lines = difflib.unified_diff(
        want, got, f"{block.file}:{command.line + 1} (expected)", "actual", lineterm=""
    )
    return f"{block.id}: `$ {command.text}` printed something else\n" + "\n".join(lines)


# ---- regenerating -----------------------------------------------------------------------


def regenerated(expected: Sequence[str], actual: Sequence[str]) -> list[str]:
    """The new expected output of a command: what it printed, keeping each expected line
    that already matches its counterpart (so a normalised id or time is not churned) and
    the `...` elisions (the lines before the first and after the last one are kept as
    many as there were; what they elide is not written)."""
    want, got = trimmed(expected), trimmed(actual)
    if matches(want, got):
        return list(expected)
    marks = [n for n, w in enumerate(want) if is_elision(w)]
    if marks:
        kept = elided(want, got, marks)
        if kept is not None:
            return kept
        want = [w for w in want if not is_elision(w)]
    keep = difflib.SequenceMatcher(
        None, [normalise(x) for x in want], [normalise(x) for x in got], autojunk=False
    )
    out: list[str] = []
    for tag, i1, i2, j1, j2 in keep.get_opcodes():
        out += want[i1:i2] if tag == "equal" else got[j1:j2]
    return out


def elided(want: list[str], got: list[str], marks: list[int]) -> list[str] | None:
    """`regenerated` for an expected output with elisions: the lines before the first
    and after the last are regenerated from as many first and last printed lines, and
    each part between two elisions is kept where it is still printed, in order (a part
    no longer printed is dropped with its elision). None when too little was printed."""
    head, tail = marks[0], marks[-1]
    n_tail = len(want) - tail - 1
    if head + n_tail >= len(got):
        return None
    out = regenerated(want[:head], got[:head])
    middle = got[head : len(got) - n_tail]
    pos = 0
    for a, b in itertools.pairwise(marks):
        part = [normalise(x) for x in want[a + 1 : b]]
        at = next(
            (
                k
                for k in range(pos, len(middle) - len(part) + 1)
                if [normalise(x) for x in middle[k : k + len(part)]] == part
            ),
            None,
        )
        if part and at is not None:
            out += [want[a], *want[a + 1 : b]]
            pos = at + len(part)
    out.append(want[tail])
    return out + (regenerated(want[tail + 1 :], got[len(got) - n_tail :]) if n_tail else [])


def rewrite(text: str, block: Block, outputs: Sequence[Sequence[str]]) -> str:
    """The file's text with the expected output of `block` (found again by its index, so
    earlier rewrites in the same file do not move it) replaced by `outputs`."""
    current = find_blocks(block.file, text)[block.index]
    lines = text.split("\n")
    first, end = current.body
    body: list[str] = []
    for command, printed in zip(current.commands, outputs, strict=True):
        body += lines[command.line : command.output_start]
        body += regenerated(command.output, printed)
    lines[first:end] = lines[first : current.commands[0].line] + body
    return "\n".join(lines)


# ---- running ----------------------------------------------------------------------------


def make_template(into: Path, root: Path = ROOT) -> Path:
    """A copy of the checkout's instance files (loops/, registry/, config/ and the
    shipped examples), without an instance's own config/repos.yaml or schedule.yaml."""
    for part in INSTANCE_PARTS:
        shutil.copytree(
            root / part, into / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    for own in ("repos.yaml", "schedule.yaml"):
        (into / "config" / own).unlink(missing_ok=True)
    (into / ".venv").symlink_to(Path(sys.executable).parent.parent)  # `.venv/bin/engine`
    return into


def environment(instance: Path) -> dict[str, str]:
    """What a reader's shell has: the venv's `engine` first on PATH, the inherited
    PYTHONPATH, no ENGINE_* settings of the test run's own, UTC, a wide terminal."""
    bin_dir = str(Path(sys.executable).parent)
    keep = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    keep.update(
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        HOME=str(instance),
        TZ="UTC",
        LC_ALL="C.UTF-8",
        COLUMNS="80",
        PYTHONUNBUFFERED="1",
    )
    keep.pop("NO_COLOR", None)
    # Bytecode is written as a reader's Python writes it (tests/conftest.py says why).
    keep.pop("PYTHONDONTWRITEBYTECODE", None)
    return keep


def script(commands: Sequence[Command], outputs: Path) -> str:
    """One bash script running the commands in order in one shell (so `cd`, variables
    and `$?` carry from one to the next), each one's stdout and stderr to its own file."""
    parts = ["exec </dev/null"]
    for n, command in enumerate(commands):
        parts.append(f"{{ {command.text}\n}} >{shlex.quote(str(outputs / str(n)))} 2>&1")
    return "\n".join(parts) + "\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SERVE_ENV = {
    "ENGINE_OPERATOR_TOKEN": "alice:t",
    "ENGINE_CONTROLLER_TOKEN": "agent:a",
    "ENGINE_TOKEN": "t",
    "ENGINE_EVENT_SECRET": "s3cret",
    "ENGINE_GITHUB_WEBHOOK_SECRET": "It's a Secret to Everybody",
}
SHOWN_PORT = 7599  # the port the docs show serve on; a command naming it reaches the live one
LOOPBACK = re.compile(rf"\b(127\.0\.0\.1|localhost):{SHOWN_PORT}\b")


class ExampleError(RuntimeError):
    """A block's setup or its serve failed before its commands ran."""


def start_serve(instance: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    with (instance / "serve.log").open("wb") as log:
        proc = subprocess.Popen(
            ["engine", "serve", "--port", str(port)],
            cwd=instance,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ExampleError(f"engine serve exited {proc.returncode}: " + read_log(instance))
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1):
                return proc, url
        except OSError:
            time.sleep(0.1)
    stop(proc)
    raise ExampleError("engine serve did not answer /healthz in 30 s: " + read_log(instance))


def read_log(instance: Path) -> str:
    return (instance / "serve.log").read_text(errors="replace")[-2000:]


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_setup(scripts: Sequence[str], instance: Path, timeout: float = 600) -> None:
    """Run the setup scripts of a block in `instance`, in order; ExampleError with what
    a failing one printed."""
    env = environment(instance)
    for setup in scripts:
        done = subprocess.run(
            ["bash", setup],
            cwd=instance,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise ExampleError(f"{setup} exited {done.returncode}:\n{done.stdout}{done.stderr}")


def run_block(block: Block, instance: Path, timeout: float = 60) -> list[list[str]]:
    """Run a block's serve if it asks for one, then its commands in one bash process in
    `instance` (already set up: `run_setup`); return each command's output lines."""
    env = environment(instance)
    if block.now is not None:
        env["ENGINE_NOW"] = block.now
    commands = block.commands
    serve = None
    if block.serve:
        env.update(SERVE_ENV)
        serve, url = start_serve(instance, env)
        env["ENGINE_URL"] = url
        address = url.removeprefix("http://")
        commands = tuple(
            Command(LOOPBACK.sub(address, c.text), c.line, c.output, c.output_start)
            for c in commands
        )
    outputs = instance.parent / (instance.name + ".out")
    outputs.mkdir()
    shell = subprocess.Popen(
        ["bash", "-c", script(commands, outputs)],
        cwd=instance,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        shell.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
        raise ExampleError(
            f"{block.id}: still running after {timeout:.0f} s (a long-running command? "
            "mark the block `<!-- example: not run — REASON -->`)"
        ) from None
    finally:
        if serve is not None:
            stop(serve)
    return [
        shown((outputs / str(n)).read_text(errors="replace"), instance)
        for n in range(len(commands))
    ]


SHOWN_INSTANCE = "/tmp/example"


def shown(printed: str, instance: Path) -> list[str]:
    """What a command printed, as lines, with the instance's temporary path written as
    /tmp/example (so a regenerated output does not carry a test run's path)."""
    for path in {str(instance.resolve()), str(instance)}:
        printed = printed.replace(path, SHOWN_INSTANCE)
    return printed.split("\n")
