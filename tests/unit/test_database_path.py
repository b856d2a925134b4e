"""Which database a command opens (engine.bootstrap.database_path, docs/cli.md#where-the-files-are):
an empty `--db` is a usage error, never a silent fall back to the default file."""

from __future__ import annotations

import pytest

from engine.bootstrap import database_path
from engine.errors import BadRequest


@pytest.mark.parametrize("given", ["", "  "])
def test_an_empty_db_option_is_refused(given: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGINE_DB", "/srv/engine/var/engine.db")
    with pytest.raises(BadRequest) as refused:
        database_path(given)
    assert refused.value.exit_code == 2 and "--db is empty" in refused.value.message


def test_no_option_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGINE_DATABASE_URL", raising=False)
    monkeypatch.setenv("ENGINE_DB", "/srv/engine/var/engine.db")
    assert database_path(None) == "/srv/engine/var/engine.db"
