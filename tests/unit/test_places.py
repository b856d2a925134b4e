"""Places (docs/rules.md#places), pure: a file is named by its root's layout name and
its path below the root, however the root and the file were given and wherever the
working directory is, and a recorded place reads back as the file it names, an older
engine's absolute or working-directory place as it was recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.places import Root, locate

parts = st.lists(st.from_regex(r"\A[a-z][a-z0-9_-]{0,8}\Z"), min_size=1, max_size=4)


def test_a_file_is_named_below_its_root_whatever_the_directory_is_called(tmp_path: Path) -> None:
    """`/…/team-rules/ci/web.rules` under the rules root `/…/team-rules` is
    `loops/ci/web.rules`; the registry's and the config's files by their own names."""
    assert Root("loops", tmp_path / "team-rules").name(tmp_path / "team-rules/ci/web.rules") == (
        "loops/ci/web.rules"
    )
    assert Root("registry", tmp_path / "reg").name(tmp_path / "reg/definitions.yaml") == (
        "registry/definitions.yaml"
    )
    assert Root("config", tmp_path).name(tmp_path / "schedule.yaml") == "config/schedule.yaml"


def test_the_working_directory_changes_no_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root given relative to the working directory and a file given absolute (or the
    other way round, or through `..`) name the file alike, from any working directory."""
    (tmp_path / "loops").mkdir()
    monkeypatch.chdir(tmp_path)
    relative = Root("loops", Path("loops"))
    absolute = Root("loops", tmp_path / "loops")
    assert relative.name(tmp_path / "loops" / "a.rules") == "loops/a.rules"
    assert absolute.name(Path("loops/a.rules")) == "loops/a.rules"
    monkeypatch.chdir("/")
    assert absolute.name(tmp_path / "loops" / "a.rules") == "loops/a.rules"
    roundabout = Root("loops", tmp_path / "elsewhere" / ".." / "loops")
    assert roundabout.name(tmp_path / "loops" / "a.rules") == "loops/a.rules"


@given(parts)
def test_a_place_reads_back_as_the_file_it_names(below: list[str]) -> None:
    """`locate` is the inverse of `name` for every file below a root, wherever the root
    has moved to since the place was recorded."""
    file = Path("/srv/old/rules").joinpath(*below)
    place = Root("loops", Path("/srv/old/rules")).name(file)
    assert place == "loops/" + "/".join(below)
    moved = (Root("registry", Path("/opt/reg")), Root("loops", Path("/opt/new")))
    assert locate(place, moved) == Path("/opt/new").joinpath(*below)


def test_an_older_engines_place_reads_as_it_was_recorded(tmp_path: Path) -> None:
    """An absolute or working-directory place (what an older engine recorded) names the
    path as written; a file outside its root is named as the working directory sees it."""
    roots = (Root("loops", tmp_path / "loops"),)
    assert locate("/abs/tests/data/web/loops/web.rules", roots) == Path(
        "/abs/tests/data/web/loops/web.rules"
    )
    assert locate("tests/data/web/loops/web.rules", roots) == Path("tests/data/web/loops/web.rules")
    assert (
        Root("loops", tmp_path / "loops").name(Path("/elsewhere/x.rules")) == "/elsewhere/x.rules"
    )
