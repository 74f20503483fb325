"""condukt from asyncio: trio as a guest on the asyncio loop, cancellation both ways.

These tests are plain functions that call ``asyncio.run`` themselves, as an
asyncio service would; the server test runs uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import gc
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from waiting import TIMEOUT, WallBound, open_fifo_asyncio

import condukt
import condukt.asyncio as ca
from condukt.events import Done, TextDelta
from condukt.messages import AssistantMessage, TextBlock, Usage
from condukt.providers import ProviderUnavailable
from condukt.testing import FunctionModel, ScriptedModel, call, reply
from tests.web.helpers import uvicorn_server


@pytest.fixture(params=["guest", "thread"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test that takes it runs with trio as a guest on the loop, then with trio in its own thread."""
    if request.param == "thread":
        monkeypatch.setattr(ca, "open_node", functools.partial(ca.open_node, thread=True))
    mode: str = request.param
    return mode


def test_spawn_run_stream_and_history_under_asyncio_run(mode: str) -> None:
    async def main() -> tuple[Any, ...]:
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("hello"), reply("streamed")]))
            text = await agent.run("hi")
            async with agent.stream("go") as events:
                kinds = [type(event).__name__ async for event in events]
            history = await agent.history()
            return text, kinds, events.result, len(history), agent.alive, await node.whereis("nobody")

    text, kinds, result, turns, alive, missing = asyncio.run(main())
    assert (text, result, turns, alive, missing) == ("hello", "streamed", 4, True, None)
    assert kinds == ["AgentStart", "TurnStart", "TextDelta", "TurnEnd", "AgentEnd", "Done"]


def test_a_virtual_agent_from_asyncio_activates_on_its_first_call_and_keeps_its_history(mode: str) -> None:
    async def main() -> tuple[Any, ...]:
        store = condukt.sessions.MemoryStore()
        async with ca.open_node() as node:
            user = await node.agent(condukt.Agent, "user-7", model=ScriptedModel([reply("one"), reply("two")]),
                                    session_store=store)
            idle = user.active
            first = await user.run("hi")
            await user.stop()  # passivated: the next call activates it again, from the store
            second = await user.run("again")
            active = user.active
            assert isinstance(active, ca.AgentHandle)
            history = await active.history()
            return idle, first, second, user.key, len(history)

    # The second activation came back from the store with the first exchange: four messages.
    assert asyncio.run(main()) == (None, "one", "two", "user-7", 4)


def test_200_concurrent_runs(mode: str) -> None:
    async def main() -> list[str]:
        async with ca.open_node() as node:
            agents = [await node.spawn(condukt.Agent, model=ScriptedModel([reply(f"r{i}")])) for i in range(200)]
            return list(await asyncio.gather(*(agent.run("go") for agent in agents)))

    assert asyncio.run(main()) == [f"r{i}" for i in range(200)]


class SignalsDone(condukt.Agent):
    """Calls ``options["on_done"]()`` at each run's ``Done`` event, when the run's history is final.

    From the agent's trio task: with trio in a thread of its own (``mode``
    "thread"), ``on_done`` must be thread-safe (``loop.call_soon_threadsafe``).
    """

    extra_options = frozenset({"on_done"})

    async def init(self, options: Mapping[str, Any]) -> None:
        self.on_done: Callable[[], object] = options["on_done"]

    async def handle_event(self, event: Any) -> None:
        if isinstance(event, Done):
            self.on_done()


def done_event() -> tuple[asyncio.Event, Callable[[], object]]:
    """An asyncio event, and a function any thread may call to set it."""
    done = asyncio.Event()
    return done, functools.partial(asyncio.get_running_loop().call_soon_threadsafe, done.set)


