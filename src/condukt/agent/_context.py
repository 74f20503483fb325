"""What a capability sees of its agent: :class:`AgentContext`.

Capabilities (built-in and users') get this object in their hooks, never
the kernel's own state: what is documented here is all they may rely on,
so a capability written against it keeps working when the kernel changes.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, final

from ..messages import DocumentBlock, ImageBlock, Message, TextBlock, ToolDefinition
from ..otp import Node, Server
from ..providers import Model
from ..secrets import NO_SECRETS, Secrets
from ..tools import Tool
from ._config import AgentConfig
from ._handle import AgentHandle
from ._ids import uuid7
from ._result import RunResult

if TYPE_CHECKING:
    from ..events import Event
    from ..sessions import Lease, RunCheckpoint

__all__ = ["NO_ENV", "AgentContext", "Behaviour", "Kernel"]

#: The environment of an agent without secrets (read-only, shared).
NO_ENV: Mapping[str, str] = MappingProxyType({})

_Block = TextBlock | ImageBlock | DocumentBlock


def _same(text: str) -> str:
    return text


class Kernel(Protocol):
    """What the context asks of the agent's kernel (its state)."""

    def checkpoint(self) -> RunCheckpoint | None: ...

    def exit(self, reason: Any) -> None: ...


class Behaviour(Protocol):
    """What the agent layer calls on the user's :class:`~condukt.Agent` instance (an ``Agent`` is one)."""

    handle: AgentHandle

    def tools(self) -> Sequence[Any]: ...

    def capabilities(self) -> Sequence[Any]: ...

    def secrets(self) -> Mapping[str, Any]: ...

    def subagents(self) -> Mapping[str, Any]: ...

    async def handle_event(self, event: Event) -> None: ...

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None: ...

    def stop(self, reason: Any = "normal") -> None: ...


