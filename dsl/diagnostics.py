"""Diagnostics: one error type that carries a location, renders the source line with a
caret, and collects every problem of a run so `engine check` reports them all at once."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Span:
    """A place in a source file; line and column are 1-based."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem found in a rule, registry or configuration file."""

    code: str
    message: str
    span: Span
    source_line: str = ""
    hint: str | None = None
    severity: str = "error"

    def render(self) -> str:
        """Render as `file:line:col: error[CODE]: message`, the line, a caret, and a hint."""
        head = f"{shown(str(self.span))}: {self.severity}[{self.code}]: {shown(self.message)}"
        lines = [head]
        if self.source_line:
            gutter = str(self.span.line)
            pad = " " * len(gutter)
            line = self.source_line.rstrip("\n").expandtabs(1)
            text, column = _window(shown(line), len(shown(line[: self.span.column - 1])) + 1)
            caret = " " * max(column - 1, 0) + "^"
            lines += [f"{pad} |", f"{gutter} | {text}", f"{pad} | {caret}"]
        if self.hint:
            lines.append(f"  help: {shown(self.hint)}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "file": self.span.file,
            "line": self.span.line,
            "column": self.span.column,
            "hint": self.hint,
        }


def shown(text: str) -> str:
    """`text` with every character that is not printable (a line break, a control
    character, an escape sequence's ESC) written as its Python escape, so that what a
    file holds can never break a diagnostic's line or drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# A source line longer than this is shown as the part around the caret.
WIDE = 120


def _window(text: str, column: int) -> tuple[str, int]:
    """The line (or, when it is wider than WIDE, the part around `column`, with "..."
    where it was cut) and the caret's column in what is shown."""
    if len(text) <= WIDE:
        return text, column
    start = max(0, min(column - 1 - WIDE // 2, len(text) - WIDE))
    shown, column = text[start : start + WIDE], column - start
    if start > 0:
        shown, column = "..." + shown, column + 3
    if start + WIDE < len(text):
        shown += "..."
    return shown, column


class RulesError(Exception):
    """Raised when rule, registry or configuration files do not load; carries every
    diagnostic found, in file order, and the warnings found on the way (apart)."""

    def __init__(
        self, diagnostics: Sequence[Diagnostic], warnings: Sequence[Diagnostic] = ()
    ) -> None:
        self.diagnostics = tuple(sorted(diagnostics, key=_order))
        self.warnings = ordered(warnings)
        count = len(self.diagnostics)
        first = self.diagnostics[0].render() if self.diagnostics else ""
        super().__init__(f"{count} error(s) in rules\n{first}")

    def render(self) -> str:
        """The errors, then the warnings."""
        return "\n\n".join(d.render() for d in (*self.diagnostics, *self.warnings))


def _order(d: Diagnostic) -> tuple[str, int, int, str]:
    return (d.span.file, d.span.line, d.span.column, d.code)


def ordered(diagnostics: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    """Diagnostics in file order, as errors are reported."""
    return tuple(sorted(diagnostics, key=_order))


# Where a line ends, as the parser that numbers a file's lines counts them: in a rule
# file (and JSON) at "\n" (a "\r" before it belongs to the break); in YAML (1.2) at a
# lone "\r" too. Never at the other characters str.splitlines breaks at (form feed,
# NEL, LS...), which no parser here counts: a line quoted under a diagnostic must be
# the line its number names.
LINE_BREAK = re.compile(r"\r?\n")
YAML_LINE_BREAK = re.compile(r"\r\n|[\r\n]")


@dataclass
class Sources:
    """Source text by file name, so diagnostics can quote the offending line."""

    texts: dict[str, list[str]] = field(default_factory=dict)

    def add(self, file: str, text: str, breaks: re.Pattern[str] = LINE_BREAK) -> None:
        self.texts[file] = breaks.split(text)

    def line(self, file: str, line: int) -> str:
        lines = self.texts.get(file, [])
        return lines[line - 1] if 0 < line <= len(lines) else ""


@dataclass
class Collector:
    """Accumulates diagnostics; `raise_if_any` fails closed at the end of a phase."""

    sources: Sources = field(default_factory=Sources)
    items: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)  # never fail a phase
    # What is already recorded, for the once-only check: a tree of old spellings warns
    # thousands of times, and a list scan per warning made loading quadratic.
    _seen: set[Diagnostic] = field(default_factory=set, repr=False, compare=False)

    def error(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        """Record a problem once: a rule expanded per repo reports the same one once."""
        source = self.sources.line(span.file, span.line)
        self._record(self.items, Diagnostic(code, message, span, source, hint))

    def warn(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        """Record a warning once: it is reported, but what it points at still loads."""
        source = self.sources.line(span.file, span.line)
        diagnostic = Diagnostic(code, message, span, source, hint, severity="warning")
        self._record(self.warnings, diagnostic)

    def _record(self, into: list[Diagnostic], diagnostic: Diagnostic) -> None:
        if diagnostic not in self._seen:
            self._seen.add(diagnostic)
            into.append(diagnostic)

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        for diagnostic in diagnostics:
            self._seen.add(diagnostic)
            self.items.append(diagnostic)

    def raise_if_any(self) -> None:
        if self.items:
            raise RulesError(self.items, self.warnings)


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A `did you mean 'x'?` hint for the closest choice, or None."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None