@pytest.mark.slow
def test_an_asyncio_timeout_aborts_the_run_and_kills_its_subprocess(
    tmp_path: Path, process_gone: Callable[[int], bool], mode: str, wall_bound: WallBound
) -> None:
    pid_file = tmp_path / "pid"
    command = f"echo $$ > {pid_file} && exec sleep 600"

    async def main() -> tuple[int, Any, bool]:
        done, on_done = done_event()
        async with ca.open_node() as node, open_fifo_asyncio(pid_file) as pids:
            model = ScriptedModel([call("bash", {"command": command}), reply("never")])
            agent = await node.spawn(SignalsDone, model=model, tools=[condukt.tools.Bash], cwd=tmp_path, on_done=on_done)
            run = asyncio.ensure_future(agent.run("go"))
            pid = int(await pids.readline())  # the tool's process runs
            with wall_bound(2.0, "an asyncio timeout ending the run"), pytest.raises(TimeoutError):
                await asyncio.wait_for(run, 0.1)
            await done.wait()  # the agent aborts the run right after the caller left
            history = await agent.history()
            return pid, history, agent.alive

    pid, history, alive = asyncio.run(main())
    assert process_gone(pid)
    assert history == ()  # the aborted run left nothing
    assert alive


def test_a_trio_side_error_arrives_as_the_same_exception(mode: str) -> None:
    def down(request: Any) -> Any:
        raise ProviderUnavailable("x", "down", status_code=503)

    async def main() -> None:
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=FunctionModel(down))
            with pytest.raises(ProviderUnavailable, match="down"):
                await agent.run("go")
            with pytest.raises(ValueError, match="max_turns"):
                await node.spawn(condukt.Agent, model=ScriptedModel([]), max_turns=0)
            with pytest.raises(TypeError):
                await agent.run(42)
            assert agent.alive

    asyncio.run(main())


@pytest.mark.slow
def test_leaving_a_stream_early_aborts_the_run(mode: str, wall_bound: WallBound) -> None:
    async def slow(request: Any) -> Any:
        await trio.sleep(30)
        return "late"

    async def main() -> Any:
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=FunctionModel(slow))
            with wall_bound(5.0, "leaving a stream whose model answers after 30 s"):
                async with agent.stream("go") as events:
                    async for event in events:
                        if type(event).__name__ == "TurnStart":
                            break
            return await agent.history(), agent.running

    history, running = asyncio.run(main())
    assert history == () and running is False


def test_nodes_on_one_loop_share_one_trio_run_and_one_shots_work(mode: str) -> None:
    async def main() -> tuple[str, str, str]:
        async with ca.open_node() as first, ca.open_node() as second:
            a = await first.spawn(condukt.Agent, model=ScriptedModel([reply("one")]))
            b = await second.spawn(condukt.Agent, model=ScriptedModel([reply("two")]))
            texts = await asyncio.gather(a.run("go"), b.run("go"))
        shot = await ca.run("once", model=ScriptedModel([reply("shot")]))
        return texts[0], texts[1], shot

    assert asyncio.run(main()) == ("one", "two", "shot")


def test_cancelling_the_task_never_leaks_trio_cancelled(mode: str) -> None:
    async def never(request: Any) -> Any:
        await trio.sleep_forever()

    async def main() -> BaseException | None:
        async with ca.open_node() as node:
            model = FunctionModel(never)
            agent = await node.spawn(condukt.Agent, model=model)
            task = asyncio.ensure_future(agent.run("go"))
            await node.call_in_trio(model.wait_for_requests)  # the run is under way
            task.cancel()
            try:
                await task
            except BaseException as exc:  # noqa: BLE001 - what escapes is the point
                return exc
        return None

    escaped = asyncio.run(main())
    assert isinstance(escaped, asyncio.CancelledError)


