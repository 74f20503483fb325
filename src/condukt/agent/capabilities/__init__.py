"""The built-in capabilities, one module each, and the one list of them in order: :data:`ORDER`.

The agent's kernel knows no feature: at start, once its tools and model are
resolved, and for each run, it asks every entry of :data:`ORDER` whether it
applies (a :class:`~condukt.agent.Capability` of the :class:`Builtin` kind
says so from the agent's options; see :class:`Builtin`), and runs the hooks
of those that do in this order. :data:`OWN` marks where the agent's own
capabilities (``Agent.capabilities()``, the ``capabilities=`` start option)
run among them. Adding a built-in is a module here and its line in
:data:`ORDER`.

==========================  ===========================================  ==========================================
built-in (module)           when the agent gets it                       what it does
==========================  ===========================================  ==========================================
``StructuredOutput``        per run, with ``output=``                    ``submit_result``, validation, the result
(:mod:`.structured_output`)
``Resumption``              per run resumed after a restart              answers the restored turn's calls
(:mod:`.resume`)
``Scrubbing``               secrets or a ``redactor``                    secret values and patterns never leave
(:mod:`.scrubbing`)
``Persistence``             a ``session_store``                          owns the key, restores, saves every change
(:mod:`.persistence`)
``ProjectInstructions``     ``load_project_instructions`` (default)      ``AGENTS.md``, skills in the system prompt
(:mod:`.instructions`)
``Subagents``               roles (``subagents()``, ``subagents=``)      the ``subagent`` tool, supervised children
(:mod:`.subagents`)
``Compaction``              a ``compactor``                              compacts after runs and on ``compact()``
(:mod:`.compaction`)
``ToolSources``             a :class:`~condukt.tools.ToolSource` in       opens sources, keeps their tools current
(:mod:`.tool_sources`)      the tools
(the agent's own)           ``capabilities()`` / ``capabilities=``
``Approvals``               a tool that may ask for approval             holds calls until ``approve``/``deny``
(:mod:`.approvals`)
``ToolJournal``             a store that leases the key (every shipped   each tool call journaled: started, result
(:mod:`.tool_journal`)      one)
``ResumeCheckpoints``       ``resume=True`` with a store                 a checkpoint before a run's first request
(:mod:`.resume`)
``Telemetry``               a telemetry handler attached                 the telemetry contract's events
(:mod:`.telemetry`)
==========================  ===========================================  ==========================================

Ready to use, added by the user (``capabilities=[...]``), not built in:
:class:`UsageLimits` (:mod:`.usage_limits`), :class:`InputGuardrail` and
:class:`OutputGuardrail` (:mod:`.guardrails`).
"""

from __future__ import annotations

from typing import Final, final

from .._capability import Builtin
from .approvals import Approvals
from .compaction import Compaction
from .guardrails import GuardrailTripped, InputGuardrail, OutputGuardrail
from .instructions import ProjectInstructions
from .persistence import Persistence
from .resume import ResumeCheckpoints, Resumption
from .scrubbing import Scrubbing
from .structured_output import StructuredOutput
from .subagents import Subagents
from .telemetry import Telemetry
from .tool_journal import ToolJournal
from .tool_sources import ToolSources
from .usage_limits import UsageLimitExceeded, UsageLimits

__all__ = [
    "BUILTINS",
    "ORDER",
    "OWN",
    "Approvals",
    "Builtin",
    "Compaction",
    "GuardrailTripped",
    "InputGuardrail",
    "OutputGuardrail",
    "Persistence",
    "ProjectInstructions",
    "ResumeCheckpoints",
    "Resumption",
    "Scrubbing",
    "StructuredOutput",
    "Subagents",
    "Telemetry",
    "ToolJournal",
    "ToolSources",
    "UsageLimitExceeded",
    "UsageLimits",
]


@final
class _Own:
    """The place of the agent's own capabilities in :data:`ORDER`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OWN"


#: Where the agent's own capabilities (``Agent.capabilities()``, ``capabilities=``) go in :data:`ORDER`.
OWN: Final = _Own()

#: Every capability an agent may get without asking, in the order their hooks run.
ORDER: tuple[type[Builtin] | _Own, ...] = (
    StructuredOutput,  # first: it answers submit_result calls before another intercept sees them
    Resumption,  # answers the restored turn's calls before anyone else
    Scrubbing,
    Persistence,  # restores the conversation before the setups after it read it
    ProjectInstructions,
    Subagents,
    Compaction,  # before OWN: the agent's own after_run sees the compacted history
    ToolSources,
    OWN,
    Approvals,
    ToolJournal,  # after Approvals: its checkpoint adds the journaled results to those Approvals keeps
    ResumeCheckpoints,
    Telemetry,  # last: its timings include the other capabilities' hooks
)

#: The built-in capabilities, in :data:`ORDER`.
BUILTINS: tuple[type[Builtin], ...] = tuple(entry for entry in ORDER if isinstance(entry, type))
