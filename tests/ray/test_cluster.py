"""condukt.ray on a local two-node Ray cluster: handles, registry, placement, streams, failures."""

from __future__ import annotations

import os
import pickle
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from waiting import WallBound

import condukt
import condukt.ray
from condukt.sessions import SQLiteStore
from condukt.testing import FunctionModel, ScriptedModel, call, reply

pytestmark = pytest.mark.usefixtures("local_ray")


class Counter(condukt.Server):
    async def init(self, start: int = 0) -> None:
        self.n = start

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        if request == "get":
            return self.n
        if request == "self":
            return self.handle  # a local handle, pickled on the way out
        return await super().handle_call(request, caller)

    async def handle_cast(self, message: Any) -> None:
        self.n += message


class Follower(condukt.Server):
    """Linked to a process on another node: exits when it does (abnormally)."""

    async def init(self, leader: condukt.ray.ClusterHandle) -> None:
        condukt.ray.link(self, leader)


class Relay(condukt.Server):
    """Holds a handle of a process on another node (passed in as an argument) and calls it."""

    async def init(self, target: condukt.ray.ClusterHandle) -> None:
        self.target = target
        self.downs: list[tuple[Any, Any]] = []
        self.waiting: list[condukt.Caller] = []  # "first down" calls, answered at the first Down

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        if request == "downs":
            return self.downs
        if request == "first down":
            if self.downs:
                return self.downs
            self.waiting.append(caller)
            return condukt.NO_REPLY
        if isinstance(request, tuple) and request[0] == "whereis":  # the sync lookup, from a node
            cluster = condukt.ray.current_cluster()
            assert cluster is not None
            return cluster.whereis(request[1])
        if request == "watch":
            condukt.ray.monitor(self, self.target)
            return True
        return await self.target.call(request)

    async def handle_info(self, message: Any) -> None:
        if isinstance(message, condukt.Down):
            self.downs.append((message.handle, message.reason))
            for caller in self.waiting:
                caller.reply(self.downs)
            self.waiting.clear()


@condukt.tool
async def ask(agent: str, question: str) -> str:
    """Asks another agent of the cluster, wherever it runs.

    Args:
        agent: Its registered name.
        question: The question.
    """
    cluster = condukt.ray.current_cluster()
    assert cluster is not None
    handle = await cluster.lookup(agent)
    answer: str = await handle.run(question)
    return f"{agent} said {answer}"


def echo_last(request: condukt.ModelRequest) -> str:
    return "echo: " + request.messages[-1].text


