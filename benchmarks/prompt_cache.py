"""What Anthropic prompt caching saves on a tool loop, against the local server's simulated cache.

    python benchmarks/prompt_cache.py [TURNS]

One agent with a long system prompt (a project's conventions, ~4,000 tokens),
three tools, and a run of TURNS model turns (TURNS - 1 tool calls, then the
answer), against condukt.testing.server speaking the Messages API with its
PromptCache simulation (Anthropic's documented rules: a ``cache_control``
breakpoint writes the prefix ending there; a later request reads the longest
cached prefix ending at a block boundary within 20 blocks of one of its
breakpoints; tokens counted as JSON bytes / 4). Side by side, in one process:
the same run with ``prompt_cache=True`` (condukt's default: breakpoints on the
system prompt, the last tool and the newest block) and ``prompt_cache=False``.

Prints the input tokens billed as uncached input, cache writes and cache
reads, the bytes sent, and the input cost at Anthropic's list-price
multipliers (cache write 1.25x, cache read 0.1x the input price), as a ratio
of the uncached run; and the client CPU per run, as a ratio.
"""

from __future__ import annotations

import datetime
import sys
import time
from typing import Any, ClassVar

import trio

import condukt
from condukt.messages import AssistantMessage, Usage
from condukt.testing.server import PromptCache, ProtocolServer, RecordedRequest, Reply, reply, tool_use

SYSTEM = (
    "You maintain a Python service. Conventions: every public function has a docstring; "
    "errors are typed; tests are deterministic and fast; no network in tests; logs never carry secrets. "
) * 80
WRITE, READ = 1.25, 0.10  # Anthropic's cache write and read prices, relative to the input price


class Lookup(condukt.Tool):
    """Looks a symbol up in the project index."""

    name = "lookup"
    description = "Finds where a symbol is defined and returns its signature and docstring."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"symbol": {"type": "string", "description": "A dotted name"}},
        "required": ["symbol"],
    }

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        return f"{args['symbol']}(path: str, *, timeout: float = 10.0) -> bytes\n    Reads a file. " * 8


def responder(turns: int) -> Any:
    def answer(request: RecordedRequest) -> Reply:
        done = sum(1 for m in request.messages if m.get("role") == "assistant")
        if done + 1 >= turns:
            return reply("The call sites are consistent.", usage=(0, 40))
        return reply(tools=tool_use("lookup", {"symbol": f"service.io.read_{done}"}), usage=(0, 30))

    return answer


async def one_run(node: condukt.Node, server: ProtocolServer, cache: bool, turns: int) -> tuple[Usage, int, float]:
    """Usage summed over the run's turns, request bytes, client CPU seconds."""
    server.prompt_cache = PromptCache()
    server.responder = responder(turns)
    server.requests.clear()
    agent = await node.spawn(
        condukt.Agent,
        model="anthropic:claude-sonnet-4-5",
        api_key="bench-key",
        base_url=server.url,
        system_prompt=SYSTEM,
        tools=[Lookup],
        max_turns=turns + 1,
        model_options={"prompt_cache": cache, "stream": False},
    )
    start = time.process_time()
    await agent.run("Check every call site of service.io.read_* for the timeout argument.")
    cpu = time.process_time() - start
    history = await agent.history()
    await agent.stop()
    usage = sum((m.usage for m in history if isinstance(m, AssistantMessage)), Usage())
    return usage, sum(len(r.raw) for r in server.requests), cpu


def cost(usage: Usage) -> float:
    """Input cost in units of one uncached input token."""
    return usage.input_tokens + WRITE * usage.cache_write_tokens + READ * usage.cache_read_tokens


async def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    print(f"prompt caching, {datetime.date.today()}, condukt {condukt.__version__}, Python {sys.version.split()[0]}, trio {trio.__version__}")
    print(f"one run of {turns} turns ({turns - 1} tool calls), a ~{len(SYSTEM) // 4:,}-token system prompt, three runs per side, best CPU")
    server = ProtocolServer()
    async with condukt.open_node() as node, trio.open_nursery() as nursery:
        await nursery.start(server.run)
        results: dict[bool, tuple[Usage, int, float]] = {}
        for _ in range(3):
            for cache in (False, True):
                usage, sent, cpu = await one_run(node, server, cache, turns)
                best = results.get(cache)
                results[cache] = (usage, sent, min(cpu, best[2]) if best else cpu)
        nursery.cancel_scope.cancel()
    for cache in (False, True):
        usage, sent, cpu = results[cache]
        label = "prompt_cache=True " if cache else "prompt_cache=False"
        print(
            f"  {label}  input {usage.input_tokens:>7,}  cache write {usage.cache_write_tokens:>6,}  "
            f"cache read {usage.cache_read_tokens:>7,}  sent {sent / 1024:7.1f} KiB  "
            f"input cost {cost(usage):>9,.0f}  CPU {cpu * 1000:6.2f} ms"
        )
    off, on = results[False], results[True]
    print(f"  input cost with caching: {cost(on[0]) / cost(off[0]):.2f}x the uncached run ({1 - cost(on[0]) / cost(off[0]):.0%} saved)")
    print(f"  bytes sent: {on[1] / off[1]:.3f}x   client CPU per run: {on[2] / off[2]:.2f}x")


if __name__ == "__main__":
    trio.run(main)
