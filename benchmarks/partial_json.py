"""Partial JSON for PartialOutput: jiter's partial mode against a hand-written parser.

A structured result (a report of about 2 KB: strings, a list of objects,
numbers) streamed in 8-character pieces, as a provider sends a tool call's
arguments. For each piece, the text so far is parsed into a partial value,
as ``condukt.agent.capabilities.structured_output.PartialResult`` does.
Compared in the same process: jiter (``from_json(partial_mode=
"trailing-strings")``, in Rust) and a hand-written parser in Python that
closes what is open (strings, lists, objects), drops a dangling key or
half-written literal, and hands the result to ``json.loads``. Both must
give the same final value. Prints microseconds per streamed document and
the ratio (hand-written / jiter).

    python benchmarks/partial_json.py
"""

from __future__ import annotations

import json
import time
from typing import Any

import jiter

DOCUMENT = {
    "title": "Quarterly report on the northern region, with notes on supply and staffing",
    "status": "published",
    "score": 8,
    "sections": [
        {"heading": f"Section {i}", "body": "The figures for this part of the quarter were steady. " * 3, "rank": i}
        for i in range(8)
    ],
    "tags": ["finance", "north", "q3", "staffing", "supply"],
}
TEXT = json.dumps(DOCUMENT)
PIECES = [TEXT[i : i + 8] for i in range(0, len(TEXT), 8)]
REPEAT = 30


def hand_written(text: str) -> Any:
    """The value ``text`` (a JSON prefix) holds so far, its last string as written so far; None if nothing yet.

    One pass notes what is open and, at each ``,`` ``[`` ``{`` outside
    strings, a place to cut back to (with what was open there). The text
    closed as it is is tried first; then cut back to the last such place
    (a dangling key, a half-written number or literal goes).
    """
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append("]" if char == "[" else "}")
            cuts.append((index + 1, "".join(reversed(stack))))
        elif char in "]}":
            if stack:
                stack.pop()
        elif char == ",":
            cuts.append((index, "".join(reversed(stack))))
    whole = (text[:-1] if escaped else text) + ('"' if in_string else "")
    try:
        return json.loads(whole + "".join(reversed(stack)))
    except ValueError:
        pass
    for index, closing in reversed(cuts):
        try:
            return json.loads(text[:index] + closing)
        except ValueError:
            continue
    return None


def with_jiter(text: str) -> Any:
    return jiter.from_json(text.encode(), partial_mode="trailing-strings")


def stream(parse: Any) -> tuple[float, Any]:
    """Microseconds to parse the document piece by piece (the text so far each time), and the last value."""
    best = float("inf")
    last: Any = None
    for _ in range(REPEAT):
        start = time.perf_counter()
        parts: list[str] = []
        for piece in PIECES:
            parts.append(piece)
            last = parse("".join(parts))
        best = min(best, time.perf_counter() - start)
    return best * 1e6, last


def main() -> None:
    jiter_us, jiter_last = stream(with_jiter)
    hand_us, hand_last = stream(hand_written)
    assert jiter_last == DOCUMENT and hand_last == DOCUMENT
    print(f"a {len(TEXT)}-character result streamed in {len(PIECES)} pieces, parsed after each (best of {REPEAT}):")
    print(f"  jiter partial mode        {jiter_us:10.0f} µs per document")
    print(f"  hand-written (Python)     {hand_us:10.0f} µs per document")
    print(f"  ratio hand-written/jiter  {hand_us / jiter_us:10.1f}x")


if __name__ == "__main__":
    main()
