"""Shell completion through argcomplete's protocol, as bash's completion function drives
`engine` (docs/cli.md#shell-completion): commands, actions and options complete."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def completions(line: str, tmp_path: Path) -> list[str]:
    """What `engine` answers for the command line `line` with the cursor at its end."""
    answer = tmp_path / "completions"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ENGINE_", "_ARC"))},
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "COMP_TYPE": "9",
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
    }
    subprocess.run([sys.executable, "-m", "engine"], cwd=ROOT, env=env, timeout=60, check=True)
    return answer.read_text().split("\n")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("engine sch", {"schedule"}),
        ("engine schedule pa", {"pause"}),
        ("engine journal --ent", {"--entity"}),
        ("engine runs --state fa", {"failed"}),
    ],
)
def test_the_shell_completes_commands_actions_and_options(
    line: str, expected: set[str], tmp_path: Path
) -> None:
    """Each partial word completes to the names that start with it."""
    found = {word.strip() for word in completions(line, tmp_path)}
    assert expected <= found
    assert all(word.startswith(line.split()[-1]) for word in found)
