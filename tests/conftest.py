"""Fixtures shared by every test layer."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

EngineRunner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_engine() -> EngineRunner:
    """Run the real `engine` command (`python -m engine ARGS`) as a subprocess in `cwd`."""

    def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "engine", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    return run


# ---- the runtime test tree: adapters, worker, reaper (tests/data/runtime) --------------
# Appended block with its own imports (E402): several people append to this file.

from collections.abc import Iterator  # noqa: E402

from engine.bootstrap import open_service  # noqa: E402
from engine.loading import Paths  # noqa: E402
from engine.service import Service  # noqa: E402

RUNTIME_TREE = ROOT / "tests" / "data" / "runtime"


@pytest.fixture
def runtime_paths() -> Paths:
    """Rules and registry of tests/data/runtime: command, fake and agent definitions."""
    return Paths(RUNTIME_TREE / "loops", RUNTIME_TREE / "registry", RUNTIME_TREE / "config")


@pytest.fixture
def runtime_service(
    tmp_path: Path, runtime_paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Service]:
    """A Service on a fresh SQLite file in tmp_path over the runtime test tree; the
    test scripts are found through RUNTIME_SCRIPTS (a declared env name)."""
    monkeypatch.setenv("RUNTIME_SCRIPTS", str(RUNTIME_TREE / "scripts"))
    service = open_service(str(tmp_path / "e.db"), runtime_paths)
    yield service
    service.rt.store.close()


# ---- a real `engine serve` on a free loopback port (tests/data/api) -------------------
# Appended block with its own imports (E402): several people append to this file.

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

API_TREE = ROOT / "tests" / "data" / "api"
EVENT_SECRET = "test-event-secret"
OPERATOR_TOKENS = {"alice": "alice-token", "bob": "bob-token"}
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# An instance config directory with neither repos.yaml nor schedule.yaml, for trees
# that have none (a --config that is given must exist).
NO_CONFIG = ROOT / "tests" / "data" / "no_config"


def tree_args(db: Path | str, tree: Path) -> list[str]:
    """The `--db` and rules options that point a command at a database and a tree."""
    config = tree / "config" if (tree / "config").is_dir() else NO_CONFIG
    return [
        "--db",
        str(db),
        "--rules",
        str(tree / "loops"),
        "--registry",
        str(tree / "registry"),
        "--config",
        str(config),
    ]


@dataclass
class Serve:
    """A running `engine serve` subprocess and a small JSON client for it."""

    process: subprocess.Popen[bytes]
    url: str
    db: Path | str  # a SQLite file or a PostgreSQL URL
    log: Path
    tree: Path
    env: dict[str, str] = field(default_factory=dict)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """(status, parsed JSON answer); `raw` sends bytes as they are."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        sent = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.url + path, data=data, headers=sent, method=method)
        try:
            with _NO_PROXY.open(req, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            with err:
                return err.code, json.loads(err.read())

    def wait_for(
        self, path: str, ready: Callable[[Any], bool], token: str, within: float = 10
    ) -> Any:
        """Poll a GET route until `ready(answer)`; the answer."""
        deadline = time.monotonic() + within
        while True:
            status, answer = self.request("GET", path, token=token)
            if status == 200 and ready(answer):
                return answer
            if time.monotonic() > deadline:
                raise AssertionError(f"GET {path} never got ready: {status} {answer}")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM, within: float = 15) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(within)

    def argv(self) -> list[str]:
        return tree_args(self.db, self.tree)

    def token(self, name: str) -> str:
        """The bearer token this runtime gives operator `name`."""
        pairs = dict(p.split(":", 1) for p in self.env["ENGINE_OPERATOR_TOKEN"].split(","))
        return pairs[name]


def launch_serve(
    workdir: Path, tree: Path = API_TREE, env: dict[str, str] | None = None, *args: str
) -> Serve:
    """Start `engine serve` on a fresh SQLite file in `workdir` and wait for GET /status.
    `env` replaces the default secrets (pass {} for none)."""
    secrets = {
        "ENGINE_EVENT_SECRET": EVENT_SECRET,
        "ENGINE_OPERATOR_TOKEN": ",".join(f"{k}:{v}" for k, v in OPERATOR_TOKENS.items()),
    }
    base = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    full = {**base, **(secrets if env is None else env)}
    port, db, log = free_port(), workdir / "engine.db", workdir / "serve.log"
    command = [sys.executable, "-m", "engine", "serve", "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, *tree_args(db, tree), *args],
            cwd=workdir,
            env=full,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    serve = Serve(process, f"http://127.0.0.1:{port}", db, log, tree, full)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if serve.request("GET", "/status")[0] == 200:
                return serve
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)
    serve.stop(signal.SIGKILL)
    raise AssertionError(f"engine serve did not start:\n{log.read_text()}")


