"""The check cache (docs/cli.md#engine-check): a check that reads parsed rule files and
checked schemas from var/cache/check says exactly what a check without it says, on
valid and invalid trees, whatever state the cache is in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import dsl.parser
from engine import check_cache
from engine.check_cache import CheckCache
from engine.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "rules"
CASES = sorted(p for kind in ("valid", "invalid") for p in (DATA / kind).iterdir() if p.is_dir())
Outcome = tuple[int, str, str]


@pytest.fixture(autouse=True)
def cache_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite turns the cache off (tests/conftest.py); these tests turn it on."""
    monkeypatch.delenv(check_cache.ENV, raising=False)
    monkeypatch.delenv("ENGINE_HOME", raising=False)


def tree_copy(case: Path, tmp_path: Path) -> Path:
    """A copy of a golden case to check from, so its var/ is the test's own."""
    tree = tmp_path / case.name
    shutil.copytree(case, tree)
    return tree


def shipped_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "shipped"
    for name in ("loops", "registry"):
        shutil.copytree(ROOT / name, tree / name)
    (tree / "config").mkdir()
    for example in (ROOT / "config").glob("*.example.yaml"):
        shutil.copy(example, tree / "config" / example.name.replace(".example", ""))
    return tree


def check(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *flags: str
) -> Outcome:
    """`engine check` run in `tree` (so the cache is `tree/var/cache/check`)."""
    monkeypatch.chdir(tree)
    options = ["--rules", "loops", "--registry", "registry"]
    if (tree / "config").is_dir():
        options += ["--config", "config"]
    code = main(["check", *flags, *options])
    out = capsys.readouterr()
    return code, out.out, out.err


def entries(tree: Path) -> list[Path]:
    folder = tree / "var" / "cache" / "check"
    return (
        sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []
    )


def no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any parse fail the test: a warm check must take every file from the cache."""

    def refuse(text: str, path: str) -> None:
        raise AssertionError(f"{path} was parsed, not read from the cache")

    monkeypatch.setattr(dsl.parser, "parse", refuse)


def both_outputs(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., list[Outcome]]:
    def run(*flags: str) -> list[Outcome]:
        return [check(tree, monkeypatch, capsys, *f, *flags) for f in ((), ("--json",))]

    return run


@pytest.mark.parametrize("case", CASES, ids=[f"{p.parent.name}/{p.name}" for p in CASES])
def test_a_warm_check_says_exactly_what_a_check_without_the_cache_says(
    case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every golden tree, valid and invalid: the same exit code, summary, digest and
    diagnostics (each quoting its line) without the cache, filling it, and from it."""
    tree = tree_copy(case, tmp_path)
    run = both_outputs(tree, monkeypatch, capsys)
    without = run("--no-cache")
    assert entries(tree) == []
    cold = run()
    if (tree / "registry").is_dir() and any(p.is_file() for p in tree.glob("loops/*.rules")):
        assert entries(tree), "the first check fills the cache"
    with monkeypatch.context() as patch:
        no_parsing(patch)
        warm = run()
    assert cold == without
    assert warm == without


def test_the_shipped_tree_checks_the_same_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = shipped_tree(tmp_path)
    run = both_outputs(tree, monkeypatch, capsys)
    without = run("--no-cache")
    assert without[0][0] == 0 and "digest: sha256:" in without[0][1]
    run()
    with monkeypatch.context() as patch:
        no_parsing(patch)
        assert run() == without


def test_the_variable_turns_the_cache_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = shipped_tree(tmp_path)
    monkeypatch.setenv(check_cache.ENV, "0")
    assert check(tree, monkeypatch, capsys)[0] == 0
    assert not (tree / "var").exists()


