"""Scrubbing: secret values and redactor patterns never leave the agent.

The one place text is scrubbed. The session composes every capability's
``scrub`` hook into ``session.scrub``, and the loop applies it to all text
bound for the model, the history, events, stores and telemetry: prompts,
steers, follow-ups, tool results and error messages.
"""

from __future__ import annotations

from ..redaction import Redactor
from ..secrets import Secrets
from ._capability import Capability

__all__ = ["Scrubbing"]


class Scrubbing(Capability):
    """Replaces secret values with ``[REDACTED:NAME]``, then applies the redactor."""

    def __init__(self, secrets: Secrets, redactor: Redactor | None) -> None:
        self.secrets = secrets
        self.redactor = redactor

    def scrub(self, text: str) -> str:
        """``text`` without secret values and redactor matches."""
        text = self.secrets.redact(text)
        if self.redactor is not None:
            text = self.redactor.redact(text)
        return text
