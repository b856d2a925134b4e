"""`engine diagram`: placeholder registration until the machines module lands."""

from __future__ import annotations

from typing import Any


def register(sub: Any) -> None:
    return None