@pytest.fixture
def uvicorn_app() -> Iterator[str]:
    """A Starlette app on uvicorn (127.0.0.1), whose lifespan opens a condukt node; its URL."""
    from starlette import applications as starlette_apps
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    state: dict[str, Any] = {}

    async def run(request: Request) -> JSONResponse:
        body = await request.json()
        session = body.get("session")
        agent = state["sessions"].get(session)
        if agent is None:
            model = FunctionModel(lambda r: f"turn {len(r.messages) // 2 + 1}: {r.messages[-1].text}")
            agent = await state["node"].spawn(condukt.Agent, model=model)
            session = agent.session_id
            state["sessions"][session] = agent
        return JSONResponse({"session": session, "text": await agent.run(body["prompt"])})

    async def stream(request: Request) -> StreamingResponse:
        agent = await state["node"].spawn(condukt.Agent, model=ScriptedModel([reply("streamed words")]))

        async def lines() -> Any:
            async with agent.stream("go") as events:
                async for event in events:
                    yield f"event: {type(event).__name__}\n\n"

        return StreamingResponse(lines(), media_type="text/event-stream")

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with ca.open_node() as node:
            state["node"], state["sessions"] = node, {}
            yield

    app = starlette_apps.Starlette(
        routes=[Route("/run", run, methods=["POST"]), Route("/stream", stream)], lifespan=lifespan
    )
    with uvicorn_server(app) as url:
        yield url


def test_under_uvicorn_a_session_continues_and_streams(uvicorn_app: str) -> None:
    with httpx.Client(base_url=uvicorn_app, timeout=10) as client:
        first = client.post("/run", json={"prompt": "hello"}).json()
        second = client.post("/run", json={"prompt": "again", "session": first["session"]}).json()
        assert first["text"] == "turn 1: hello"
        assert second == {"session": first["session"], "text": "turn 2: again"}
        streamed = client.get("/stream").text
    assert "event: TextDelta" in streamed and streamed.rstrip().endswith("event: Done")


def test_one_shots_default_to_the_enclosing_node_then_the_loops_default() -> None:
    def where(seen: list[Any]) -> FunctionModel:
        def answer(request: Any) -> Any:
            seen.append(condukt.current_node())
            return reply("ok")

        return FunctionModel(answer)

    async def main() -> None:
        assert await ca.current_node() is None
        async with ca.open_node() as node:
            seen: list[Any] = []
            await ca.run("q", model=where(seen))
            assert seen == [node.inner] and await ca.current_node() is node
        async with ca.open_node(default=True) as app_node:

            async def elsewhere() -> list[Any]:  # a task that did not enter the block, as a request handler
                seen: list[Any] = []
                await ca.run("q", model=where(seen))
                return seen

            task = asyncio.get_running_loop().create_task(elsewhere(), context=contextvars.Context())
            assert await task == [app_node.inner]
        assert await ca.current_node() is None

    asyncio.run(main())


def test_a_thread_backed_node_serves_loops_that_come_and_go(tmp_path: Path) -> None:
    """Where every request runs on a loop of its own (Django's runserver): one node, opened once, used by each."""
    opened: list[Any] = []
    ready = threading.Event()
    close = threading.Event()

    async def hold() -> None:  # the application's lifetime, on a loop of its own
        async with ca.open_node(thread=True) as node:
            opened.append(node)
            ready.set()
            await asyncio.get_running_loop().run_in_executor(None, close.wait)

    holder = threading.Thread(target=asyncio.run, args=(hold(),))
    holder.start()
    try:
        assert ready.wait(TIMEOUT), "the node did not open"
        node = opened[0]

        async def request(i: int) -> tuple[str, str]:
            agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply(f"answer {i}")]))
            try:
                return await agent.run("go"), await ca.run("once", model=ScriptedModel([reply("shot")]), node=node)
            finally:
                await agent.stop()

        assert [asyncio.run(request(i)) for i in range(3)] == [(f"answer {i}", "shot") for i in range(3)]
    finally:
        close.set()
        holder.join(10)
    assert not holder.is_alive()


def test_call_in_trio_runs_trio_code_next_to_the_node() -> None:
    async def on_trio(handle: condukt.Handle, delay: float) -> tuple[Any, bool]:
        await trio.sleep(delay)  # a trio-only call works here
        return await handle.call("ping"), condukt.current_node() is not None

    class Pong(condukt.Server):
        async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
            return ("pong", request)

    async def main() -> tuple[Any, bool]:
        async with ca.open_node() as node:
            handle = await node.spawn(Pong)
            result: tuple[Any, bool] = await node.call_in_trio(on_trio, handle.inner, 0.01)
            return result

    assert asyncio.run(main()) == (("pong", "ping"), False)


