"""``GET /openapi.json``: the endpoint described as OpenAPI 3.1 (JSON Schema 2020-12 bodies).

Every route is typed: its request body, its answer, and each error status
it can answer with (the one error shape, ``Error``). Objects say whether
they are closed (``additionalProperties: false``: the answer has exactly
these fields) or open (the union types of messages and content blocks,
whose variants carry more fields). The schemas of the answers that are
attrs data (usage, pending approvals, the observer's views) are derived
from the classes themselves (:func:`attrs_schema`), so they follow the code.

Routes are described by :class:`Operation` entries: a feature that adds a
route adds its entry (to :data:`SESSION_PATHS` for a ``/sessions/{id}...``
route, or an :class:`Operation` passed to :func:`openapi`'s ``extra``).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Union

import attrs

from ..messages import Usage
from ..sessions import PendingApproval

__all__ = ["ERRORS", "SESSION_PATHS", "Operation", "attrs_schema", "openapi"]

#: What each error status means, for any route (the body is always an ``Error``).
ERRORS: dict[int, str] = {
    400: "The body is not JSON",
    401: "A valid 'Authorization: Bearer <token>' header is needed",
    403: "A request from a page of another origin (BrowserGuard)",
    404: "No such resource",
    409: "The request conflicts with the resource's state",
    410: "The session was deleted during the run",
    413: "The body is too large",
    415: "The body is not JSON (Content-Type)",
    421: "The Host is not this server's (BrowserGuard)",
    422: "The body does not match the route's schema (see 'errors')",
    429: "Too many runs queued for the session (see Retry-After)",
    500: "The agent crashed during the run (the session restarts), or the server failed",
    502: "The model failed, or its answer did not fit the output schema",
    503: "The endpoint is not ready, or holds its maximum of sessions (see Retry-After)",
    504: "The run did not finish within the endpoint's run_timeout",
}

#: Statuses every route with a JSON body may answer besides its own.
BODY_ERRORS = (400, 413, 415, 422)
#: Statuses any route may answer: BrowserGuard's refusals, and a server failure.
ANY_ERRORS = (403, 421, 500)


@attrs.frozen
class Operation:
    """One route of the document: ``path``, ``method``, and what it takes and answers.

    ``response``: the 200 (or ``status``) body's schema, ``None`` for no
    body; ``errors``: the error statuses it may answer (a description each,
    or ``None`` for :data:`ERRORS`'); ``public``: no token needed;
    ``stream``: it may also answer Server-Sent Events.
    """

    path: str
    method: str
    operation_id: str
    summary: str
    response: dict[str, Any] | None
    request: dict[str, Any] | None = None
    errors: Mapping[int, str | None] = attrs.field(factory=dict)
    public: bool = False
    status: int = 200
    stream: str | None = None
    parameters: tuple[dict[str, Any], ...] = ()


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _closed(properties: dict[str, Any], required: Iterable[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties,
            "required": list(properties) if required is None else list(required), "additionalProperties": False}


_STR, _BOOL, _INT, _NUM = {"type": "string"}, {"type": "boolean"}, {"type": "integer"}, {"type": "number"}
_SESSION_ID = {"name": "id", "in": "path", "required": True, "schema": _STR}

#: ``/sessions/{id}...`` paths: ``(suffix, method, summary, request schema or None, 200 schema or None)``,
#: optionally a sixth item: the error statuses besides 401/404/500 (``{status: description or None}``).
SESSION_PATHS: list[tuple[Any, ...]] = [
    ("/abort", "post", "Abort the session's run in progress", None,
     _closed({"session": _STR, "aborted": _BOOL})),
    ("/steer", "post", "Add a message to the run in progress",
     _closed({"message": {"type": "string", "minLength": 1}}),
     _closed({"session": _STR, "steered": _BOOL}), {409: "The session has no run in progress"}),
    ("/history", "get", "The session's conversation", None,
     _closed({"session": _STR, "messages": {"type": "array", "items": _ref("Message")}})),
    ("/approvals", "get", "The tool calls waiting for a person's decision", None,
     _closed({"session": _STR, "approvals": {"type": "array", "items": _ref("PendingApproval")}})),
    ("/approvals/{call_id}", "post", "Approve or deny a waiting tool call",
     _closed({"approve": _BOOL, "reason": _STR}, required=["approve"]),
     _closed({"session": _STR, "call_id": _STR, "approved": _BOOL}),
     {404: "No such session, or no tool call waiting with that id"}),
    ("", "delete", "Stop the session's agent and forget the session", None, None),
]


def _type_schema(tp: Any, components: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema for the type hint ``tp`` (what condukt's cattrs converter makes of it)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return {}
    if tp is type(None):
        return {"type": "null"}
    if tp is str:
        return dict(_STR)
    if tp is bool:
        return dict(_BOOL)
    if tp is int:
        return dict(_INT)
    if tp is float:
        return dict(_NUM)
    if origin is Union or origin is types.UnionType:
        options = [_type_schema(arg, components) for arg in typing.get_args(tp)]
        simple = [o.get("type") for o in options]
        if all(isinstance(t, str) for t in simple) and all(len(o) == 1 for o in options):
            return {"type": simple}
        return {"anyOf": options}
    if origin is tuple or origin is list:
        args = typing.get_args(tp)
        if origin is list or (len(args) == 2 and args[1] is Ellipsis):
            return {"type": "array", "items": _type_schema(args[0], components)}
        # A fixed-size tuple: a JSON array of that many items.
        items = [_type_schema(a, components) for a in args]
        item = items[0] if all(i == items[0] for i in items) else {"anyOf": items}
        return {"type": "array", "items": item, "minItems": len(args), "maxItems": len(args)}
    if origin is typing.Literal:
        return {"type": "string", "enum": list(typing.get_args(tp))}
    if attrs.has(tp):
        return attrs_schema(tp, components)
    return {}


def attrs_schema(cls: type, components: dict[str, Any]) -> dict[str, Any]:
    """A ``$ref`` to the closed object schema of the attrs class ``cls`` (added to ``components`` once)."""
    name = cls.__name__
    if name not in components:
        components[name] = {}  # a placeholder: a class that refers to itself
        hints = typing.get_type_hints(cls)
        fields = attrs.fields(cls)
        properties = {field.name: _type_schema(hints[field.name], components) for field in fields}
        # A field with a default may be left out of the JSON (the converter omits some: an unknown cost).
        schema = _closed(properties, required=[f.name for f in fields if f.default is attrs.NOTHING])
        doc = (cls.__doc__ or "").strip().split("\n\n")[0]
        if doc:
            schema["description"] = " ".join(doc.split())
        components[name] = schema
    return _ref(name)


def _error(status: int, description: str | None) -> dict[str, Any]:
    return {"description": description or ERRORS.get(status, "Error"),
            "content": {"application/json": {"schema": _ref("Error")}}}


def _json(schema: dict[str, Any] | None, description: str = "OK") -> dict[str, Any]:
    if schema is None:
        return {"description": description}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _path_parameters(path: str, given: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    declared = {p["name"]: p for p in given}
    names = [part[1:-1] for part in path.split("/") if part.startswith("{") and part.endswith("}")]
    return [declared.get(name) or {"name": name, "in": "path", "required": True, "schema": _STR}
            for name in names] + [p for p in declared.values() if p["name"] not in names]


def _entry(op: Operation, token: bool) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    ok = _json(op.response, "OK" if op.response is not None else "Done")
    if op.stream is not None:
        ok.setdefault("content", {})["text/event-stream"] = {"schema": {"type": "string"},
                                                           "x-description": op.stream}
        ok["description"] = f"The answer (JSON), or {op.stream} with 'Accept: text/event-stream'"
    responses[str(op.status)] = ok
    errors: dict[int, str | None] = dict.fromkeys(ANY_ERRORS)
    if op.request is not None:
        errors.update(dict.fromkeys(BODY_ERRORS))
    errors.update(op.errors)
    if token and not op.public:
        errors.setdefault(401, None)
    for status in sorted(errors):
        responses[str(status)] = _error(status, errors[status])
    entry: dict[str, Any] = {"summary": op.summary, "operationId": op.operation_id, "responses": responses}
    parameters = _path_parameters(op.path, op.parameters)
    if parameters:
        entry["parameters"] = parameters
    if op.request is not None:
        entry["requestBody"] = {"required": True, "content": {"application/json": {"schema": op.request}}}
    if op.public:
        entry["security"] = []
    return entry


def _operation_id(method: str, suffix: str) -> str:
    words = [w.strip("{}") for w in suffix.strip("/").split("/") if w]
    return "_".join([method, "session", *words]).replace("-", "_")


def session_operations() -> list[Operation]:
    """The ``/sessions/{id}...`` routes of :data:`SESSION_PATHS` as :class:`Operation` entries."""
    found = []
    for item in SESSION_PATHS:
        suffix, method, summary, request, response = item[:5]
        extra: Mapping[int, str | None] = item[5] if len(item) > 5 else {}
        errors: dict[int, str | None] = {404: "No such session", 500: None, **extra}
        found.append(Operation(f"/sessions/{{id}}{suffix}", method, _operation_id(method, suffix), summary, response,
                               request, errors, status=200 if response is not None else 204,
                               parameters=(_SESSION_ID,)))
    return found


def openapi(routes: dict[str, Any], operations: dict[str, Any], *, token: bool, version: str,
            public_document: bool = False, extra: Iterable[Operation] = (),
            schemas: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The OpenAPI document for these agent routes, operations and ``extra`` routes (the observer's...).

    ``schemas``: component schemas the ``extra`` routes refer to.
    """
    components: dict[str, Any] = dict(schemas or {})
    ops: list[Operation] = []
    run_errors: dict[int, str | None] = {
        404: "No such agent or session", 409: "The run was aborted", 410: None, 429: None, 500: None, 502: None,
        503: None, 504: None}
    for name, route in sorted(routes.items()):
        ops.append(Operation(
            f"/agents/{name}/runs", "post", f"run_{name}".replace("-", "_"),
            f"Run {route.agent.__name__} (a new session, or continue one)", _ref("RunResponse"),
            _ref("RunRequest"), run_errors, stream="every event as Server-Sent Events",
        ))
    ops.extend(session_operations())
    for name, op in sorted(operations.items()):
        declared = op.bound.operation
        ops.append(Operation(
            f"/operations/{name}", "post", f"operation_{name}".replace("-", "_"),
            declared.instructions.splitlines()[0][:120] if declared.instructions else name, op.output.json,
            op.input.json if op.input is not None else None,
            {422: "The input does not match the operation's schema (see 'errors')", 429: None, 500: None, 502: None,
             504: None},
        ))
    ops.append(Operation("/healthz", "get", "healthz", "Liveness (no auth)",
                         _closed({"status": {"type": "string", "enum": ["ok"]}, "sessions": _INT}), public=True))
    ops.append(Operation("/openapi.json", "get", "openapi", "This document",
                         {"type": "object", "additionalProperties": True}, public=public_document))
    ops.extend(extra)
    paths: dict[str, Any] = {}
    for op in ops:
        paths.setdefault(op.path, {})[op.method] = _entry(op, token)
    attrs_schema(Usage, components)
    attrs_schema(PendingApproval, components)
    components.update({
        "RunRequest": _closed({"prompt": {"type": "string", "minLength": 1}, "session": {"type": ["string", "null"]}},
                              required=["prompt"]),
        "RunResponse": _closed({"session": _STR, "text": _STR,
                                "usage": {"anyOf": [_ref("Usage"), {"type": "null"}]}}),
        "ContentBlock": {
            "type": "object", "description": "A content block; its other fields depend on its type",
            "properties": {"type": {"type": "string", "enum": ["text", "image", "document", "thinking", "tool_call",
                                                               "provider"]},
                           "text": _STR, "id": _STR, "name": _STR, "arguments": {}},
            "required": ["type"], "additionalProperties": True,
        },
        "Message": {
            "type": "object", "description": "A message of the conversation; its other fields depend on its type",
            "properties": {"type": {"type": "string", "enum": ["user", "assistant", "tool_result"]},
                           "content": {"type": "array", "items": _ref("ContentBlock")},
                           "usage": _ref("Usage"), "stop_reason": {"type": ["string", "null"]},
                           "model": {"type": ["string", "null"]}, "tool_call_id": _STR, "name": _STR,
                           "is_error": _BOOL},
            "required": ["type", "content"], "additionalProperties": True,
        },
        "Error": {
            "type": "object",
            "properties": {"error": _STR, "message": _STR, "errors": {"type": "array", "items": _STR},
                           "session": _STR},
            "required": ["error", "message"], "additionalProperties": False,
        },
    })
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "condukt endpoint", "version": version},
        "paths": paths,
        "components": {"schemas": components},
    }
    if token:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document