def test_an_edited_file_is_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cached file whose bytes change is parsed again: its new error is reported."""
    tree = shipped_tree(tmp_path)
    assert check(tree, monkeypatch, capsys)[0] == 0
    rule_file = sorted((tree / "loops").glob("*.rules"))[0]
    rule_file.write_text(rule_file.read_text() + "\nloop broken-{\n")
    code, _, err = check(tree, monkeypatch, capsys)
    assert code == 1
    assert f"loops/{rule_file.name}:" in err
    assert (code, err) == check(tree, monkeypatch, capsys, "--no-cache")[::2]


def corrupt(path: Path, how: int) -> None:
    data = path.read_bytes()
    if how == 0:
        path.write_bytes(data[: len(data) // 2])  # torn
    elif how == 1:
        middle = len(data) // 2  # one bit changed in the body
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 1]) + data[middle + 1 :])
    elif how == 2:
        path.write_bytes(b"")
    else:
        path.write_bytes(os.urandom(len(data)))


def test_corrupt_entries_are_ignored_and_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tree_copy(DATA / "invalid" / "multiple_errors", tmp_path)
    run = both_outputs(tree, monkeypatch, capsys)
    without = run("--no-cache")
    run()
    found = entries(tree)
    assert found
    for index, entry in enumerate(found):
        corrupt(entry, index % 4)
    assert run() == without
    with monkeypatch.context() as patch:
        no_parsing(patch)  # every entry was written whole again
        assert run() == without


def test_an_entry_of_another_fingerprint_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Entries written under another grammar, engine or library version have other
    names: a check after such a change parses again."""
    tree = shipped_tree(tmp_path)
    run = both_outputs(tree, monkeypatch, capsys)
    without = run("--no-cache")
    run()
    before = {p.name for p in entries(tree)}
    parsed: list[str] = []
    real_parse = dsl.parser.parse

    def counting(text: str, path: str) -> object:
        parsed.append(path)
        return real_parse(text, path)

    monkeypatch.setattr(check_cache, "fingerprint", lambda: b"another grammar")
    monkeypatch.setattr(dsl.parser, "parse", counting)
    assert run() == without
    assert parsed, "nothing was parsed after the fingerprint changed"
    assert {p.name for p in entries(tree)} - before


def sources(root: Path) -> Path:
    for package, names in check_cache._SOURCES:
        for name in names:
            (root / package).mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / package / name, root / package / name)
    return root


def test_the_fingerprint_follows_the_grammar_the_code_and_every_version(tmp_path: Path) -> None:
    root = sources(tmp_path)
    versions = {"engine": "1.0", "lark": "1.2.2", "jsonschema": "4.23.0"}
    seen = {check_cache.fingerprint_of(root, versions)}
    for name, version in versions.items():
        seen.add(check_cache.fingerprint_of(root, {**versions, name: version + ".1"}))
    for package, name in (("dsl", "rules.lark"), ("dsl", "parser.py"), ("dsl", "model.py")):
        file = root / package / name
        original = file.read_bytes()
        file.write_bytes(original + b"\n")
        seen.add(check_cache.fingerprint_of(root, versions))
        file.write_bytes(original)
    assert check_cache.fingerprint_of(root, versions) in seen
    assert len(seen) == 1 + len(versions) + 3


