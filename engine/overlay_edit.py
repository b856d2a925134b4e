"""Enabling and disabling a loop in the instance overlay `config/schedule.yaml`: the
I/O edge behind `engine schedule enable|disable`.

The file is edited with ruamel.yaml's round-trip mode, so the operator's comments,
key order and quoting stay as written. The edit is written atomically (a temporary
file, then `os.replace`), and the rules are loaded again with it: when they would no
longer load, the original bytes are put back and the edit is refused. A running
`engine serve` applies the change when it restarts."""

from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from dsl.diagnostics import RulesError, did_you_mean
from engine.errors import BadRequest, NotFound, Unprocessable
from engine.loading import Paths, load_rules
from engine.yaml_reader import round_trip

OVERLAY = "schedule.yaml"
HEADER = """\
# The instance schedule overlay (ignored by git), merged over the kernel loops in
# loops/*.rules. A kernel loop may change only: enabled, every (interval loops) and
# payload keys; a name that is not a kernel loop declares a complete new loop.
# `engine schedule enable|disable LOOP` edits this file and keeps your comments.
# See docs/scheduling.md.
schedules:
"""


@dataclass(frozen=True)
class Edit:
    loop: str
    enabled: bool
    changed: bool  # False when the loop already was in that state
    file: Path
    created: bool  # the overlay file did not exist

    def as_dict(self) -> dict[str, Any]:
        return {
            "loop": self.loop,
            "enabled": self.enabled,
            "changed": self.changed,
            "file": str(self.file),
            "created": self.created,
            "restartRequired": self.changed,
        }


def set_enabled(paths: Paths, loop: str, enabled: bool) -> Edit:
    """Write `enabled` for `loop` into the overlay. NotFound (with a did-you-mean) for a
    loop the rules do not declare; RulesError when the rules do not load as they are;
    Unprocessable, with the file unchanged, when the edit would make them invalid."""
    rules = load_rules(paths)
    if loop not in rules.loops:
        hint = did_you_mean(loop, rules.loops)
        raise NotFound(f"no loop '{loop}'" + (f"; {hint}" if hint else ""), reason="unknown_loop")
    file = paths.config / OVERLAY
    if rules.loops[loop].enabled == enabled:
        return Edit(loop, enabled, False, file, False)
    original = file.read_bytes() if file.is_file() else None
    text = _edited(original, loop, enabled, file)
    file.parent.mkdir(parents=True, exist_ok=True)
    _write(file, text.encode("utf-8"))
    try:
        load_rules(paths)
    except RulesError as err:
        _restore(file, original)
        action = "enabling" if enabled else "disabling"
        raise Unprocessable(
            f"{action} '{loop}' would make the rules invalid; {file} is unchanged",
            [err.render()],
            reason="invalid_after_edit",
        ) from None
    return Edit(loop, enabled, True, file, original is None)


def _edited(original: bytes | None, loop: str, enabled: bool, file: Path) -> str:
    """The overlay text with `schedules.<loop>.enabled` set, everything else kept."""
    yaml = round_trip()  # measured as every YAML file is read (engine.yaml_reader)
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap the operator's long lines
    source = original.decode("utf-8") if original and original.strip() else HEADER
    try:
        doc = yaml.load(source)
    except YAMLError as err:
        raise BadRequest(f"{file} is not valid YAML; fix it first ({err})") from None
    if doc is None:
        doc = yaml.load(source.rstrip("\n") + "\nschedules:\n")  # comments only: keep them
    if not isinstance(doc, dict):
        raise BadRequest(f"{file} must be a mapping with a 'schedules:' key")
    section = doc.get("schedules")
    if section is None:
        section = doc["schedules"] = CommentedMap()
    if not isinstance(section, dict):
        raise BadRequest(f"'schedules' in {file} must be a mapping")
    entry = section.get(loop)
    if entry is None:
        entry = section[loop] = CommentedMap()
    if not isinstance(entry, dict):
        raise BadRequest(f"'schedules.{loop}' in {file} must be a mapping")
    entry["enabled"] = enabled
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


def _write(file: Path, data: bytes) -> None:
    """Replace `file` atomically, keeping its permissions."""
    fd, temp = tempfile.mkstemp(prefix=f".{file.name}.", dir=file.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if file.exists():
            os.chmod(temp, file.stat().st_mode & 0o7777)
        os.replace(temp, file)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _restore(file: Path, original: bytes | None) -> None:
    if original is None:
        file.unlink(missing_ok=True)
    else:
        _write(file, original)
