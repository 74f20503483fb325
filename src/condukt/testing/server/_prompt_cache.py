"""Anthropic's prompt caching, simulated: :class:`PromptCache`."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["PromptCache"]


class PromptCache:
    """Anthropic's prompt caching, simulated, for tests and benchmarks of what caching saves.

    A request's prompt is its blocks in Anthropic's order (each tool, the
    system prompt's blocks, each message's content blocks), each counted as
    ``ceil(bytes / 4)`` tokens of its JSON. A block marked ``cache_control``
    writes the prefix ending there to the cache (when it holds at least
    ``min_tokens``); a later request reads the longest cached prefix that
    ends at a block boundary at most ``lookback`` blocks before one of its
    own breakpoints, as the API documents. :meth:`account` returns
    ``(uncached input, cache read, cache write)`` tokens; the server reports
    them in the response's ``usage`` when ``server.prompt_cache`` is set.
    Entries never expire (the API's five-minute lifetime is not modelled).
    """

    def __init__(self, *, min_tokens: int = 1024, lookback: int = 20) -> None:
        self.min_tokens = min_tokens
        self.lookback = lookback
        self._prefixes: set[bytes] = set()

    @staticmethod
    def _blocks(body: Any) -> list[tuple[bytes, bool]]:
        """``(canonical JSON, marked)`` for each block of the prompt, in order."""

        def entry(where: str, block: Any) -> tuple[bytes, bool]:
            marked = isinstance(block, dict) and "cache_control" in block
            if marked:
                block = {k: v for k, v in block.items() if k != "cache_control"}
            return where.encode() + json.dumps(block, sort_keys=True, separators=(",", ":")).encode(), marked

        if not isinstance(body, dict):
            return []
        blocks = [entry("tool", tool) for tool in body.get("tools") or []]
        system = body.get("system")
        if isinstance(system, str):
            blocks.append(entry("system", {"type": "text", "text": system}))
        elif isinstance(system, list):
            blocks.extend(entry("system", block) for block in system)
        for message in body.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            role = message.get("role", "?") if isinstance(message, dict) else "?"
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            blocks.extend(entry(role, block) for block in content or [])
        return blocks

    def account(self, body: Any) -> tuple[int, int, int]:
        """``(uncached input, cache read, cache write)`` tokens for a request body, updating the cache."""
        blocks = self._blocks(body)
        digests: list[bytes] = []
        sizes: list[int] = []
        digest, total = b"", 0
        for data, _ in blocks:
            digest = hashlib.sha256(digest + data).digest()
            total += -(-len(data) // 4)
            digests.append(digest)
            sizes.append(total)
        marks = [index for index, (_, marked) in enumerate(blocks) if marked]
        read = 0
        for mark in marks:
            for index in range(mark, max(-1, mark - self.lookback), -1):
                if digests[index] in self._prefixes:
                    read = max(read, sizes[index])
                    break
        write = 0
        for mark in marks:
            if sizes[mark] >= self.min_tokens and digests[mark] not in self._prefixes:
                self._prefixes.add(digests[mark])
                write = max(write, sizes[mark] - read)
        return total - read - write, read, write
