"""A real multi-node Ray cluster: a head and a worker started with ``ray start``, each with its own raylet.

The worker's raylet is SIGKILLed (a machine lost): monitors get
``noconnection``, its names are released, and a permanent agent comes back
on the head's node from PostgreSQL (no shared directory) with its history.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import condukt
import condukt.ray
from condukt.testing import FunctionModel

ray = pytest.importorskip("ray", reason="condukt.ray needs the [ray] extra (pip install '.[test]' brings it)")
pytest.importorskip("psycopg", reason="PostgresStore needs the [postgres] extra (pip install '.[test]' brings it)")

from condukt.sessions.postgres import PostgresStore  # noqa: E402
from condukt.testing.postgres import PostgresNotFound, PostgresServer  # noqa: E402

#: Ray's node health checks, tightened so a lost raylet is declared dead within seconds.
HEALTH = {
    "RAY_health_check_initial_delay_ms": "0",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "4",
    # A worker process slow to start on a loaded machine must not fail the actor placed on it.
    "RAY_worker_register_timeout_seconds": "600",
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _ports() -> list[str]:
    """Every port a Ray node would otherwise take at a fixed default (other Rays may run on this machine)."""
    options = [
        "--node-manager-port",
        "--object-manager-port",
        "--dashboard-agent-listen-port",
        "--dashboard-agent-grpc-port",
        "--metrics-export-port",
        "--runtime-env-agent-port",
    ]
    return [f"{option}={_free_port()}" for option in options]


@attrs.frozen
class RayNodes:
    address: str
    head: str  # Ray node ids
    worker: str
    temp: Path

    def worker_raylet(self) -> int:
        """The OS pid of the worker node's raylet."""
        for pid in _pids_under(self.temp):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if cmdline and cmdline[0].endswith(b"/raylet") and b"--node_ip_address=127.0.0.2" in cmdline:
                return pid
        raise AssertionError("the worker's raylet is not running")


def _pids_under(temp: Path) -> list[int]:
    """The processes this test's Ray started: their command lines name its temporary directory."""
    found = []
    marker = str(temp).encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if marker in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


