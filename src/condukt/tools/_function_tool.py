"""``@condukt.tool``: a typed function becomes a :class:`Tool`."""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from typing import Any

from ..schema import Schema, is_structured_type, schema_for
from ._tool import Tool, ToolContext, ToolError

__all__ = ["FunctionTool", "tool"]

_GOOGLE_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|Returns?|Raises"
    r"|Yields?|Examples?|Notes?|Attributes|See Also|References|Warns|Warnings?)\s*:\s*$",
    re.IGNORECASE,
)
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_PARAMETER_SECTIONS = {
    "args", "arguments", "parameters", "params", "keyword args", "keyword arguments", "other parameters",
}  # fmt: skip
_GOOGLE_ARG = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_ARG = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[\w\[\], .]+\s+)?(\w+)\s*:\s*(.*)$")
_SPHINX_FIELD = re.compile(r"^\s*:\w+")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {param: description}) from a Google-, NumPy- or Sphinx-style docstring.

    Hand-written on purpose. docstring_parser (measured on the same four
    docstrings) gives the same results for Google and Sphinx style and also
    reads NumPy style, which this parser now does too; it would be a new
    dependency, and it takes 85-160 µs per docstring against 8-28 µs here.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    numpy = False  # the section has a NumPy header: parameters are unindented "name : type" lines
    current: str | None = None

    def add(text: str) -> None:
        if current is not None and text:
            params[current] = f"{params[current]} {text}".strip()

    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        following = lines[index] if index < len(lines) else ""
        if line.strip() and not line[0].isspace() and _NUMPY_RULE.match(following):
            section, current, numpy = line.strip().lower(), None, True  # a NumPy header, underlined
            index += 1
            continue
        header = _GOOGLE_SECTION.match(line)
        if header:
            section, current, numpy = header.group(1).lower(), None, False
            continue
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            section = "sphinx"
            continue
        if _SPHINX_FIELD.match(line):
            section, current = "sphinx", None  # :returns:, :type x:, :raises ...:
            continue
        if section == "sphinx":
            if line[:1].isspace():
                add(line.strip())
        elif section in _PARAMETER_SECTIONS:
            arg = (_NUMPY_ARG if numpy else _GOOGLE_ARG).match(line)
            if numpy and arg and not line[:1].isspace():
                current = arg.group(1)
                params[current] = ""
            elif not numpy and arg and (line[:1].isspace() or current is None):
                current = arg.group(1)
                params[current] = arg.group(2).strip()
            else:
                add(line.strip())
        elif section is None:
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
        self._converters: dict[str, Schema[Any]] = {}
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
                self._converters[param.name] = Schema.of(hint)
        schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        self._name = name or fn.__name__
        self._description = description or summary or f"Calls {fn.__name__}."
        self._parameters = schema
        self._schema = Schema.of(schema)
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
        """Call the function with the (validated) arguments.

        Raises :class:`ToolError` for an argument that does not convert, else
        what the function raises. An async function is cancelled at its own
        checkpoints; a sync one runs to its end on the event loop, so a timeout
        or an abort takes effect only once it has returned.
        """
        kwargs = dict(args)
        for key, schema in self._converters.items():
            if key in kwargs:
                try:
                    kwargs[key] = schema.convert(kwargs[key])
                except ValueError as exc:
                    raise ToolError(f"argument {key!r}: {exc}") from None
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
    instead of a model argument. Parameters annotated with an attrs class, a
    dataclass, a ``TypedDict`` or a pydantic model (also inside lists,
    ``Optional``...) are converted from the model's JSON (see
    :meth:`condukt.schema.Schema.convert`)::

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