@pytest.fixture
def serve_factory(tmp_path: Path) -> Iterator[Callable[..., Serve]]:
    """Start `engine serve` processes (see launch_serve); each is stopped afterwards."""
    started: list[Serve] = []

    def start(tree: Path = API_TREE, env: dict[str, str] | None = None, *args: str) -> Serve:
        workdir = tmp_path / f"serve{len(started)}"
        workdir.mkdir()
        started.append(launch_serve(workdir, tree, env, *args))
        return started[-1]

    yield start
    for serve in started:
        serve.stop(signal.SIGKILL)


@pytest.fixture(scope="module")
def api_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One `engine serve` over tests/data/api for a whole test module (with secrets)."""
    serve = launch_serve(tmp_path_factory.mktemp("api"))
    yield serve
    serve.stop()


@pytest.fixture(scope="module")
def shipped_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One `engine serve` over the shipped loops/ and registry/ for a whole test module."""
    serve = launch_serve(tmp_path_factory.mktemp("shipped"), ROOT)
    yield serve
    serve.stop()


# ---- `engine serve` placed in time, several starts on one database --------------------
# Appended block with its own imports (E402): several people append to this file.

import dataclasses  # noqa: E402
import itertools  # noqa: E402
import threading  # noqa: E402

SCHEDULING_TREE = ROOT / "tests" / "data" / "scheduling_acceptance"


class ServeClock:
    """Starts `engine serve` over one tree and one database (`db`: a PostgreSQL URL, else
    the SQLite file `workdir/engine.db`), each start with its clock placed by ENGINE_NOW
    and its own config directory; every process is killed on exit. Reuses `launch_serve`
    (a later `--db`/`--config` wins over the tree's), so each start keeps its own workdir
    and log."""

    def __init__(self, workdir: Path, tree: Path = SCHEDULING_TREE, db: str | None = None) -> None:
        self.workdir, self.tree = workdir, tree
        self.db = db or str(workdir / "engine.db")
        self.started: list[Serve] = []
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def start(
        self, now: str | None, *args: str, config: Path, env: dict[str, str] | None = None
    ) -> Serve:
        """A ready `engine serve` (operator alice:tok, event secret EVENT_SECRET) whose
        clock reads `now` at start (None: the system clock). Thread-safe."""
        workdir = self.workdir / f"serve{next(self._ids)}"
        workdir.mkdir()
        full = {
            "ENGINE_OPERATOR_TOKEN": "alice:tok",
            "ENGINE_EVENT_SECRET": EVENT_SECRET,
            **({"ENGINE_NOW": now} if now else {}),
            **(env or {}),
        }
        extra = ["--db", str(self.db), "--config", str(config), *args]
        serve = dataclasses.replace(launch_serve(workdir, self.tree, full, *extra), db=self.db)
        with self._lock:
            self.started.append(serve)
        return serve

    def __enter__(self) -> ServeClock:
        return self

    def __exit__(self, *exc: object) -> None:
        for serve in self.started:
            serve.stop(signal.SIGKILL)


@pytest.fixture(params=["sqlite", "postgresql"])
def serve_clock(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServeClock]:
    """A ServeClock over tests/data/scheduling_acceptance on a fresh database of each
    backend in turn."""
    db = open_database(request, request.param, tmp_path)
    with ServeClock(tmp_path, db=db) as clock:
        yield clock


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def module_serve_clock(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeClock]:
    """A ServeClock shared by a whole test module (one timeline that several tests read),
    once per backend."""
    workdir = tmp_path_factory.mktemp("clock")
    with ServeClock(workdir, db=open_database(request, request.param, workdir)) as clock:
        yield clock


# ---- the two backends: a SQLite file or a database on a throwaway PostgreSQL cluster ---
# Appended block with its own imports (E402): several people append to this file.