def _ray_start(*args: str, env: dict[str, str]) -> None:
    ray_cli = Path(sys.executable).with_name("ray")
    done = subprocess.run([str(ray_cli), "start", *args], env=env, capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise AssertionError(f"ray start {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


@pytest.fixture
def two_ray_nodes() -> Iterator[RayNodes]:
    """A head and a worker (127.0.0.2) Ray node on this machine, each its own raylet, small, stopped afterwards."""
    was_initialized = ray.is_initialized()
    if was_initialized:  # this process's local Ray of the other cluster tests: a driver joins one Ray at a time
        condukt.ray.shutdown()
    temp = Path(tempfile.mkdtemp(prefix="cdk", dir="/tmp"))  # short: Ray's socket paths live under it
    env = {
        **os.environ,
        **HEALTH,
        "RAY_AUTH_MODE": "disabled",
        "PYTHONPATH": os.pathsep.join(entry for entry in sys.path if entry),
    }
    port = _free_port()
    small = ["--num-cpus=1", "--object-store-memory=80000000", "--disable-usage-stats", "--include-log-monitor=false"]
    before = dict(os.environ)
    try:
        _ray_start(
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            f"--temp-dir={temp}",
            "--include-dashboard=false",
            *small,
            *_ports(),
            env=env,
        )
        _ray_start(
            f"--address=127.0.0.1:{port}", "--node-ip-address=127.0.0.2", f"--temp-dir={temp}", *small, *_ports(),
            env=env,
        )  # fmt: skip
        os.environ.update({"RAY_AUTH_MODE": "disabled", **HEALTH})
        condukt.ray.init(f"127.0.0.1:{port}", configure_logging=False)
        alive = [node for node in ray.nodes() if node["Alive"]]
        workers = [node["NodeID"] for node in alive if node["NodeManagerAddress"] == "127.0.0.2"]
        heads = [node["NodeID"] for node in alive if node["NodeManagerAddress"] != "127.0.0.2"]
        assert len(workers) == len(heads) == 1, alive
        assert ray.get_runtime_context().get_node_id() == heads[0]  # the driver is the head's
        yield RayNodes(f"127.0.0.1:{port}", heads[0], workers[0], temp)
    finally:
        condukt.ray.shutdown()
        for pid in _pids_under(temp):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp, ignore_errors=True)
        os.environ.clear()
        os.environ.update(before)
        if was_initialized:
            condukt.ray.init()


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        server.start()
    except PostgresNotFound as exc:
        pytest.skip(f"PostgreSQL cannot run here: {exc}")
    try:
        yield server
    finally:
        server.remove()


def echo_last(request: condukt.ModelRequest) -> str:
    return "echo: " + request.messages[-1].text


class Watcher(condukt.Server):
    """Monitors and links ``target`` with the plain APIs (trapping exits); answers when both signals came."""

    async def init(self, target: Any) -> None:
        self.trap_exits = True
        self.monitor(target)
        self.link(target)
        self.seen: list[tuple[str, Any, Any]] = []
        self.waiting: list[condukt.Caller] = []

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        if len(self.seen) >= 2:
            return self.seen
        self.waiting.append(caller)
        return condukt.NO_REPLY

    async def handle_info(self, message: Any) -> None:
        if isinstance(message, condukt.Down | condukt.Exit):
            self.seen.append((type(message).__name__, message.handle, message.reason))
        if len(self.seen) >= 2:
            for caller in self.waiting:
                caller.reply(self.seen)
            self.waiting.clear()


class Named(condukt.Server):
    pass


async def _until(check: Any) -> Any:
    """Ask the cluster until ``check`` returns something (the registry hears of a lost node in the background)."""
    with trio.fail_after(60):
        while (found := await check()) is None:
            await trio.sleep(0.1)
    return found


#: Set in the interpreter that runs the test itself (see the test below).
CHILD = "CONDUKT_MULTINODE_CHILD"


@pytest.mark.xfail(
    reason="issue 38, open: on this 2-core machine the node actor's Ray worker on the fresh `ray start` nodes "
    "often exits with SYSTEM_ERROR at actor start, so add_node raises NodeDown (2026-12-03: 1 pass in 2 runs "
    "from an editable checkout, 0 in 2 from a fresh clone's CI). Not yet explained.",
    strict=False,
)
def test_a_lost_raylet_gives_noconnection_releases_names_and_its_agent_returns_from_postgres() -> None:
    """Runs the test in a fresh interpreter: a driver joins one Ray per process, and this
    package's other tests have connected this one to a local Ray already (joining a second
    Ray after that made the node actors die at start)."""
    if os.environ.get(CHILD):
        pytest.skip("the child runs the test itself")
    test = f"{__file__}::lost_raylet"
    command = [sys.executable, "-m", "pytest", test, "-q", "-p", "no:cacheprovider", "-o", "python_functions=lost_*"]
    for attempt in (1, 2):
        done = subprocess.run(command, env={**os.environ, CHILD: "1"}, capture_output=True, text=True, timeout=1200)
        # A Ray worker that crashes while the two fresh Ray nodes bring up their first actors (Ray's
        # "Worker unexpectedly exits ... SYSTEM_ERROR", seen on this 2-core machine under load) fails
        # add_node before anything of the test happened: that setup is tried once more. A failure
        # anywhere after the nodes are up fails the test at once.
        setup_failed = "in lost_raylet\n" in done.stdout and "await cluster.add_node(" in done.stdout
        if done.returncode == 0 or not setup_failed or attempt == 2:
            break
    assert done.returncode == 0, done.stdout[-20_000:] + done.stderr[-5_000:]
    assert done.stdout.lstrip().startswith("."), done.stdout  # the child ran the test (not skipped)


async def lost_raylet(two_ray_nodes: RayNodes, postgres: PostgresServer) -> None:
    store = PostgresStore(postgres.dsn, lease_ttl=2.0)  # the only thing the nodes share
    async with condukt.ray.open_cluster(two_ray_nodes.address, nodes=0) as cluster:
        head = await cluster.add_node(ray_node=two_ray_nodes.head)
        worker = await cluster.add_node(ray_node=two_ray_nodes.worker)
        pids = {info.id: info.pid for info in await cluster.nodes()}
        assert pids[head] != pids[worker]

        supervisor = await cluster.start_dynamic_supervisor()
        spec = condukt.ChildSpec(
            None,
            condukt.Agent,
            kwargs={"id": "keeper", "session_store": store, "model": FunctionModel(echo_last)},
            name="keeper",
            restart="permanent",
        )
        keeper = await supervisor.start_child(spec, node=worker)
        assert keeper.node_id == worker
        assert await keeper.run("remember 42") == "echo: remember 42"
        named = await cluster.spawn(Named, name="on-the-worker", node=worker)
        key = [f"user-{i}" for i in range(100) if await cluster.node_for(f"user-{i}") == worker][0]
        virtual = await cluster.agent(condukt.Agent, key, model=FunctionModel(echo_last), session_store=store)
        assert await virtual.run("I am virtual") == "echo: I am virtual"  # activated on the worker
        watcher = await cluster.spawn(Watcher, keeper, node=head)

        async with cluster.monitor(keeper) as keeper_down, cluster.monitor(named) as named_down:
            os.kill(two_ray_nodes.worker_raylet(), signal.SIGKILL)
            with trio.fail_after(120):
                assert (await keeper_down.wait()).reason == "noconnection"
                assert (await named_down.wait()).reason == "noconnection"
                seen = await watcher.call("signals", timeout=120)
        assert sorted(seen) == [("Down", keeper, "noconnection"), ("Exit", keeper, "noconnection")]
        assert await cluster.lookup("on-the-worker") is None
        assert [info.id for info in await cluster.nodes()] == [head]

        back = await _until(lambda: cluster.lookup("keeper"))
        assert back.node_id == head and back != keeper
        assert [message.text for message in await back.history()] == ["remember 42", "echo: remember 42"]
        assert await back.run("again") == "echo: again"
        assert supervisor.children() == [back]

        # The virtual agent is activated again on the head at its next call, from PostgreSQL
        # (once the lost node's lease on the key has run out).
        assert await cluster.node_for(key) == head
        assert await virtual.run("still there?") == "echo: still there?"
        history = [message.text for message in await virtual.history()]
        assert history == ["I am virtual", "echo: I am virtual", "still there?", "echo: still there?"]

    # The history is in PostgreSQL, not on either machine.
    snapshot = await store.load("keeper")
    assert snapshot is not None
    assert [message.text for message in snapshot.messages] == ["remember 42", "echo: remember 42", "again", "echo: again"]
    await store.aclose()