@final
class AgentContext:
    """One agent incarnation as its capabilities see it (every hook gets it, or a run that holds it).

    ==========================  ===================================================================
    attribute                   what it is
    ==========================  ===================================================================
    ``agent``                   the user's :class:`~condukt.Agent` instance
    ``handle``                  the agent's :class:`~condukt.agent.AgentHandle`
    ``node``                    the node it runs on
    ``config``                  the checked, frozen settings (:class:`~condukt.agent.AgentConfig`);
                                replaceable (``attrs.evolve``) during ``setup`` only
    ``id``                      the session id (a restored conversation's, once persistence set it up)
    ``cwd``                     the working directory (an absolute :class:`pathlib.Path`)
    ``messages``                the history, a list of messages
    ``system_prompt``           what the model gets, project instructions included; changeable
                                during ``setup``
    ``secrets``                 the agent's :class:`~condukt.secrets.Secrets`
    ``secret_env``              the secrets as environment variables for tools (read-only)
    ``scrub(text)``             every capability's ``scrub``, composed (``scrubs``: whether any)
    ``scrub_blocks(blocks)``    content blocks with their text scrubbed
    ``created_at``              when the conversation began (seconds since the epoch)
    ``declared_tools``          during setup, the tools as declared (classes, instances, tool
                                sources): ``setup`` may replace it; resolved into ``tools`` after
                                setup (then empty)
    ``model``                   after setup: the resolved :class:`~condukt.providers.Model`
    ``tools``                   after setup: the resolved tools (``tools_by_name`` by name)
    ``tool_definitions``        after setup: what the model sees of them
    ``set_tools(tools)``        replace the tools (all three views at once) between requests
    ``checkpoint()``            the run in progress as a :class:`~condukt.sessions.RunCheckpoint`
                                (what a snapshot stores to resume it), or None
    ``exit(reason)``            stop the agent with ``reason`` once the job in progress has ended
    ``restored_run``            the checkpoint a restored snapshot asks to resume (set during
                                ``setup``, by persistence), or None
    ``lease``                   the agent's :class:`~condukt.sessions.Lease` on its session key
                                (set during ``setup`` by persistence, with a store that gives one
                                owner per key), or None: write the session's run logs through it
                                (``log_events``, ``set_run``); it is released when the agent exits
    ``last_result``             how the last run that ended, ended (a ``RunResult``), or None
    ``plain_agent``             condukt's plain :class:`~condukt.Agent` class, for a capability that
                                starts agents of its own (an inline ``Subagent`` role runs as one)
    ==========================  ===================================================================

    Change ``messages`` only in ``setup`` (restoring a conversation), in
    ``after_run`` (the run's turns are settled) and in ``compact``: during a
    run the loop keeps positions in it. Nothing here awaits, so nothing
    here is cancelled.
    """

    __slots__ = (
        "_kernel",
        "agent",
        "config",
        "created_at",
        "cwd",
        "declared_tools",
        "handle",
        "id",
        "last_result",
        "lease",
        "messages",
        "model",
        "node",
        "plain_agent",
        "restored_run",
        "scrub",
        "scrubs",
        "secret_env",
        "secrets",
        "system_prompt",
        "tool_definitions",
        "tools",
        "tools_by_name",
    )

    agent: Behaviour
    handle: AgentHandle
    node: Node
    config: AgentConfig
    id: str
    cwd: Path
    messages: list[Message]
    system_prompt: str | None
    secrets: Secrets
    secret_env: Mapping[str, str]
    scrub: Callable[[str], str]
    scrubs: bool
    created_at: float
    declared_tools: Sequence[Any]
    model: Model
    tools: tuple[Tool, ...]
    tools_by_name: Mapping[str, Tool]
    tool_definitions: tuple[ToolDefinition, ...]
    restored_run: RunCheckpoint | None
    lease: Lease | None
    last_result: RunResult | None
    plain_agent: type[Server]

    def __init__(
        self,
        agent: Behaviour,
        config: AgentConfig,
        *,
        plain_agent: type[Server],
        kernel: Kernel,
    ) -> None:
        """Made by the agent as it boots (``kernel`` describes its run in progress: ``checkpoint``)."""
        self.agent = agent
        self.handle = agent.handle
        self.node = agent.handle.node
        self.config = config
        self.id = config.id or uuid7()
        self.cwd = config.cwd
        self.messages = []
        self.system_prompt = config.system_prompt
        self.secrets = NO_SECRETS
        self.secret_env = NO_ENV
        self.scrub = _same
        self.scrubs = False
        self.created_at = time.time()
        self.declared_tools = ()
        self.tools = ()
        self.tools_by_name = {}
        self.tool_definitions = ()
        self.restored_run = None
        self.lease = None
        self.last_result = None
        self.plain_agent = plain_agent
        self._kernel = kernel

    def checkpoint(self) -> RunCheckpoint | None:
        """The run in progress as a :class:`~condukt.sessions.RunCheckpoint`, or None.

        None when no run is in progress, or when a capability says the run
        cannot be checkpointed (a structured run: its schema is code, which
        a snapshot cannot hold).
        """
        return self._kernel.checkpoint()

    def exit(self, reason: Any) -> None:
        """Stop the agent with ``reason`` (its exit reason) once the job in progress has ended; at once when idle.

        The run in progress settles first (its ``Done`` delivered, its caller
        answered); runs queued behind it never start (their callers get a
        :class:`~condukt.CallError` with ``reason``). Synchronous; never raises.
        """
        self._kernel.exit(reason)

    def set_tools(self, tools: Iterable[Tool]) -> None:
        """Make ``tools`` the agent's tools from the next model request on (``tools``, by name, definitions)."""
        listed = tuple(tools)
        # One plain loop rather than a comprehension per view: every agent's start runs this.
        by_name: dict[str, Tool] = {}
        definitions = []
        for tool in listed:
            by_name[tool.name] = tool
            definitions.append(tool.definition())
        self.tools = listed
        self.tools_by_name = by_name
        self.tool_definitions = tuple(definitions)

    def scrub_blocks(self, blocks: tuple[_Block, ...]) -> tuple[_Block, ...]:
        """``blocks`` with their text, text documents and document titles scrubbed (images, PDF bytes as they are)."""
        if not self.scrubs:
            return blocks
        scrub = self.scrub
        return tuple(
            TextBlock(scrub(b.text))
            if type(b) is TextBlock
            else _scrub_document(b, scrub)
            if type(b) is DocumentBlock
            else b
            for b in blocks
        )

    def __repr__(self) -> str:
        return f"<AgentContext {self.id} of {self.handle!r}>"


def _scrub_document(block: DocumentBlock, scrub: Callable[[str], str]) -> DocumentBlock:
    """A document with its title scrubbed, and its text if it is a text one (a PDF's bytes as they are).

    The title reaches the model (a ``title``, a ``filename``), the history
    and the store like any text. A text document that is not UTF-8 (Latin-1,
    say) is scrubbed too: its other bytes go through the scrubber as
    surrogate escapes and come back unchanged.
    """
    title = block.title
    if title:
        title = scrub(title)
    data = block.data
    if block.is_text:
        try:
            raw = block.to_bytes()
        except ValueError:  # not base64: nothing a scrubber could read (the protocols refuse it)
            raw = None
        if raw is not None:
            text = raw.decode("utf-8", "surrogateescape")
            scrubbed = scrub(text)
            if scrubbed != text:
                data = base64.b64encode(scrubbed.encode("utf-8", "surrogateescape")).decode("ascii")
    if title == block.title and data is block.data:
        return block
    return DocumentBlock(block.media_type, data, title)