async def test_two_nodes_placement_handles_registry_tools_and_streams() -> None:
    async with condukt.ray.open_cluster(nodes=2) as cluster:
        first, second = [info.id for info in await cluster.nodes()]

        # Placement: least loaded by process count.
        placed = [await cluster.spawn(Counter) for _ in range(6)]
        assert sorted(info.processes for info in await cluster.nodes()) == [3, 3]
        assert {handle.node_id for handle in placed} == {first, second}
        for handle in placed:
            await handle.stop()

        counter = await cluster.spawn(Counter, 5, name="counter", node=first)
        assert counter.node_id == first
        await counter.cast(2)
        assert await counter.call("get") == 7
        assert cluster.whereis("counter") == counter
        assert cluster.whereis("nobody") is None
        with pytest.raises(condukt.NameTaken):
            await cluster.spawn(Counter, name="counter", node=second)  # names are cluster-wide

        # A handle pickles to (node, id) and works from another node.
        assert pickle.loads(pickle.dumps(counter)) == counter
        assert await counter.call("self") == counter
        relay = await cluster.spawn(Relay, counter, node=second)
        assert await relay.call("get") == 7
        assert await relay.call(("whereis", "counter")) == counter

        # An agent on one node, asked from the driver, and by a tool of an agent on the other node.
        answerer = await cluster.spawn(condukt.Agent, name="answerer", node=first, model=FunctionModel(echo_last))
        assert await answerer.run("ping") == "echo: ping"
        with pytest.raises(AttributeError):
            answerer.running  # noqa: B018 - a synchronous property is not forwarded: ask with a call
        with pytest.raises(AttributeError):
            counter.run  # noqa: B018 - not an agent
        asker_model = ScriptedModel([call("ask", {"agent": "answerer", "question": "where?"}), reply("done")])
        asker = await cluster.spawn(condukt.Agent, node=second, model=asker_model, tools=[ask])
        assert await asker.run("go") == "done"
        history = await asker.history()
        assert "answerer said echo: where?" in [message.text for message in history]

        # Events stream across nodes, in order.
        async with answerer.stream("streamed words") as events:
            kinds = [type(event).__name__ async for event in events]
        assert events.result == "echo: streamed words"
        assert kinds[0] == "AgentStart" and kinds[-1] == "Done" and kinds.count("TextDelta") == 3

        # Leaving a remote stream early aborts the run on its node; the agent carries on.
        slow = await cluster.spawn(
            condukt.Agent, node=first, model=ScriptedModel([reply("never", delay=30), reply("after")])
        )
        with trio.fail_after(10):
            async with slow.stream("go") as events:
                async for event in events:
                    assert type(event).__name__ == "AgentStart"
                    break
            assert await slow.run("again") == "after"
        assert [message.text for message in await slow.history()] == ["again", "after"]
        await slow.stop()

        # Errors cross as the same exception; a stopped process is gone for everyone.
        with pytest.raises(condukt.CallError) as crashed:
            await relay.call("unknown")  # the relay's call crashed the counter, then the relay
        assert isinstance(crashed.value.reason, condukt.CallError)
        assert isinstance(crashed.value.reason.reason, condukt.UnhandledMessage)
        with pytest.raises(condukt.NoProc):
            await counter.call("get")
        with trio.fail_after(5):  # the name goes with it, released by the node just after the exit
            while cluster.whereis("counter") is not None:
                await trio.sleep(0.01)

        infos = {info.id: info for info in await cluster.nodes()}
        assert infos[first].processes == 1 and infos[second].processes == 1  # answerer, asker (the relay crashed)


async def test_a_lost_node_gives_noconnection_and_its_agent_returns_elsewhere_with_its_history(
    tmp_path: Path,
) -> None:
    # One file every node of this machine reaches; the lost node's lease on the key runs out after 2 s.
    store = SQLiteStore(tmp_path / "sessions.sqlite3", lease_ttl=2.0)
    async with condukt.ray.open_cluster(nodes=2) as cluster:
        doomed, survivor = await cluster.nodes()
        supervisor = await cluster.start_dynamic_supervisor()
        spec = condukt.ChildSpec(
            None,
            condukt.Agent,
            kwargs={"id": "keeper", "session_store": store, "model": FunctionModel(echo_last)},
            name="keeper",
            restart="permanent",
        )
        keeper = await supervisor.start_child(spec, node=doomed.id)
        assert await keeper.run("remember 42") == "echo: remember 42"
        watcher = await cluster.spawn(Relay, keeper, node=survivor.id)
        assert await watcher.call("watch")
        follower = await cluster.spawn(Follower, keeper, node=survivor.id)

        async with cluster.monitor(keeper) as monitor, cluster.monitor(follower) as follower_monitor:
            os.kill(doomed.pid, signal.SIGKILL)  # the node's actor process dies
            with trio.fail_after(30):
                down = await monitor.wait()
                follower_down = await follower_monitor.wait()
        assert (down.handle, down.reason) == (keeper, "noconnection")
        assert await cluster.lookup("keeper") != keeper  # the driver's monitor told the registry first
        assert (follower_down.handle, follower_down.reason) == (follower, "noconnection")  # the link
        with pytest.raises(condukt.ray.NodeDown):
            await keeper.call("anything")

        with trio.fail_after(30):
            while (back := await cluster.lookup("keeper")) is None:  # None while restarting
                await trio.sleep(0.05)
        assert back.node_id == survivor.id and back != keeper
        assert supervisor.children() == [back]
        assert [message.text for message in await back.history()] == ["remember 42", "echo: remember 42"]
        assert await back.run("again") == "echo: again"
        # The watcher's node heard of the loss on its own: the call is answered at its first Down.
        assert await watcher.call("first down", timeout=10) == [(keeper, "noconnection")]
        assert [info.id for info in await cluster.nodes()] == [survivor.id]


