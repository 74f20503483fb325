"""Virtual agents on one node: node.agent(cls, key, ...), activation, passivation, faults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import condukt
from condukt.sessions import MemoryStore, SessionOwned, SQLiteStore, StoreUnavailable
from condukt.testing import FunctionModel


def echo_last(request: condukt.ModelRequest) -> str:
    return "echo: " + request.messages[-1].text


class Keyed(condukt.Server):
    """A keyed process that counts its activations (class-wide) and can fail or linger in init/terminate."""

    activations: dict[str, int] = {}
    failures_left = 0
    init_gate: trio.Event | None = None
    slow_exit = 0.0

    async def init(self, id: str, session_store: Any = None) -> None:  # noqa: A002 - the key, as agents take it
        cls = type(self)
        if cls.init_gate is not None:
            await cls.init_gate.wait()
        if cls.failures_left:
            cls.failures_left -= 1
            raise RuntimeError("init failed on purpose")
        cls.activations[id] = cls.activations.get(id, 0) + 1
        self.key = id

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        return (self.key, request)

    def needs_terminate(self) -> bool:
        return True

    async def terminate(self, reason: Any) -> None:
        await trio.sleep(type(self).slow_exit)


@pytest.fixture(autouse=True)
def fresh_keyed() -> None:
    Keyed.activations = {}
    Keyed.failures_left = 0
    Keyed.init_gate = None
    Keyed.slow_exit = 0.0


async def test_a_virtual_agent_activates_on_first_call_passivates_when_idle_and_comes_back_from_the_store(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryStore()
    async with condukt.open_node() as node:
        user = await node.agent(
            condukt.Agent, "user-42", model=FunctionModel(echo_last), session_store=store, passivate_after=10
        )
        assert user.active is None and node.process_count == 0  # nothing runs before the first call
        assert await user.run("remember 42") == "echo: remember 42"
        # Two leases: the activation's, and the agent's own on its session key.
        assert user.active is not None and sorted(store.held()) == ["condukt.virtual/user-42", "user-42"]
        await trio.sleep(30)
        assert user.active is None and store.held() == []  # passivated: stopped, lease released
        again = await node.agent(condukt.Agent, "user-42", model=FunctionModel(echo_last), session_store=store)
        assert again == user
        assert await again.run("again") == "echo: again"  # reactivated, by another handle for the key
        history = [message.text for message in await user.history()]
        assert history == ["remember 42", "echo: remember 42", "again", "echo: again"]


async def test_concurrent_first_calls_share_one_activation_and_calls_during_passivation_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with condukt.open_node() as node:
        handle = await node.agent(Keyed, "k", passivate_after=5)
        Keyed.init_gate = trio.Event()
        answers: list[Any] = []
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(lambda i=i: _append(answers, handle.call(i)))
            await trio.sleep(1)
            Keyed.init_gate.set()
        assert sorted(answers) == [("k", i) for i in range(20)] and Keyed.activations == {"k": 1}

        Keyed.slow_exit = 3.0  # passivation takes 3 s: calls in that window wait for the next activation
        await trio.sleep(6)  # due at 5 s, stopping until ~8 s
        assert handle.active is None
        assert await handle.call("during") == ("k", "during")
        assert Keyed.activations == {"k": 2}


async def _append(into: list[Any], call: Any) -> None:
    into.append(await call)


async def test_an_activation_failing_in_init_raises_to_the_caller_and_the_next_call_retries(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryStore()
    async with condukt.open_node() as node:
        handle = await node.agent(Keyed, "flaky", session_store=store)
        Keyed.failures_left = 1
        with pytest.raises(RuntimeError, match="init failed on purpose"):
            await handle.call("first")
        assert handle.active is None and store.held() == []  # nothing stuck: no process, no lease
        assert await handle.call("second") == ("flaky", "second")
        assert Keyed.activations == {"flaky": 1}


async def test_bad_keys_and_options_are_refused_with_typed_errors() -> None:
    async with condukt.open_node() as node:
        with pytest.raises(TypeError, match="key is a str, not int"):
            await node.agent(Keyed, 42)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="1 to 1024 characters, not 10240"):
            await node.agent(Keyed, "k" * 10_240)
        with pytest.raises(ValueError, match="1 to 1024 characters, not 0"):
            await node.agent(Keyed, "")
        with pytest.raises(ValueError, match="passivate_after must be a positive number"):
            await node.agent(Keyed, "k", passivate_after=-1)
        with pytest.raises(TypeError, match="id is its key"):
            await node.agent(Keyed, "k", id="other")
        assert node.process_count == 0


async def test_an_unreachable_store_fails_the_activation_with_its_error_and_starts_nothing() -> None:
    postgres = pytest.importorskip("condukt.sessions.postgres", reason="needs the [postgres] extra")
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = postgres.PostgresStore(f"postgresql://condukt@127.0.0.1:{port}/condukt", retry_for=0, connect_timeout=2)
    async with condukt.open_node() as node:
        handle = await node.agent(Keyed, "k", session_store=store)
        with pytest.raises(StoreUnavailable):
            await handle.call("x")
        assert node.process_count == 0 and handle.active is None


async def test_two_nodes_activating_one_key_at_once_activate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    results: list[Any] = []
    async with condukt.open_node() as first, condukt.open_node() as second:
        handles = [
            await first.agent(Keyed, "shared", session_store=SQLiteStore(path)),
            await second.agent(Keyed, "shared", session_store=SQLiteStore(path)),
        ]

        async def use(handle: Any) -> None:
            try:
                results.append(await handle.call("hello"))
            except SessionOwned as owned:
                results.append(owned)

        async with trio.open_nursery() as nursery:
            for handle in handles:
                nursery.start_soon(use, handle)
        answered = [result for result in results if not isinstance(result, SessionOwned)]
        refused = [result for result in results if isinstance(result, SessionOwned)]
        assert answered == [("shared", "hello")] and len(refused) == 1
        assert refused[0].key == "condukt.virtual/shared"
        assert Keyed.activations == {"shared": 1}
