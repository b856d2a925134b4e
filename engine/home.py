"""The instance directory (docs/deploy.md#the-instance-directory): one directory,
named by ENGINE_HOME (or `--home DIR`), that holds an installed engine's rules
(`loops/`), registry (`registry/`), configuration (`config/`) and everything the
engine writes (`var/`: the default SQLite database, run artifacts). A regular `pip
install` has no checkout beside it, so an installed engine is given one."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from engine.errors import ConfigError

HOME_ENV = "ENGINE_HOME"
LAYOUT = {"rules": "loops", "registry": "registry", "config": "config"}
VAR = "var"
DATABASE_FILE = "engine.db"


def named_home(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The instance directory ENGINE_HOME names (absolute), unchecked; None when unset."""
    value = environ.get(HOME_ENV, "")
    return Path(value).absolute() if value else None


def instance_home(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The instance directory, checked: ConfigError (exit 2) when ENGINE_HOME names
    something that is not a directory this process can read."""
    home = named_home(environ)
    if home is None:
        return None
    if not home.is_dir():
        what = "does not exist" if not home.exists() else "is not a directory"
        raise ConfigError(f"the instance directory {home} (--home or {HOME_ENV}) {what}")
    if not os.access(home, os.R_OK | os.X_OK):
        raise ConfigError(f"the instance directory {home} (--home or {HOME_ENV}) cannot be read")
    return home


def var_dir(home: Path | None) -> Path:
    """Where the engine writes: `<home>/var`, or `./var` without an instance directory."""
    return home / VAR if home is not None else Path(VAR)