class _IOWaits(trio.abc.Instrument):
    """Records the timeout of each wait for I/O of a trio run: 0 is a tick that stays on the loop."""

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    def before_io_wait(self, timeout: float) -> None:
        self.timeouts.append(timeout)


async def _nothing() -> None:
    pass


def test_calls_made_right_away_enter_trio_without_waking_it_and_an_idle_node_stops_lingering() -> None:
    async def main() -> tuple[list[float], list[float], list[float]]:
        waits = _IOWaits()
        async with ca.open_node() as node:
            await node.call_in_trio(_add_instrument, waits)
            start = len(waits.timeouts)
            for _ in range(20):  # one after another: each call arrives while trio still lingers
                await node.call_in_trio(_nothing)
            during = waits.timeouts[start:]
            answered = len(waits.timeouts)
            for _ in range(50):  # nobody calls: the loop goes on turning
                await asyncio.sleep(0)
            after = waits.timeouts[answered:]
            before_leaving = list(waits.timeouts)
            await node.call_in_trio(_remove_instrument, waits)
        return during, after, before_leaving

    during, after, before_leaving = asyncio.run(main())
    assert during and all(timeout == 0 for timeout in during)  # trio never went idle between the calls
    # After the last answer trio stays runnable for at most LINGER_TICKS ticks, then waits
    # for I/O with a real timeout (in its thread), and 50 turns of the loop cost no more ticks.
    assert after[-1] > 0
    assert sum(1 for timeout in after if timeout == 0) <= ca.LINGER_TICKS
    assert len(after) <= ca.LINGER_TICKS + 1
    assert before_leaving[-1] > 0


class _SlowModel:
    """Answers after ``delay`` seconds of trio sleep: a model waiting for I/O."""

    name = "slow"

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        await trio.sleep(self.delay)
        return AssistantMessage((TextBlock("done"),), Usage(1, 1), "end_turn")


def test_runs_from_asyncio_that_wait_for_io_let_trio_wait_too() -> None:
    """A run is started without a task of its own; while it waits, nothing keeps trio ticking."""

    async def main() -> tuple[list[float], list[str], bool]:
        waits = _IOWaits()
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=_SlowModel(0.2))
            await node.call_in_trio(_add_instrument, waits)
            start = len(waits.timeouts)
            answers = [await agent.run("go") for _ in range(3)]  # each follows an answer: trio lingers
            during = waits.timeouts[start:]
            with pytest.raises(ValueError, match="timeout"):  # checked at the start, raised here
                await agent.run("go", timeout=-1)
            alive = agent.alive
            await node.call_in_trio(_remove_instrument, waits)
        return during, answers, alive

    during, answers, alive = asyncio.run(main())
    assert answers == ["done"] * 3 and alive
    # 0.6 s of waiting: a handful of ticks around each run, not a tick per turn of the loop.
    assert sum(1 for timeout in during if timeout == 0) <= 3 * (ca.LINGER_TICKS + 4)
    assert sum(1 for timeout in during if timeout > 0.1) >= 3


class _WrappingHandle(condukt.AgentHandle):
    __slots__ = ()

    async def run(self, prompt: str, **options: Any) -> Any:
        return "wrapped:" + str(await super().run(prompt, **options))


class _WrappingAgent(condukt.Agent):
    handle_class = _WrappingHandle


def test_a_handle_class_of_its_own_keeps_its_run_and_bad_arguments_name_run(mode: str) -> None:
    async def main() -> tuple[Any, Any, str, str]:
        async with ca.open_node() as node:
            custom = await node.spawn(_WrappingAgent, model=FunctionModel(lambda request: "ok"))
            plain = await node.spawn(condukt.Agent, model=FunctionModel(lambda request: "ok"))
            with pytest.raises(TypeError) as unknown:
                await plain.run("x", bogus=1)
            with pytest.raises(TypeError) as missing:
                await plain.run()
            return await custom.run("x"), await plain.run("x"), str(unknown.value), str(missing.value)

    custom, plain, unknown, missing = asyncio.run(main())
    assert (custom, plain) == ("wrapped:ok", "ok")
    assert unknown.startswith("run() got an unexpected keyword argument 'bogus'")
    assert missing.startswith("run() missing 1 required positional argument: 'prompt'")


