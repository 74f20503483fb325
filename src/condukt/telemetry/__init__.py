"""Telemetry: structured start/stop/exception events through an in-process hook API.

Handlers are process-global, like Erlang's ``:telemetry``::

    from condukt import telemetry

    def handler(event: telemetry.TelemetryEvent) -> None:
        if event.name == ("condukt", "llm", "stop"):
            print(event.metadata["model"], event.measurements["output_tokens"])

    detach = telemetry.attach(handler)      # returns detach
    with telemetry.attached(handler): ...   # or for a block (tests)

A handler is called synchronously, in the emitting task, for every event; it
must be quick and must not block. A handler that raises is logged on the
``condukt.telemetry`` logger and detached; the emitter never sees the error.
:func:`enabled` tells an emitter whether anybody listens at all.

The events condukt emits (the contract; durations are seconds measured by the
emitter, token counts are ints):

========================================  ===============================================  =====================================
name                                      measurements                                     metadata
========================================  ===============================================  =====================================
``("condukt", "agent", "start")``         (none)                                           ``agent_id``, ``agent``, ``model``
``("condukt", "agent", "stop")``          (none)                                           ``agent_id``, ``agent``, ``model``,
                                                                                           ``reason``
``("condukt", "run", "start")``           (none)                                           ``agent_id``, ``run_id``, ``model``
``("condukt", "run", "stop")``            ``duration``, ``input_tokens``,                  ``agent_id``, ``run_id``, ``model``
                                          ``output_tokens``, ``cache_read_tokens``,
                                          ``cache_write_tokens``, ``turns``
``("condukt", "run", "exception")``       ``duration``, ``input_tokens``,                  ``agent_id``, ``run_id``, ``model``,
                                          ``output_tokens``, ``cache_read_tokens``,        ``error_type``, ``error``
                                          ``cache_write_tokens``, ``turns``
``("condukt", "llm", "start")``           (none)                                           ``agent_id``, ``run_id``, ``turn``,
                                                                                           ``model``, ``provider``
``("condukt", "llm", "stop")``            ``duration``, ``input_tokens``,                  as start, plus ``stop_reason``
                                          ``output_tokens``, ``cache_read_tokens``,
                                          ``cache_write_tokens``
``("condukt", "llm", "exception")``       ``duration``                                     as start, plus ``error_type``,
                                                                                           ``error``
``("condukt", "tool", "start")``          (none)                                           ``agent_id``, ``run_id``, ``turn``,
                                                                                           ``tool``, ``tool_call_id``
``("condukt", "tool", "stop")``           ``duration``                                     as start, plus ``is_error``
``("condukt", "tool", "exception")``      ``duration``                                     as start, plus ``error_type``,
                                                                                           ``error``
========================================  ===============================================  =====================================

- ``input_tokens`` excludes the prompt tokens read from the provider's cache
  (``cache_read_tokens``, billed at the cache-read rate) and written to it
  (``cache_write_tokens``), as :class:`condukt.messages.Usage` counts them.
- ``run`` "stop"/"exception" and ``llm`` "stop" also carry ``cost`` (US
  dollars, a float) when the usage's cost is known (a model the
  ``genai-prices`` table or given ``prices`` price); it is absent otherwise.
- ``agent_id`` is the agent's session id; ``agent`` its class name; ``model``
  the ``"provider:model"`` name; ``provider`` the provider prefix; ``run_id`` a
  string unique per run; ``turn`` an int counted from 1 within the run.
- ``tool`` "stop" covers a tool that returned and one that raised
  :class:`condukt.ToolError` (``is_error`` true: the error went back to the
  model and the run goes on); "exception" means it raised anything else.
- Telemetry never carries prompts, system prompts, model output, tool
  arguments, tool results or secret values. An emitter redacts an ``error``
  message (secrets, redactor patterns) before emitting it, as it does for
  everything else the agent reports.
- Handlers must tolerate keys that are missing and keys that are new: the
  contract grows by adding keys, never by renaming them.

:mod:`condukt.telemetry.otel` (extra ``condukt[otel]``) turns these events
into OpenTelemetry spans. See ``docs/telemetry.md``.
"""

from ._hooks import Handler, TelemetryEvent, attach, attached, emit, enabled

__all__ = ["Handler", "TelemetryEvent", "attach", "attached", "emit", "enabled"]
