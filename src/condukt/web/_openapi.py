"""``GET /openapi.json``: the endpoint described as OpenAPI 3.1 (JSON Schema 2020-12 bodies)."""

from __future__ import annotations

from typing import Any

__all__ = ["SESSION_PATHS", "openapi"]


def _error(description: str) -> dict[str, Any]:
    schema = {"$ref": "#/components/schemas/Error"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_SESSION_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}

#: ``/sessions/{id}...`` paths: ``(suffix, method, summary, request schema or None, 200 schema or None)``.
SESSION_PATHS: list[tuple[str, str, str, dict[str, Any] | None, dict[str, Any] | None]] = [
    ("/abort", "post", "Abort the session's run in progress", None,
     {"type": "object", "properties": {"session": {"type": "string"}, "aborted": {"type": "boolean"}}}),
    ("/steer", "post", "Add a message to the run in progress",
     {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
     {"type": "object", "properties": {"session": {"type": "string"}, "steered": {"type": "boolean"}}}),
    ("/history", "get", "The session's conversation", None,
     {"type": "object", "properties": {"session": {"type": "string"}, "messages": {"type": "array"}}}),
    ("/approvals", "get", "The tool calls waiting for a person's decision", None,
     {"type": "object", "properties": {"session": {"type": "string"}, "approvals": {"type": "array"}}}),
    ("/approvals/{call_id}", "post", "Approve or deny a waiting tool call",
     {"type": "object", "properties": {"approve": {"type": "boolean"}, "reason": {"type": "string"}},
      "required": ["approve"]},
     {"type": "object", "properties": {"session": {"type": "string"}, "call_id": {"type": "string"},
                                       "approved": {"type": "boolean"}}}),
    ("", "delete", "Stop the session's agent and forget the session", None, None),
    ("/runs/{run_id}", "get", "Where a run stands (a detached run, or an SSE run that goes on without its client)",
     None, {"$ref": "#/components/schemas/RunStatus"}),
]

_RUN_ID = {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}


def openapi(routes: dict[str, Any], operations: dict[str, Any], *, token: bool, version: str) -> dict[str, Any]:
    """The OpenAPI document for these agent routes and operations."""
    paths: dict[str, Any] = {}
    run_request = {"$ref": "#/components/schemas/RunRequest"}
    for name, route in sorted(routes.items()):
        paths[f"/agents/{name}/runs"] = {
            "post": {
                "summary": f"Run {route.agent.__name__} (a new session, or continue one)",
                "operationId": f"run_{name}",
                "requestBody": {"required": True, "content": {"application/json": {"schema": run_request}}},
                "responses": {
                    "202": _json(
                        {"type": "object", "properties": {"session": {"type": "string"}, "run": {"type": "string"}},
                         "required": ["session", "run"]},
                        "A detached run started (\"detach\": true): its events at "
                        "/sessions/{session}/runs/{run}/events",
                    ),
                    "200": {
                        "description": "The answer (JSON), or every event as Server-Sent Events "
                        "with 'Accept: text/event-stream'",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/RunResponse"}},
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    "404": _error("No such agent or session"),
                    "409": _error("The run was aborted"),
                    "413": _error("The body is too large"),
                    "422": _error("The body does not match RunRequest"),
                    "503": _error("The endpoint holds its maximum of sessions, or is shutting down "
                                  "(see Retry-After)"),
                },
            }
        }
    for suffix, method, summary, request, response in SESSION_PATHS:
        parameters = [_SESSION_ID]
        if "{call_id}" in suffix:
            parameters.append({"name": "call_id", "in": "path", "required": True, "schema": {"type": "string"}})
        if "{run_id}" in suffix:
            parameters.append(_RUN_ID)
        entry: dict[str, Any] = {"summary": summary, "parameters": parameters,
                                 "responses": {"404": _error("No such session")}}
        if request is not None:
            entry["requestBody"] = {"required": True, "content": {"application/json": {"schema": request}}}
        if response is None:
            entry["responses"]["204"] = {"description": "Done"}
        else:
            entry["responses"]["200"] = _json(response)
        paths.setdefault(f"/sessions/{{id}}{suffix}", {})[method] = entry
    paths["/sessions/{id}/runs/{run_id}/events"] = {
        "get": {
            "summary": "A run's events as Server-Sent Events with ids; reconnect with Last-Event-ID",
            "parameters": [
                _SESSION_ID,
                _RUN_ID,
                {"name": "Last-Event-ID", "in": "header", "required": False,
                 "description": "The id of the last event received: the stream goes on after it",
                 "schema": {"type": "string", "pattern": "^(-1|[0-9]+)$"}},
                {"name": "after", "in": "query", "required": False,
                 "description": "As Last-Event-ID, for clients that cannot set headers",
                 "schema": {"type": "string", "pattern": "^(-1|[0-9]+)$"}},
            ],
            "responses": {
                "200": {"description": "Every event after the one given (each with 'id: <index>'), "
                        "up to done", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                "400": _error("Last-Event-ID is not an event index"),
                "404": _error("No such session or run"),
                "410": _error("The events asked for are no longer kept (see first_index)"),
            },
        }
    }
    for name, op in sorted(operations.items()):
        declared = op.bound.operation
        entry = {
            "summary": declared.instructions.splitlines()[0][:120],
            "operationId": f"operation_{name}",
            "responses": {
                "200": _json(op.output.json),
                "413": _error("The body is too large"),
                "422": _error("The input does not match the operation's schema (see 'errors')"),
            },
        }
        if op.input is not None:
            entry["requestBody"] = {"required": True, "content": {"application/json": {"schema": op.input.json}}}
        paths[f"/operations/{name}"] = {"post": entry}
    paths["/healthz"] = {"get": {"summary": "Liveness (no auth)", "security": [],
                                 "responses": {"200": _json({"type": "object"})}}}
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "condukt endpoint", "version": version},
        "paths": paths,
        "components": {
            "schemas": {
                "RunRequest": {
                    "type": "object",
                    "properties": {
                        "prompt": {"type": "string"},
                        "session": {"type": ["string", "null"]},
                        "detach": {"type": "boolean",
                                   "description": "Start the run detached: 202 with its id, events by id"},
                        "on_disconnect": {"enum": ["abort", "continue"],
                                          "description": "For an SSE run: what a client disconnecting does "
                                          "to the run (default abort)"},
                    },
                    "required": ["prompt"],
                },
                "RunStatus": {
                    "type": "object",
                    "properties": {
                        "session": {"type": "string"},
                        "run": {"type": "string"},
                        "status": {"enum": ["queued", "running", "done", "failed", "aborted"]},
                        "text": {"type": ["string", "null"]},
                        "error": {"type": ["object", "null"],
                                  "properties": {"type": {"type": "string"}, "message": {"type": "string"}}},
                        "first_index": {"type": "integer"},
                        "next_index": {"type": "integer"},
                    },
                    "required": ["session", "run", "status"],
                },
                "RunResponse": {
                    "type": "object",
                    "properties": {
                        "session": {"type": "string"}, "text": {"type": "string"}, "usage": {"type": "object"}
                    },
                },
                "Error": {
                    "type": "object",
                    "properties": {"error": {"type": "string"}, "message": {"type": "string"},
                                   "errors": {"type": "array", "items": {"type": "string"}}},
                    "required": ["error", "message"],
                },
            }
        },
    }
    if token:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document
