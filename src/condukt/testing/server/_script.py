"""Scripts as JSON lines: what ``python -m condukt.testing.server --script FILE`` answers, in order.

One JSON object a line, one response each (blank lines and lines starting
with ``#`` are skipped)::

    {"reply": "Hello."}
    {"thinking": "Let me look.", "call": "read", "arguments": {"path": "README.md"}}
    {"calls": [{"call": "read", "arguments": {"path": "a"}}, {"call": "read", "arguments": {"path": "b"}}]}
    {"error": 429, "message": "slow down", "retry_after": 1}
    {"reply": "Done.", "delay": 0.5, "interval": 0.05, "usage": [120, 12]}

Keys: ``reply`` (text), ``thinking``, ``call`` and ``arguments`` (one tool
call; ``id`` optional), ``calls`` (tool calls made together, each
``{"call": ..., "arguments": ...}``), ``usage`` (``[input, output]``
tokens), ``chunk`` (characters per streamed delta), ``interval`` (seconds
between streamed deltas), ``error`` (an HTTP status answered with the
protocol's error body; ``message``, ``type`` and ``retry_after`` with
it), ``disconnect`` (``true``: close the connection without answering),
``malformed`` (``true``: a 200 whose body is not JSON), and on any line
``delay`` (seconds before the first byte).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from typing import Any

from ...otp import ConduktError
from ._steps import Disconnect, Malformed, Reply, Slow, Status, Step, ToolUse, tool_use

__all__ = ["ScriptError", "load_script", "parse_script"]

_KEYS = frozenset(
    {
        "reply", "thinking", "call", "arguments", "id", "calls", "usage", "chunk", "interval", "error", "message",
        "type", "retry_after", "disconnect", "malformed", "delay",
    }
)  # fmt: skip
_REPLY_KEYS = frozenset({"reply", "thinking", "call", "arguments", "id", "calls", "usage", "chunk", "interval"})


class ScriptError(ConduktError, ValueError):
    """A script line that is not a response the server can give; says which line and why."""


def load_script(path: str | os.PathLike[str]) -> list[Step]:
    """The steps of the JSON-lines script at ``path`` (see the module's docstring).

    Raises :class:`ScriptError` naming the file and line of the first bad
    one, ``OSError`` if the file cannot be read.
    """
    with open(path, encoding="utf-8") as file:
        return parse_script(file, source=os.fspath(path))


def parse_script(lines: str | Iterable[str], *, source: str = "<script>") -> list[Step]:
    """The steps of a JSON-lines script given as text or lines. Raises :class:`ScriptError`."""
    steps: list[Step] = []
    for number, line in enumerate(lines.splitlines() if isinstance(lines, str) else lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            entry = json.loads(text)
            if not isinstance(entry, dict):
                raise ValueError(f"expected a JSON object, got {type(entry).__name__}")
            steps.append(_step(entry))
        except ValueError as exc:  # json.JSONDecodeError included
            raise ScriptError(f"{source}, line {number}: {exc}") from None
    return steps


def _step(entry: dict[str, Any]) -> Step:
    unknown = set(entry) - _KEYS
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))}; expected some of {', '.join(sorted(_KEYS))}")
    kinds: list[str] = [kind for kind in ("error", "disconnect", "malformed") if kind in entry]
    if _REPLY_KEYS & set(entry):
        kinds.append("reply")
    if len(kinds) != 1:
        what = " and ".join(kinds) if kinds else "nothing to answer"
        raise ValueError(f"one response a line: {what} (give reply/call/calls, error, disconnect or malformed)")
    step: Step
    if kinds == ["error"]:
        step = _error(entry)
    elif kinds == ["disconnect"]:
        _flag(entry, "disconnect")
        step = Disconnect()
    elif kinds == ["malformed"]:
        _flag(entry, "malformed")
        step = Malformed()
    else:
        step = _reply(entry)
    if "delay" in entry:
        step = Slow(step, _seconds(entry, "delay"))
    return step


def _reply(entry: dict[str, Any]) -> Reply:
    if "arguments" in entry and "call" not in entry:
        raise ValueError('"arguments" goes with "call"')
    if "call" in entry and "calls" in entry:
        raise ValueError('give "call" (one tool call) or "calls" (several), not both')
    calls: list[ToolUse] = []
    if "call" in entry:
        calls.append(_call(entry))
    elif "calls" in entry:
        listed = entry["calls"]
        if not isinstance(listed, list) or not listed:
            raise ValueError('"calls" must be a non-empty list of {"call": name, "arguments": {...}}')
        for item in listed:
            if not isinstance(item, dict) or set(item) - {"call", "arguments", "id"} or "call" not in item:
                raise ValueError(f'each of "calls" is {{"call": name, "arguments": {{...}}}}, got {item!r}')
            calls.append(_call(item))
    text = _text(entry, "reply")
    thinking = _text(entry, "thinking")
    if not text and not thinking and not calls:
        raise ValueError("an empty reply: give reply text, thinking or a call")
    usage = entry.get("usage", [10, 5])
    if (
        not isinstance(usage, list)
        or len(usage) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in usage)
    ):
        raise ValueError(f'"usage" must be [input_tokens, output_tokens], got {usage!r}')
    chunk = entry.get("chunk", 8)
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
        raise ValueError(f'"chunk" must be a positive integer, got {chunk!r}')
    interval = _seconds(entry, "interval") if "interval" in entry else 0.0
    return Reply(text, thinking, tuple(calls), (usage[0], usage[1]), chunk, interval=interval)


def _call(entry: dict[str, Any]) -> ToolUse:
    name = entry["call"]
    if not isinstance(name, str) or not name:
        raise ValueError(f'"call" must be a tool name, got {name!r}')
    arguments = entry.get("arguments", {})
    if not isinstance(arguments, dict):
        raise ValueError(f'"arguments" must be a JSON object, got {arguments!r}')
    call_id = entry.get("id")
    if call_id is not None and (not isinstance(call_id, str) or not call_id):
        raise ValueError(f'"id" must be a non-empty string, got {call_id!r}')
    return tool_use(name, arguments, call_id)


def _error(entry: dict[str, Any]) -> Status:
    extra = set(entry) - {"error", "message", "type", "retry_after", "delay"}
    if extra:
        raise ValueError(f"an error line takes message, type, retry_after and delay, not {', '.join(sorted(extra))}")
    code = entry["error"]
    if not isinstance(code, int) or isinstance(code, bool) or not 400 <= code <= 599:
        raise ValueError(f'"error" must be an HTTP error status (400-599), got {code!r}')
    message = entry.get("message", "scripted error")
    error_type = entry.get("type")
    if not isinstance(message, str) or (error_type is not None and not isinstance(error_type, str)):
        raise ValueError('"message" and "type" must be strings')
    headers: tuple[tuple[str, str], ...] = ()
    if "retry_after" in entry:
        headers = (("retry-after", f"{_seconds(entry, 'retry_after'):g}"),)
    return Status(code, message, error_type, headers)


def _text(entry: dict[str, Any], key: str) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str):
        raise ValueError(f'"{key}" must be a string, got {value!r}')
    return value


def _flag(entry: dict[str, Any], key: str) -> None:
    if entry[key] is not True:
        raise ValueError(f'"{key}" takes true, got {entry[key]!r}')
    extra = set(entry) - {key, "delay"}
    if extra:
        raise ValueError(f'"{key}" takes only "delay" with it, not {", ".join(sorted(extra))}')


def _seconds(entry: dict[str, Any], key: str) -> float:
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f'"{key}" must be a number of seconds >= 0, got {value!r}')
    return float(value)