def test_two_tasks_reading_one_stream_both_see_it_end(mode: str) -> None:
    async def main() -> list[list[str]]:
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("hello")]))
            async with agent.stream("go") as events:

                async def read() -> list[str]:
                    return [type(event).__name__ async for event in events]

                return list(await asyncio.wait_for(asyncio.gather(read(), read()), 10))

    seen = asyncio.run(main())
    assert sorted(name for names in seen for name in names) == sorted(
        ["AgentStart", "TurnStart", "TextDelta", "TurnEnd", "AgentEnd", "Done"]
    )


async def _checkpoints(n: int) -> int:
    for _ in range(n):
        await trio.lowlevel.checkpoint()
    return n


def test_calls_answered_on_the_spot_still_let_the_loop_turn() -> None:
    """Back-to-back calls run trio's ticks in the caller, but other asyncio tasks are not starved."""

    async def main() -> tuple[int, int, int]:
        turns = 0

        async def count_turns() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        async with ca.open_node() as node:
            counter = asyncio.create_task(count_turns())
            await node.call_in_trio(_nothing)
            start = turns
            calls = 20 * ca.INLINE_CALLS
            for _ in range(calls):  # trio lingers after each answer: the next call runs it on the spot
                await node.call_in_trio(_nothing)
            during_calls = turns - start
            start = turns
            # One call that keeps trio busy for many ticks: the loop turns between batches of ticks.
            ticks = 40 * ca.INLINE_TICKS
            assert await node.call_in_trio(_checkpoints, ticks) == ticks
            during_ticks = turns - start
            counter.cancel()
        return calls, during_calls, during_ticks

    calls, during_calls, during_ticks = asyncio.run(main())
    assert during_calls >= calls // ca.INLINE_CALLS - 1
    assert during_ticks >= 40 - 2


async def _add_instrument(instrument: trio.abc.Instrument) -> None:
    trio.lowlevel.add_instrument(instrument)


async def _remove_instrument(instrument: trio.abc.Instrument) -> None:
    trio.lowlevel.remove_instrument(instrument)


_seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


async def _set_and_read(value: str) -> str:
    before = _seen.get()
    _seen.set(value)
    await trio.lowlevel.checkpoint()
    return before


def test_each_call_starts_from_a_fresh_context_even_when_calls_follow_each_other(mode: str) -> None:
    async def main() -> list[str]:
        async with ca.open_node() as node:
            return [await node.call_in_trio(_set_and_read, f"call {i}") for i in range(5)]

    assert asyncio.run(main()) == ["unset"] * 5


def test_a_call_cancelled_on_asyncio_leaves_the_calls_after_it_alone(mode: str) -> None:
    async def main() -> tuple[list[str], bool]:
        async with ca.open_node() as node:
            results = [await node.call_in_trio(_echo, "before")]
            cancelled = False
            try:
                async with asyncio.timeout(0.05):
                    await node.call_in_trio(trio.sleep_forever)
            except TimeoutError:
                cancelled = True
            results += [await node.call_in_trio(_echo, f"after {i}") for i in range(3)]
            results += await asyncio.gather(*(node.call_in_trio(_echo, f"together {i}") for i in range(3)))
            return results, cancelled

    results, cancelled = asyncio.run(main())
    assert cancelled
    assert results == ["before", "after 0", "after 1", "after 2", "together 0", "together 1", "together 2"]


async def _echo(value: str) -> str:
    await trio.lowlevel.checkpoint()
    return value


