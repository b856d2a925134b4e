"""Controllers (registry/controllers.yaml): the closed list of programs a work-bound
loop may wake to keep a work item moving (docs/rules.md#controllersyaml). This
module only defines and checks an entry's shape; `engine.loading` reads the file."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from engine.core.durations import parse_duration
from engine.core.registry import (
    NAME_PATTERN,
    PLACEHOLDER,
    _check_option_placeholder,
    _Frozen,
    env_names,
    timeout_within,
)

# The placeholders a controller's argv may use: the work item's id, and the file that
# holds the work's context (only when the context reaches the controller in a file).
CONTROLLER_PLACEHOLDERS = {
    "work_id": "the work item's id",
    "context_file": "the file holding the work's context (with `context: file`)",
}
CONTROLLER_TIMEOUT = "1h"
# How long a woken controller has to claim the work (`POST /work/{id}/continue`) before
# the wake counts as `controller_did_not_claim` (docs/work.md#waking-the-controller).
LAUNCH_RESERVATION = "5m"
CONTROLLER_TIMEOUT_MAX = 6 * 3600
TOKEN_ENV_PATTERN = r"^[A-Z][A-Z0-9_]*$"
# Programs that would read their commands from a string: an argv template is run
# without a shell, and never hands one a script.
SHELLS = frozenset(
    {"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "ash", "busybox"}
    | {"cmd", "cmd.exe", "powershell", "pwsh", "env"}
)
# Names the child's environment already gives a meaning to; a token must not hide in them.
RESERVED_ENV = frozenset({"PATH", "HOME", "LANG", "LC_ALL", "TZ", "PWD", "SHELL", "USER"})
SAFE_REPORT = "http"


class Controller(_Frozen):
    """A program a work-bound loop wakes (registry/controllers.yaml).

    `argv` is a closed template run without a shell: its first element is a fixed
    program (never a shell, never a placeholder), and a placeholder (`{work_id}`, or
    `{context_file}` with `context: file`) never chooses an option. The child receives
    its controller token only through the environment variable `token_env`, and
    reports back over HTTP (`report: http`: it calls POST /work/{id}/continue and
    /complete with that token); an entry without that safe way back does not load."""

    id: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    argv: tuple[str, ...] = Field(min_length=1)
    env: tuple[str, ...] = ()
    timeout: str = CONTROLLER_TIMEOUT
    context: Literal["stdin", "file"] = "stdin"
    token_env: str
    report: str | None = None
    launch_reservation: str = LAUNCH_RESERVATION

    @property
    def timeout_seconds(self) -> int:
        return parse_duration(self.timeout)

    @property
    def reservation_seconds(self) -> int:
        return parse_duration(self.launch_reservation)

    @field_validator("launch_reservation")
    @classmethod
    def _reservation(cls, value: str) -> str:
        return timeout_within(value)

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: str) -> str:
        return timeout_within(value, CONTROLLER_TIMEOUT_MAX, "a controller's timeout is at most 6h")

    @field_validator("token_env")
    @classmethod
    def _token_env(cls, value: str) -> str:
        if re.fullmatch(TOKEN_ENV_PATTERN, value) is None:
            raise ValueError(
                f"'{value}' is not an environment variable name (upper-case letters, "
                "digits and _, starting with a letter)"
            )
        if value in RESERVED_ENV or value.startswith("LD_"):
            raise ValueError(f"'{value}' already means something in the child's environment")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return env_names(value)

    @field_validator("report")
    @classmethod
    def _report(cls, value: str | None) -> str | None:
        if value is not None and value != SAFE_REPORT:
            raise ValueError(
                f"'{value}' is not a safe way to report back; the one is `report: http` "
                "(the controller calls POST /work/{id}/continue and /complete with its token)"
            )
        return value

    @field_validator("argv")
    @classmethod
    def _argv(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        program = value[0]
        if PLACEHOLDER.search(program):
            raise ValueError(f"argv[0] '{program}' is the program: it is fixed, not a placeholder")
        if program.rsplit("/", 1)[-1] in SHELLS:
            raise ValueError(
                f"argv[0] '{program}' is a shell or runs one; a controller's argv is run "
                "without a shell: name the program itself"
            )
        for item in value:
            _check_option_placeholder(item)
            for name in PLACEHOLDER.findall(item):
                if name not in CONTROLLER_PLACEHOLDERS:
                    known = ", ".join(f"{{{n}}}" for n in CONTROLLER_PLACEHOLDERS)
                    raise ValueError(f"argv placeholder '{{{name}}}' is not one of {known}")
        return value

    @model_validator(mode="after")
    def _fits(self) -> Controller:
        if self.report is None:
            raise ValueError(
                "a controller needs a safe way to report back: write `report: http` (it "
                "calls POST /work/{id}/continue and /complete with its own token)"
            )
        in_file = any("{context_file}" in item for item in self.argv)
        if self.context == "file" and not in_file:
            raise ValueError(
                "`context: file` hands the context in a file: put {context_file} in argv"
            )
        if self.context == "stdin" and in_file:
            raise ValueError("{context_file} belongs to `context: file`; this one reads stdin")
        if self.token_env in self.env:
            raise ValueError(f"'{self.token_env}' is the token's variable; it is not in `env`")
        if not 0 < self.reservation_seconds <= self.timeout_seconds:
            raise ValueError(
                f"launch_reservation {self.launch_reservation} is more than 0s and at most "
                f"the timeout ({self.timeout})"
            )
        return self
