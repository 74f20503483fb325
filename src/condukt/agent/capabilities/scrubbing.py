"""Scrubbing: secret values and redactor patterns never leave the agent.

The one place text is scrubbed. The agent composes every capability's
``scrub`` hook into ``ctx.scrub``, and the loop applies it to all text bound
for the model, the history, events, stores and telemetry: prompts, steers,
follow-ups, tool results and error messages.
"""

from __future__ import annotations

from ...redaction import Redactor
from ...secrets import Secrets
from .._capability import Builtin, Capability
from .._context import AgentContext

__all__ = ["Scrubbing"]


class Scrubbing(Builtin):
    """Replaces secret values with ``[REDACTED:NAME]``, then applies the redactor.

    Built in when the agent has secrets (``secrets()``, ``secrets=``, an
    ``api_key``) or a ``redactor``.
    """

    def __init__(self, secrets: Secrets, redactor: Redactor | None) -> None:
        self.secrets = secrets
        self.redactor = redactor

    @classmethod
    def at_start(cls, ctx: AgentContext) -> Capability | None:
        """One for an agent with secrets or a redactor."""
        redactor = ctx.config.redactor
        if ctx.secrets or redactor is not None:
            return cls(ctx.secrets, redactor)
        return None

    def scrub(self, text: str) -> str:
        """``text`` without secret values and redactor matches."""
        text = self.secrets.redact(text)
        if self.redactor is not None:
            text = self.redactor.redact(text)
        return text