import databases  # noqa: E402


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[databases.Server]:
    """A PostgreSQL server for the session: ENGINE_TEST_POSTGRES_URL's, else a cluster
    the suite starts (skipped with the reason when the binaries are missing, failed
    instead under ENGINE_REQUIRE_POSTGRES=1)."""
    given = os.environ.get(databases.URL_ENV)
    if given:
        yield databases.Server(given)
        return
    cluster = databases.started_cluster()
    yield databases.Server(cluster.url)
    cluster.stop()


@pytest.fixture
def own_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[databases.Cluster]:
    """A PostgreSQL cluster of this test's own, which it may stop and start again (the
    session's shared one must stay up); the test runs in tmp_path, so a PostgreSQL
    store's artifacts (var/artifacts) go there."""
    monkeypatch.chdir(tmp_path)
    cluster = databases.started_cluster()
    yield cluster
    cluster.stop()


def open_database(request: pytest.FixtureRequest, backend: str, directory: Path) -> str:
    """A fresh database of `backend`: a SQLite file in `directory`, or a new database on
    the session's PostgreSQL server (dropped when the requesting scope ends)."""
    if backend == "sqlite":
        return str(directory / "engine.db")
    server: databases.Server = request.getfixturevalue("postgres_server")
    url = server.new_database()
    request.addfinalizer(lambda: server.drop(url))
    return url


@pytest.fixture(params=databases.BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database on each backend in turn (a SQLite path or a PostgreSQL URL)."""
    return open_database(request, request.param, tmp_path)


@pytest.fixture
def postgresql_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database on the session's PostgreSQL server (a URL)."""
    return open_database(request, "postgresql", tmp_path)


# ---- the contract suite's third store: the in-memory one --------------------------------
# Appended block: several people append to this file.


@pytest.fixture(params=databases.STORES)
def store_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database on each backend in turn (a SQLite path or a PostgreSQL URL), and
    then `databases.MEMORY`, which the contract suite opens as an in-memory store."""
    if request.param == databases.MEMORY:
        return databases.MEMORY
    return open_database(request, request.param, tmp_path)


# ---- the check cache: off unless a test turns it on -----------------------------------
# Appended block with its own imports (E402): several people append to this file.
# `engine check` would otherwise keep its cache in ./var of whatever directory a test
# runs it in (the golden trees among them); tests/acceptance/test_check_cache.py turns
# it on in directories of its own.

os.environ["ENGINE_CHECK_CACHE"] = "0"


# ---- the contract suite's stores --------------------------------------------------------
# Appended block with its own imports (E402): several people append to this file. Here,
# not in a tests/contract/conftest.py: a second module named `conftest` would shadow this
# one for every `from conftest import ...` of the test modules.

from databases import Factory  # noqa: E402

from engine.bootstrap import open_store as open_backend  # noqa: E402
from engine.store.memory import MemoryDatabase, MemoryStore  # noqa: E402
from engine.store.ports import Store  # noqa: E402


def stores(database: str) -> Iterator[Factory]:
    """Opens stores on `database` (one shared in-memory database for the memory store)
    until the generator is closed, then closes every one: each call another connection,
    as another process would open."""
    opened: list[Store] = []
    memory = MemoryDatabase()

    def factory() -> Store:
        store = MemoryStore(memory) if database == databases.MEMORY else open_backend(database)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def open_store(store_database: str) -> Iterator[Factory]:
    """Opens stores on the database under test (`store_database`)."""
    yield from stores(store_database)


@pytest.fixture
def open_pg_store(postgresql_database: str) -> Iterator[Factory]:
    """Like `open_store`, on PostgreSQL only: for what only a server backend allows."""
    yield from stores(postgresql_database)


# ---- bytecode is cached, as a user's Python caches it ----------------------------------
# Appended block with its own imports (E402): several people append to this file. With
# PYTHONDONTWRITEBYTECODE set (some machines set it for every shell), every `engine`
# subprocess of the suite compiled the whole package from source again, and pytest
# rewrote every test module's asserts again in each worker: on a fresh clone on two
# cores, the subprocess-level tests took twice as long (docs/testing.md#running-them).
# Caching bytecode changes nothing a test checks.


os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