def test_a_var_that_cannot_be_written_leaves_the_check_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """var/ a file (nothing can be made under it), or a read-only file system under a
    filled cache: the check neither fails nor changes."""
    tree = tree_copy(DATA / "invalid" / "multiple_errors", tmp_path)
    run = both_outputs(tree, monkeypatch, capsys)
    without = run("--no-cache")
    (tree / "var").write_text("not a directory\n")
    assert run() == without
    (tree / "var").unlink()
    run()

    def read_only(*args: object, **kwargs: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(check_cache.tempfile, "mkstemp", read_only)
    monkeypatch.setattr(check_cache.os, "utime", read_only)
    filled = entries(tree)
    filled[0].unlink()  # one entry to write again, which fails
    assert run() == without
    assert entries(tree) == filled[1:]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file modes")
def test_a_read_only_cache_directory_is_read_and_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = shipped_tree(tmp_path)
    run = both_outputs(tree, monkeypatch, capsys)
    without = run("--no-cache")
    run()
    folder = tree / "var" / "cache" / "check"
    folder.chmod(0o500)
    try:
        with monkeypatch.context() as patch:
            no_parsing(patch)
            assert run() == without
    finally:
        folder.chmod(0o700)


def test_a_cache_directory_that_is_not_our_own_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A symbolic link in place of var/cache/check (it could lead anywhere) is neither
    read nor written; a directory of ours is made private (0700)."""
    tree = shipped_tree(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tree / "var" / "cache").mkdir(parents=True)
    (tree / "var" / "cache" / "check").symlink_to(elsewhere)
    run = both_outputs(tree, monkeypatch, capsys)
    without = run("--no-cache")
    assert run() == without
    assert list(elsewhere.iterdir()) == []
    (tree / "var" / "cache" / "check").unlink()
    (tree / "var" / "cache" / "check").mkdir(mode=0o755)
    run()
    assert ((tree / "var" / "cache" / "check").stat().st_mode & 0o777) == 0o700


def test_two_checks_at_once_share_the_cache(tmp_path: Path) -> None:
    """Two `engine check` processes filling one cache both report what one alone does."""
    tree = shipped_tree(tmp_path)
    argv = [sys.executable, "-m", "engine", "check", "--json", "--rules", "loops"]
    argv += ["--registry", "registry", "--config", "config"]
    env = {k: v for k, v in os.environ.items() if k not in (check_cache.ENV, "ENGINE_HOME")}
    alone = subprocess.run([*argv, "--no-cache"], cwd=tree, env=env, capture_output=True, text=True)
    for _ in range(2):
        both = [
            subprocess.Popen(argv, cwd=tree, env=env, stdout=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        outputs = [(p.communicate()[0], p.returncode) for p in both]
        assert outputs == [(alone.stdout, 0)] * 2
    assert not [p for p in (tree / "var" / "cache" / "check").iterdir() if p.name.startswith(".")]


def test_a_warm_check_does_not_import_the_parser(tmp_path: Path) -> None:
    """With every file in the cache, `engine check` neither builds the grammar nor
    imports Lark."""
    tree = shipped_tree(tmp_path)
    script = (
        "import sys\n"
        "from engine.cli.main import main\n"
        "options = ['--rules', 'loops', '--registry', 'registry', '--config', 'config']\n"
        "code = main(['check', *options])\n"
        "print(code, 'lark' in sys.modules, 'dsl.parser' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (check_cache.ENV, "ENGINE_HOME")}
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], cwd=tree, env=env, capture_output=True, text=True
        )
        for _ in range(2)
    ]
    assert runs[0].stdout.splitlines()[-1] == "0 True True"
    assert runs[1].stdout.splitlines()[-1] == "0 False False"


def test_the_cache_stays_bounded_and_keeps_what_was_used_last(tmp_path: Path) -> None:
    cache = CheckCache(tmp_path / "c", max_entries=8)
    for n in range(20):
        cache.put(f"entry-{n:02d}", n)
        os.utime(tmp_path / "c" / f"entry-{n:02d}", (1000 + n, 1000 + n))
    os.utime(tmp_path / "c" / "entry-00", (5000, 5000))  # used last
    stale = tmp_path / "c" / ".tmp-left-by-a-dead-check"
    stale.write_bytes(b"x")
    os.utime(stale, (0, 0))
    cache.prune()
    left = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert left == ["entry-00", *(f"entry-{n:02d}" for n in range(15, 20))]
    assert [CheckCache(tmp_path / "c").get(name) for name in left] == [0, 15, 16, 17, 18, 19]


def test_a_cache_bounded_by_bytes_drops_the_oldest(tmp_path: Path) -> None:
    cache = CheckCache(tmp_path / "c", max_bytes=10_000)
    for n in range(10):
        cache.put(f"entry-{n}", b"x" * 2000)
        os.utime(tmp_path / "c" / f"entry-{n}", (1000 + n, 1000 + n))
    cache.prune()
    left = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert sum(p.stat().st_size for p in (tmp_path / "c").iterdir()) <= 7_500
    assert left == [f"entry-{n}" for n in range(10 - len(left), 10)]