def reply_with_own_prompt(request: condukt.ModelRequest) -> str:
    return request.messages[-1].text.upper()


async def test_ten_thousand_agents_over_two_nodes_each_run_once() -> None:
    count = 10_000
    async with condukt.ray.open_cluster(nodes=2) as cluster:
        handles = await cluster.spawn_many(condukt.Agent, count, model=FunctionModel(reply_with_own_prompt))
        assert len(set(handles)) == count
        results: list[Any] = [None] * count

        async def run(start: int) -> None:
            for i in range(start, count, 64):
                results[i] = await handles[i].run(f"agent {i}")

        async with trio.open_nursery() as nursery:
            for start in range(64):
                nursery.start_soon(run, start)
        assert results == [f"AGENT {i}" for i in range(count)]
        loads = sorted(info.processes for info in await cluster.nodes())
        assert sum(loads) == count and loads[0] >= count // 3


class Holder(condukt.Server):
    """Holds ``"hold"`` calls unanswered; ``"block"`` blocks its node's trio thread for a while."""

    async def init(self) -> None:
        self.held: list[condukt.Caller] = []

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        if request == "hold":
            self.held.append(caller)
            return condukt.NO_REPLY
        if request == "pending":
            return [held.pending for held in self.held]
        if request == "block":
            time.sleep(1.5)  # the node can answer nothing meanwhile, not even a timeout
        return request


@pytest.mark.slow
async def test_a_cross_node_call_times_out_on_its_node_or_past_the_grace_when_the_node_hangs(
    monkeypatch: pytest.MonkeyPatch, wall_bound: WallBound
) -> None:
    monkeypatch.setattr("condukt.ray._handle.UNRESPONSIVE_GRACE", 0.5)
    async with condukt.ray.open_cluster(nodes=1) as cluster:
        holder = await cluster.spawn(Holder)
        with trio.fail_after(5), pytest.raises(condukt.CallTimeout, match="no reply from <Handle"):
            await holder.call("hold", timeout=0.2)  # the node's own timeout
        with trio.move_on_after(0.2):  # cancelled here: withdrawn on the node
            await holder.call("hold", timeout=None)
        with trio.fail_after(5):
            while await holder.call("pending") != [False, False]:
                await trio.sleep(0.05)
        # The driver gave up (its own error, naming the node) before the node woke after 1.5 s.
        with wall_bound(0.7, "a call past its 0.2 s timeout and the 0.5 s grace"), pytest.raises(
            condukt.CallTimeout, match="no reply from node .* within 0.7 s"
        ):
            await holder.call("block", timeout=0.2)
        with trio.fail_after(5):
            assert await holder.call("after") == "after"


async def test_a_node_can_run_trio_as_a_guest_on_its_actors_loop() -> None:
    async with condukt.ray.open_cluster(nodes=1, trio_host="guest") as cluster:
        counter = await cluster.spawn(Counter, 1, name="guest-counter")
        await counter.cast(2)
        assert await counter.call("get") == 3
        assert await counter.call("self") == counter
        async with cluster.monitor(counter) as monitor:
            await counter.stop("done")
            assert (await monitor.wait()).reason == "done"


async def test_bad_options_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="trio_host must be 'thread' or 'guest'"):
        async with condukt.ray.open_cluster(trio_host="fiber"):  # type: ignore[arg-type]
            pass
    async with condukt.ray.open_cluster(nodes=1) as cluster:
        with pytest.raises(ValueError, match="count must be >= 0"):
            await cluster.spawn_many(Counter, -1)
        on_a_node = pickle.loads(pickle.dumps(cluster))  # what a node gets
        with pytest.raises(condukt.ConduktError, match="cluster supervisors run in the driver"):
            await on_a_node.start_dynamic_supervisor()
        with pytest.raises(condukt.ConduktError, match="only the driver"):
            await on_a_node.add_node()
