"""``@condukt.tool``: a typed function becomes a :class:`Tool`."""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from typing import Any

from ..schema import is_structured_type, schema_for
from ..serialization import structure
from ._tool import Tool, ToolContext

__all__ = ["FunctionTool", "tool"]

_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_ARG = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX = re.compile(r"^\s*:param\s+(?:[\w\[\], .]+\s+)?(\w+)\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {param: description}) from a Google- or Sphinx-style docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            current = None
            continue
        sphinx = _SPHINX.match(line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            section = "sphinx"
            continue
        if section in ("args", "arguments", "parameters"):
            arg = _ARG.match(line)
            if arg and (line.startswith(" ") or line.startswith("\t")) or (arg and current is None):
                current = arg.group(1)
                params[current] = arg.group(2).strip()
            elif current and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
            continue
        if section is None:
            summary.append(line)
    return "\n".join(summary).strip(), params


class FunctionTool(Tool):
    """A tool backed by a function; made by :func:`tool`."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__()
        self.fn = fn
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn)
        summary, docs = _parse_docstring(fn.__doc__)
        properties: dict[str, Any] = {}
        required: list[str] = []
        self._context_param: str | None = None
        self._converters: dict[str, Any] = {}
        for param in signature.parameters.values():
            hint = hints.get(param.name, Any)
            if hint is ToolContext or param.name == "context":
                self._context_param = param.name
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"@tool {fn.__name__}: *args/**kwargs cannot become tool parameters")
            prop = schema_for(hint)
            if param.name in docs:
                prop = {**prop, "description": docs[param.name]}
            if param.default is not inspect.Parameter.empty:
                if param.default is None or isinstance(param.default, (str, int, float, bool)):
                    prop = {**prop, "default": param.default}
            else:
                required.append(param.name)
            properties[param.name] = prop
            if is_structured_type(hint) or _contains_structured(hint):
                self._converters[param.name] = hint
        schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        self._name = name or fn.__name__
        self._description = description or summary or f"Calls {fn.__name__}."
        self._parameters = schema
        self._is_async = inspect.iscoroutinefunction(fn)

    @property
    def name(self) -> str:  # type: ignore[override]
        """The function's name, or the ``name`` given to :func:`tool`."""
        return self._name

    @property
    def description(self) -> str:  # type: ignore[override]
        """The docstring's summary, or the ``description`` given to :func:`tool`."""
        return self._description

    @property
    def parameters(self) -> dict[str, Any]:  # type: ignore[override]
        """The schema derived from the signature."""
        return self._parameters

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Call the function with the (validated) arguments."""
        kwargs = dict(args)
        for key, hint in self._converters.items():
            if key in kwargs:
                kwargs[key] = structure(kwargs[key], hint)
        if self._context_param is not None:
            kwargs[self._context_param] = context
        if self._is_async:
            return await self.fn(**kwargs)
        return self.fn(**kwargs)


def _contains_structured(hint: Any) -> bool:
    return any(is_structured_type(arg) or _contains_structured(arg) for arg in typing.get_args(hint))


@typing.overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...
@typing.overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a typed function (sync or async) into a tool.

    The JSON Schema comes from the type hints (parameters without a default
    are required) and the descriptions from the docstring (its summary, and
    Google ``Args:`` or Sphinx ``:param:`` entries). A parameter annotated
    :class:`ToolContext` (or named ``context``) receives the call's context
    instead of a model argument. attrs/dataclass parameters are converted
    from the model's JSON with cattrs::

        @condukt.tool
        async def get_weather(location: str, unit: Literal["C", "F"] = "C") -> str:
            \"\"\"Gets the current weather for a location.

            Args:
                location: City name.
            \"\"\"

    Sync functions run on the event loop: keep them quick, or make them async.
    """
    if fn is None:
        return lambda f: FunctionTool(f, name=name, description=description)
    return FunctionTool(fn, name=name, description=description)
