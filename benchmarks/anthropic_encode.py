"""What the prompt-cache places cost in ``AnthropicModel.encode_request``, steady state.

    python benchmarks/anthropic_encode.py                  # timings, ratios to prompt_cache=True
    python benchmarks/anthropic_encode.py --count N PLACES # N encodes only (for valgrind)

A request shaped like a tool loop's tenth turn: a ~1,700-token system
prompt, three tools, 21 messages (a prompt, ten tool calls and their
results). Every message was encoded before (the model keeps each message's
bytes), as on a real turn, so what is measured is the join of the cached
fragments and the breakpoint marks. Settings: ``True`` (the default: system,
tools and the conversation's end), ``False``, and four places by hand
(``{"system", "tools", 0, "messages"}``), in alternating rounds, best of 7.

Timings on a shared machine move by 30%; for a figure to compare across
code versions count instructions, e.g. (hash seed fixed; ``N`` minus one
encode, divided)::

    PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no \\
        python benchmarks/anthropic_encode.py --count 2001 True   # and --count 1
"""

from __future__ import annotations

import ast
import datetime
import sys
import time
from typing import Any

import condukt
from condukt.messages import (
    AssistantMessage,
    Message,
    StopReason,
    TextBlock,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from condukt.providers import AnthropicModel, ModelRequest

SETTINGS: dict[str, Any] = {
    "True": True,
    "False": False,
    "by hand, 4 places": {"system", "tools", 0, "messages"},
}


def request() -> ModelRequest:
    parameters = {"type": "object", "properties": {"a": {"type": "string"}}}
    tools = tuple(ToolDefinition(f"t{i}", "does a thing " * 5, parameters) for i in range(3))
    messages: list[Message] = [UserMessage.from_text("Please look into the build " * 20)]
    for i in range(10):
        call = ToolCall(f"c{i}", "t0", {"a": "x" * 40})
        messages.append(AssistantMessage((TextBlock("Looking."), call), Usage(), StopReason.TOOL_USE))
        messages.append(ToolResultMessage(f"c{i}", "t0", (TextBlock("result " * 50),)))
    return ModelRequest("You are careful. " * 100, tuple(messages), tools)


def model(places: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", api_key="k", base_url="http://127.0.0.1:9", prompt_cache=places)


def main() -> None:
    req = request()
    if sys.argv[1:2] == ["--count"]:
        encode = model(ast.literal_eval(sys.argv[3])).encode_request
        for _ in range(int(sys.argv[2])):
            encode(req)
        return
    encoders = {name: model(places).encode_request for name, places in SETTINGS.items()}
    for encode in encoders.values():
        encode(req)  # every message encoded once, as on a real turn
    best = dict.fromkeys(encoders, float("inf"))
    rounds, per_round = 7, 2000
    for _ in range(rounds):
        for name, encode in encoders.items():
            start = time.process_time()
            for _ in range(per_round):
                encode(req)
            best[name] = min(best[name], (time.process_time() - start) / per_round)
    print(f"anthropic encode_request, {datetime.date.today()}, condukt {condukt.__version__}, Python {sys.version.split()[0]}")
    print(f"21 messages, 3 tools, {len(encoders['True'](req)):,} bytes; best of {rounds} rounds of {per_round}")
    base = best["True"]
    for name, seconds in best.items():
        print(f"  prompt_cache={name:<18} {seconds * 1e6:7.2f} us per encode   {seconds / base:.3f}x")


if __name__ == "__main__":
    main()
