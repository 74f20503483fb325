"""Telemetry: structured start/stop/exception events through an in-process hook API.

Handlers are process-global, like Erlang's ``:telemetry``::

    from condukt import telemetry

    def handler(event: telemetry.TelemetryEvent) -> None:
        if event.name == ("condukt", "llm", "stop"):
            print(event.metadata["model"], event.measurements["output_tokens"])

    detach = telemetry.attach(handler)      # returns detach
    with telemetry.attached(handler): ...   # or for a block (tests)

The events condukt emits, and what they carry, are the contract in
:mod:`condukt.agent.capabilities.telemetry`, where the handler table and the
capability that emits them live (this package is their public path).
:mod:`condukt.telemetry.otel` (extra ``condukt[otel]``) turns these events
into OpenTelemetry spans. See ``docs/telemetry.md``.
"""

from ..agent.capabilities.telemetry import Handler, TelemetryEvent, attach, attached, emit, enabled

__all__ = ["Handler", "TelemetryEvent", "attach", "attached", "emit", "enabled"]
