"""Redactors: patterns (keys, tokens, e-mail addresses) removed from what reaches the model.

An agent with ``redactor=RegexRedactor()`` rewrites outbound user messages
(prompts, steers, follow-ups) and tool results before they enter the
history, events, stores, telemetry and model requests. Custom redactors are
any object with ``redact(text: str) -> str``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

__all__ = ["DEFAULT_PATTERNS", "RegexRedactor", "Redactor", "chain"]


@runtime_checkable
class Redactor(Protocol):
    """Rewrites text to remove sensitive content."""

    def redact(self, text: str) -> str:
        """Return ``text`` without the sensitive parts."""
        ...


#: name -> regular expression; each match becomes ``[REDACTED:<name>]``.
DEFAULT_PATTERNS: dict[str, str] = {
    "private_key": r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
    "jwt": r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    "anthropic_key": r"\bsk-ant-[A-Za-z0-9_-]{20,}",
    "openai_key": r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
    "github_token": r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})",
    "slack_token": r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    "google_api_key": r"\bAIza[0-9A-Za-z_-]{35}",
    "aws_access_key": r"\b(?:AKIA|ASIA|AIDA|AROA)[0-9A-Z]{16}\b",
    "email": r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b",
}


class RegexRedactor:
    """Replace regex matches with ``[REDACTED:<name>]``.

    ``patterns`` replaces the defaults (:data:`DEFAULT_PATTERNS`);
    ``extra_patterns`` adds to them. Either may be a mapping of name ->
    pattern or an iterable of patterns (named ``custom``, ``custom_2``...).
    Each pattern is compiled on its own, so inline flags (``(?i)...``),
    groups and backreferences work as written; an invalid one raises
    ``ValueError`` naming it. Text is scanned left to right: the leftmost
    match is replaced, and of matches starting at the same position the
    pattern listed first wins. Empty matches are ignored.
    """

    def __init__(
        self,
        patterns: Mapping[str, str] | Iterable[str] | None = None,
        extra_patterns: Mapping[str, str] | Iterable[str] = (),
    ) -> None:
        table = dict(DEFAULT_PATTERNS) if patterns is None else _named(patterns)
        for name, pattern in _named(extra_patterns).items():
            table[name if name not in table else f"{name}_{len(table)}"] = pattern
        self.patterns: dict[str, str] = table
        self._compiled: list[tuple[str, re.Pattern[str]]] = []
        for name, pattern in table.items():
            try:
                self._compiled.append((name, re.compile(pattern)))
            except re.error as exc:
                raise ValueError(f"invalid redaction pattern {name!r}: {exc}") from exc

    def redact(self, text: str) -> str:
        """``text`` with every match replaced."""
        compiled = self._compiled
        if not text or not compiled:
            return text
        # The next match of each pattern at or after ``position``; refreshed
        # only when an earlier replacement overlapped it.
        upcoming = [_next_match(regex, text, 0) for _, regex in compiled]
        pieces: list[str] = []
        position = 0
        while True:
            best: re.Match[str] | None = None
            best_name = ""
            for index, match in enumerate(upcoming):
                if match is not None and match.start() < position:
                    match = upcoming[index] = _next_match(compiled[index][1], text, position)
                if match is not None and (best is None or match.start() < best.start()):
                    best, best_name = match, compiled[index][0]
            if best is None:
                break
            pieces += [text[position : best.start()], f"[REDACTED:{best_name}]"]
            position = best.end()
        pieces.append(text[position:])
        return "".join(pieces)

    def __repr__(self) -> str:
        return f"RegexRedactor({sorted(self.patterns)})"


def _next_match(regex: re.Pattern[str], text: str, position: int) -> re.Match[str] | None:
    """The first non-empty match of ``regex`` in ``text`` starting at or after ``position``."""
    while position <= len(text):
        match = regex.search(text, position)
        if match is None or match.end() > match.start():
            return match
        position = match.start() + 1
    return None


def _named(patterns: Mapping[str, str] | Iterable[str]) -> dict[str, str]:
    if isinstance(patterns, Mapping):
        return dict(patterns)
    named: dict[str, str] = {}
    for pattern in patterns:
        named["custom" if not named else f"custom_{len(named) + 1}"] = pattern
    return named


class _Chain:
    """Several redactors applied in order."""

    def __init__(self, redactors: tuple[Redactor, ...]) -> None:
        self.redactors = redactors

    def redact(self, text: str) -> str:
        """``text`` through every redactor, in order."""
        for redactor in self.redactors:
            text = redactor.redact(text)
        return text

    def __repr__(self) -> str:
        return f"chain{self.redactors!r}"


def chain(*redactors: Redactor) -> Redactor:
    """One redactor applying ``redactors`` in order (a sub-agent's own, then its parent's)."""
    return _Chain(tuple(redactors))