def test_a_node_used_after_its_block_raises_every_time(mode: str) -> None:
    async def main() -> list[str]:
        async with ca.open_node() as node:
            assert await node.whereis("nobody") is None
        raised = []
        for _ in range(3):
            task = asyncio.ensure_future(node.whereis("nobody"))
            for _ in range(3):
                await asyncio.sleep(0)
            if task.done():
                raised.append(type(task.exception()).__name__)
            else:  # a call nobody will ever answer
                task.cancel()
                raised.append("still waiting")
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        return raised

    assert asyncio.run(main()) == ["RunFinishedError"] * 3


class _Chatty:
    """A model that emits ``count`` text deltas as fast as the stream takes them, counting them."""

    name = "chatty"

    def __init__(self, count: int) -> None:
        self.count = count
        self.emitted = 0

    async def complete(self, request: Any, emit: Any) -> AssistantMessage:
        for _ in range(self.count):
            await emit(TextDelta("w "))
            self.emitted += 1
        return AssistantMessage((TextBlock("w " * self.count),), Usage(1, 1), "end_turn")


def test_a_stream_holds_the_run_back_while_asyncio_does_not_read(mode: str) -> None:
    async def main() -> tuple[int, int]:
        model = _Chatty(2000)
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=model)
            async with agent.stream("go") as events:
                kinds = [type(await events.__anext__()).__name__]
                # Until every trio task waits: the run is held back by the full buffers.
                await node.call_in_trio(trio.testing.wait_all_tasks_blocked)
                held = model.emitted
                kinds += [type(event).__name__ async for event in events]
            return held, kinds.count("TextDelta")

    held, deltas = asyncio.run(main())
    assert deltas == 2000
    # The run waits with at most this bridge's buffer and the agent's own one full.
    assert ca.STREAM_BUFFER <= held <= ca.STREAM_BUFFER + condukt.agent.STREAM_BUFFER + 8


def _tool_then_text(request: condukt.ModelRequest) -> Any:
    """A turn with a tool call, then a text answer once the tool's result is in."""
    from condukt.messages import ToolResultMessage

    return "done" if isinstance(request.messages[-1], ToolResultMessage) else call("note", {"text": "x"})


@condukt.tool
async def note(text: str) -> str:
    """Take a note (an async tool: a sync one runs in a worker thread, and trio waits for it idle)."""
    return text


def test_agent_runs_from_asyncio_take_no_more_trio_ticks_than_from_trio() -> None:
    """An agent run awaited from asyncio starts from the loop's thread: it costs no trio tick of its own."""
    runs = 30

    async def sequence(node: Any, waits: _IOWaits, enter: Callable[..., Any]) -> tuple[list[str], list[float]]:
        agent = await node.spawn(condukt.Agent, model=condukt.testing.FunctionModel(_tool_then_text), tools=[note])
        await agent.run("warm up")
        await enter(_add_instrument, waits)
        start = len(waits.timeouts)
        texts = [await agent.run(f"go {i}") for i in range(runs)]
        during = waits.timeouts[start:]
        await enter(_remove_instrument, waits)
        return texts, during

    async def from_trio() -> tuple[list[str], list[float]]:
        async with condukt.open_node() as node:
            return await sequence(node, _IOWaits(), lambda fn, *args: fn(*args))

    async def from_asyncio() -> tuple[list[str], list[float]]:
        async with ca.open_node() as node:
            return await sequence(node, _IOWaits(), node.call_in_trio)

    trio_texts, trio_ticks = trio.run(from_trio)
    texts, ticks = asyncio.run(from_asyncio())
    assert texts == trio_texts == ["done"] * runs
    assert all(timeout == 0 for timeout in ticks)  # trio never went idle (no thread hand-off) between the runs
    assert len(ticks) <= len(trio_ticks)  # one tick per run either way (a trio caller runs it in its own task)


def test_runs_queued_on_a_busy_agent_from_asyncio_run_in_order(mode: str) -> None:
    """A run issued while the agent is busy waits its turn (it is not refused, nor mistaken for a run's own call)."""

    async def main() -> tuple[list[str], list[str]]:
        async with ca.open_node() as node:
            model = ScriptedModel([reply("first", delay=0.05), reply("second"), reply("third")])
            agent = await node.spawn(condukt.Agent, model=model)
            texts = list(await asyncio.gather(agent.run("1"), agent.run("2"), agent.run("3")))
            prompts = [message.text for message in await agent.history() if message.role == "user"]
            return texts, prompts

    assert asyncio.run(main()) == (["first", "second", "third"], ["1", "2", "3"])


def test_a_guest_node_used_from_another_loop_says_so() -> None:
    async def main() -> str:
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("never")]))
            result: list[BaseException] = []

            def elsewhere() -> None:
                try:
                    asyncio.run(agent.run("hi"))
                except BaseException as exc:  # noqa: BLE001  # the test looks at it
                    result.append(exc)

            thread = threading.Thread(target=elsewhere)
            thread.start()
            await asyncio.to_thread(thread.join)
            assert len(result) == 1 and isinstance(result[0], RuntimeError), result
            assert await agent.run("still here") == "never"  # nothing was started by the refused call
            return str(result[0])

    assert "thread=True" in asyncio.run(main())


def test_a_stream_that_cannot_start_raises_instead_of_hanging(mode: str) -> None:
    """The stream's trio call fails before the run starts (the node's block has ended): the error, not a hang."""

    async def main() -> BaseException | None:
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("never")]))
        return await _open_stream(agent)

    assert isinstance(asyncio.run(main()), trio.RunFinishedError)


async def _open_stream(agent: Any) -> BaseException | None:
    """What entering ``agent.stream`` raises; fails the test if it neither raises nor opens within 5 s."""

    async def enter() -> None:
        async with agent.stream("go"):
            pass

    task = asyncio.ensure_future(enter())
    await asyncio.wait({task}, timeout=5)
    if not task.done():
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise AssertionError("entering the stream hangs")
    return task.exception()


def test_a_guest_stream_opened_from_another_loop_says_so() -> None:
    async def main() -> list[BaseException]:
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("never")]))
            result: list[BaseException] = []

            def elsewhere() -> None:
                error = asyncio.run(_open_stream(agent))
                if error is not None:
                    result.append(error)

            thread = threading.Thread(target=elsewhere)
            thread.start()
            await asyncio.to_thread(thread.join)
            return result

    result = asyncio.run(main())
    assert len(result) == 1 and isinstance(result[0], RuntimeError) and "thread=True" in str(result[0]), result


def test_a_one_shot_call_made_while_the_last_one_shuts_trio_down_gets_a_trio_run_of_its_own() -> None:
    """Without an open node each one-shot call starts and ends trio; one arriving meanwhile is not refused."""

    async def main() -> list[str]:
        results: list[str] = []
        for turns in range(16):  # the second call starts at each point of the first one's way out
            first = asyncio.ensure_future(ca.call(_echo, "first"))
            for _ in range(turns):
                await asyncio.sleep(0)
            second = asyncio.ensure_future(ca.call(_echo, "second"))
            for outcome in await asyncio.gather(first, second, return_exceptions=True):
                results.append(outcome if isinstance(outcome, str) else repr(outcome))
        return results

    assert asyncio.run(main()) == ["first", "second"] * 16


def test_cancelling_a_run_queued_behind_another_withdraws_it(mode: str) -> None:
    async def main() -> tuple[str, str, list[str]]:
        async def slow(request: condukt.ModelRequest) -> str:
            await trio.sleep(0.1)
            return "done"

        model = FunctionModel(slow)
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=model)
            first = asyncio.ensure_future(agent.run("1"))
            queued = asyncio.ensure_future(agent.run("2"))
            await node.call_in_trio(model.wait_for_requests)  # both sent: the first runs, the second waits its turn
            queued.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await queued
            texts = await first, await agent.run("3")
            prompts = [message.text for message in await agent.history() if message.role == "user"]
            return texts[0], texts[1], prompts

    assert asyncio.run(main()) == ("done", "done", ["1", "3"])


def test_a_runs_own_timeout_fires_on_a_node_that_lingered_after_an_answer(mode: str) -> None:
    """trio's clock on the loop (it keeps trio from sleeping for a few ticks after an answer) keeps deadlines."""

    async def main() -> BaseException | None:
        async with ca.open_node() as node:
            quick = await node.spawn(condukt.Agent, model=FunctionModel(lambda request: "ok"))
            stuck = await node.spawn(condukt.Agent, model=_SlowModel(3600))
            assert await quick.run("go") == "ok"  # trio lingers after this answer
            try:
                await asyncio.wait_for(stuck.run("go", timeout=0.2), 10)
            except BaseException as exc:  # noqa: BLE001  # the test looks at it
                return exc
        return None

    assert isinstance(asyncio.run(main()), condukt.RunTimeout)


class _NeverStreamingHandle(condukt.AgentHandle):
    __slots__ = ()

    @contextlib.asynccontextmanager
    async def stream(self, prompt: str, **options: Any) -> Any:
        await trio.sleep_forever()  # the stream never opens
        yield


class _NeverStreamingAgent(condukt.Agent):
    handle_class = _NeverStreamingHandle


def test_a_stream_whose_opening_is_cancelled_leaves_no_error_unread(mode: str) -> None:
    async def main() -> list[dict[str, Any]]:
        reported: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        async with ca.open_node() as node:
            agent = await node.spawn(_NeverStreamingAgent, model=ScriptedModel([]))
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    async with agent.stream("go"):
                        pass
        gc.collect()  # an asyncio future whose exception nobody read reports it when collected
        await asyncio.sleep(0)
        return reported

    assert asyncio.run(main()) == []


def test_the_trio_api_awaited_from_asyncio_says_to_use_condukt_asyncio() -> None:
    async def main() -> list[str]:
        errors = []
        with pytest.raises(RuntimeError) as info:
            async with condukt.open_node():
                pass
        errors.append(str(info.value))
        with pytest.raises(RuntimeError) as info:
            await condukt.run(condukt.Agent, "hi", model=ScriptedModel([reply("x")]))
        errors.append(str(info.value))
        return errors

    for error in asyncio.run(main()):
        assert "condukt.asyncio.open_node()" in error and "outside trio" in error


class Peer(condukt.Server):
    """Keeps the handle it was started with, and says whether it is a trio handle."""

    async def init(self, peer: Any = None) -> None:
        self.peer = peer

    async def handle_call(self, request: Any, caller: Any) -> Any:
        return isinstance(self.peer, condukt.Handle)


def test_proxies_handed_back_to_trio_reach_the_tables_keyed_by_trio_handles(mode: str) -> None:
    """A proxy given to a trio method is the trio handle there: terminate_child, monitors, start options."""

    async def main() -> dict[str, Any]:
        async with ca.open_node() as node:
            dyn = await node.start_dynamic_supervisor(max_children=1)
            first = await dyn.start_child(condukt.ChildSpec(None, Peer, restart="transient"))
            await dyn.terminate_child(first)  # a proxy: found among the children keyed by the trio handle
            stopped = not first.alive
            second = await dyn.start_child(condukt.ChildSpec(None, Peer, restart="transient"))  # the slot is free
            sup = await node.start_supervisor([condukt.ChildSpec("p", Peer, kwargs={"peer": second})])
            [(child_id, child)] = await sup.which_children()
            peer_is_trio = await child.call("peer?")
            with pytest.raises(condukt.ChildNotFound):
                await dyn.terminate_child(child)  # a live process, but not this supervisor's child
            return {
                "stopped": stopped,
                "proxied": isinstance(child, ca.Handle),
                "peer_is_trio": peer_is_trio,
                "equal_to_trio": second == second.inner and hash(second) == hash(second.inner),
                "count": (await dyn.count_children()).active,
            }

    assert asyncio.run(main()) == {
        "stopped": True, "proxied": True, "peer_is_trio": True, "equal_to_trio": True, "count": 1,
    }
