"""``@condukt.tool``: a typed function becomes a :class:`Tool`.

A sync function does not run on the event loop, where it would freeze every
agent on the node until it returned: by default it runs in a worker thread
(``isolate="thread"``), which the call abandons at its deadline, or in a
worker process (``isolate="process"``, trio-parallel), which the call kills.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import inspect
import os
import re
import sys
import typing
from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal

import outcome
import trio

from ..schema import Schema, is_structured_type, schema_for
from ._tool import Tool, ToolContext, ToolError

__all__ = ["FunctionTool", "Isolate", "tool"]

#: Where a sync function tool runs: see :func:`tool`.
Isolate = Literal["thread", "process", "none"]
_ISOLATES: tuple[str, ...] = typing.get_args(Isolate)

#: Threads that sync tools may use at once, per trio run. Their own limiter,
#: not trio's default one: a thread a timed-out call abandoned holds its token
#: until its function returns, and runaway tools must not starve the file
#: tools and DNS lookups that share trio's default limiter.
_SYNC_TOOL_THREADS = 40
_thread_limiter: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("condukt_sync_tool_threads")

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
    """A tool backed by a function; made by :func:`tool` (which documents ``isolate``).

    Raises ``ValueError`` for an ``isolate`` that is not ``"thread"``,
    ``"process"`` or ``"none"``; ``TypeError`` for a function that cannot
    run where ``isolate`` says (an async function in a thread or a process;
    in a process, a function the worker cannot import or that takes the
    :class:`ToolContext`); ``ImportError`` for ``isolate="process"`` without
    trio-parallel installed.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        isolate: Isolate | None = None,
        requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
        idempotent: bool = False,
    ) -> None:
        super().__init__(requires_approval=requires_approval, idempotent=idempotent)
        if isolate is not None and (not isinstance(isolate, str) or isolate not in _ISOLATES):
            accepted = ", ".join(repr(i) for i in _ISOLATES)
            raise ValueError(f"@tool {_label(fn)}: isolate must be one of {accepted} or None, got {isolate!r}")
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
        if self._is_async:
            if isolate not in (None, "none"):
                raise TypeError(
                    f"@tool {_label(fn)}: an async function cannot run in a worker thread or process; it runs"
                    f" on the event loop and is cancelled at its awaits (isolate={isolate!r} is for sync functions)"
                )
            isolate = "none"
        #: Where the function runs: "thread", "process" or "none" (inline, on the event loop).
        self.isolate: Isolate = isolate or "thread"
        self._worker: ModuleType | None = None  # trio_parallel, for isolate="process"
        self._reference: tuple[str, str] | None = None  # (module, qualname) the worker imports
        self._reference_checked = False
        if self.isolate == "process":
            self._reference = _process_reference(fn, self._context_param, self._converters)
            self._worker = _import_trio_parallel(fn)

    def __reduce__(self) -> Any:
        # A tool made by @tool at module level pickles by reference (its module and name), as a
        # function does, so agents and their tools travel to other processes (condukt.ray nodes).
        fn = self.fn
        module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
        if module is not None and "<" not in qualname:
            try:
                if _tool_by_reference(module, qualname) is self:
                    return (_tool_by_reference, (module, qualname))
            except (ImportError, AttributeError):
                pass
        raise TypeError(
            f"@tool {_label(fn)} cannot be pickled: only a tool defined with @tool at module level pickles (by name)"
        )

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
        """Call the function with the (validated) arguments, where ``isolate`` says.

        Raises :class:`ToolError` for an argument that does not convert, else
        what the function raises. Cancellation (the tool's timeout, an abort,
        the run's timeout) takes effect at once in every mode except
        ``"none"``: an async function is cancelled at its awaits; a sync one in
        a thread is abandoned (it runs on to its end, its result discarded);
        in a process the worker is killed. With ``isolate="none"`` a sync
        function runs to its end on the event loop before anything else runs;
        if the deadline passed meanwhile, its result is dropped then.
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
        isolate = self.isolate
        if isolate == "thread":
            return await _in_thread(self.fn, kwargs)
        if isolate == "process":
            return await self._in_process(kwargs)
        result = self.fn(**kwargs)
        if trio.current_time() >= trio.current_effective_deadline():
            # The deadline passed while it ran: let the cancellation land, so a
            # late result is dropped as in the other modes, not taken as a success.
            await trio.lowlevel.checkpoint()
        return result

    async def _in_process(self, kwargs: dict[str, Any]) -> Any:
        module, qualname = self._reference  # type: ignore[misc]  # set for isolate="process"
        if not self._reference_checked:
            # The worker imports the function by name: check here, once, that the name leads to it.
            found = _resolve(module, qualname)
            if found is not self.fn:
                raise TypeError(
                    f"tool {self.name!r}: isolate='process' imports the function as {module}.{qualname} in the"
                    f" worker, and that name holds {found!r}, not the function; define it at module level"
                    " under its own name"
                )
            self._reference_checked = True
        worker: Any = self._worker
        return await worker.run_sync(_call_by_reference, module, qualname, kwargs, kill_on_cancel=True)


async def _in_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``fn(**kwargs)`` in a worker thread of trio's thread cache; abandoned if cancelled.

    What ``trio.to_thread.run_sync(..., abandon_on_cancel=True)`` does, on the
    same public ``trio.lowlevel`` pieces, minus what a tool does not use
    (``trio.from_thread`` without a ``trio_token``, thread names, a second
    pass through the scheduler to take a free limiter token): about half its
    cost per hop (33 µs against 66 µs for a no-op on trio 0.35, 2 CPUs), and
    the hop is most of what a thread adds to a tool call. The thread sees a
    copy of the caller's context variables, as with ``to_thread``.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    try:
        limiter = _thread_limiter.get()
    except LookupError:
        limiter = trio.CapacityLimiter(_SYNC_TOOL_THREADS)
        _thread_limiter.set(limiter)
    call = _ThreadCall(limiter)
    try:
        limiter.acquire_on_behalf_of_nowait(call)
    except trio.WouldBlock:
        await limiter.acquire_on_behalf_of(call)
    try:
        job = functools.partial(contextvars.copy_context().run, fn, **kwargs)
        trio.lowlevel.start_thread_soon(job, call.deliver)
    except BaseException:
        limiter.release_on_behalf_of(call)
        raise
    return await trio.lowlevel.wait_task_rescheduled(call.abandon)  # the function's return or raise


class _ThreadCall:
    """One call in a worker thread: whom to wake with its outcome, and the limiter token it holds.

    The token is held until the thread is done, even when the call was
    abandoned: it bounds the threads sync tools occupy, stuck ones included.
    """

    __slots__ = ("limiter", "task", "trio_token")

    def __init__(self, limiter: trio.CapacityLimiter) -> None:
        self.limiter = limiter
        self.task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
        self.trio_token = trio.lowlevel.current_trio_token()

    def deliver(self, result: outcome.Outcome[Any]) -> None:
        """In the worker thread, when the function has returned or raised."""
        try:
            self.trio_token.run_sync_soon(self._report, result)
        except trio.RunFinishedError:
            pass  # the run is over: nobody waits for the result, no limiter to give back to

    def _report(self, result: outcome.Outcome[Any]) -> None:
        self.limiter.release_on_behalf_of(self)
        if self.task is not None:
            trio.lowlevel.reschedule(self.task, result)

    def abandon(self, raise_cancel: Any) -> trio.lowlevel.Abort:
        """Cancelled: the caller goes on at once; the thread's result, when it comes, is dropped."""
        self.task = None
        return trio.lowlevel.Abort.SUCCEEDED


def _label(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


def _process_reference(
    fn: Callable[..., Any], context_param: str | None, converters: dict[str, Schema[Any]]
) -> tuple[str, str]:
    """``(module, qualname)`` by which a worker process imports ``fn``; ``TypeError`` if it cannot.

    Not ``fn`` itself: ``@tool`` rebinds the function's module-level name to
    the :class:`FunctionTool`, so pickle, which finds functions by that name,
    would find the tool instead. The worker unwraps it (:func:`_resolve`).
    """
    label = _label(fn)
    if not inspect.isfunction(fn):
        raise TypeError(
            f"@tool {label}: isolate='process' needs a plain function defined at module level, got {type(fn).__name__}"
        )
    module, qualname = fn.__module__, fn.__qualname__
    if "<lambda>" in qualname or "<locals>" in qualname:
        raise TypeError(
            f"@tool {label}: a worker process imports the function by name, so a lambda or a function defined"
            " inside another function cannot run there (isolate='process'); define it at module level"
        )
    if module == "__main__" and not os.path.isfile(getattr(sys.modules.get("__main__"), "__file__", None) or ""):
        raise TypeError(
            f"@tool {label}: a worker process cannot import a function defined in an interactive session"
            " (isolate='process'); define it in a module or a script"
        )
    if context_param is not None:
        raise TypeError(
            f"@tool {label}: the ToolContext (parameter {context_param!r}) holds the agent's handle and cannot"
            " be sent to a worker process (isolate='process'); use isolate='thread'"
        )
    for param, schema in converters.items():
        local = _local_class(schema.target)
        if local is not None:
            raise TypeError(
                f"@tool {label}: parameter {param!r} is converted to {local.__qualname__}, a class defined inside"
                " a function, which cannot be sent to a worker process (isolate='process'); define it at module level"
            )
    return module, qualname


def _local_class(hint: Any) -> type | None:
    """A class inside ``hint`` that pickle cannot find by name, or ``None``."""
    if isinstance(hint, type) and "<locals>" in hint.__qualname__:
        return hint
    for arg in typing.get_args(hint):
        found = _local_class(arg)
        if found is not None:
            return found
    return None


def _import_trio_parallel(fn: Callable[..., Any]) -> ModuleType:
    # By name: trio-parallel is optional, and ships no type information.
    try:
        return importlib.import_module("trio_parallel")
    except ImportError as exc:
        raise ImportError(
            f"@tool {_label(fn)}: isolate='process' needs trio-parallel: pip install 'condukt[process]'"
        ) from exc


@functools.lru_cache(maxsize=256)
def _resolve(module: str, qualname: str) -> Callable[..., Any]:
    """The function ``module.qualname``, unwrapped from the :class:`FunctionTool` ``@tool`` put there."""
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found.fn if isinstance(found, FunctionTool) else found


def _tool_by_reference(module: str, qualname: str) -> Any:
    """The object ``module.qualname`` (the :class:`FunctionTool` ``@tool`` put there): unpickling a tool."""
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _call_by_reference(module: str, qualname: str, kwargs: dict[str, Any]) -> Any:
    """Runs in the worker process: import the function, call it."""
    return _resolve(module, qualname)(**kwargs)


def _contains_structured(hint: Any) -> bool:
    return any(is_structured_type(arg) or _contains_structured(arg) for arg in typing.get_args(hint))


@typing.overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...
@typing.overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    isolate: Isolate | None = None,
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    isolate: Isolate | None = None,
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
    idempotent: bool = False,
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

    ``isolate`` says where a sync function runs (an async one always runs on
    the event loop, and is cancelled at its awaits):

    - ``"thread"`` (the default): in a worker thread. At the tool's timeout,
      an abort or the run's timeout the call ends at once and the model gets
      the usual error; the thread cannot be stopped, so the function runs on
      to its end, its side effects still happen, and its result is discarded.
    - ``"process"``: in a worker process (trio-parallel, the ``process``
      extra), killed at the deadline or the abort: what the function had not
      done yet never happens. The worker imports the function by its module
      and name, so it must be defined at module level and must not take the
      :class:`ToolContext`; arguments and the result are pickled.
    - ``"none"``: on the event loop, for quick pure functions: nothing else on
      the node runs until it returns, and a timeout or an abort takes effect
      only then (the late result is dropped).

    ``requires_approval`` (``True`` or a predicate on the arguments) makes
    each call wait for a person's approval (``docs/approvals.md``).
    ``idempotent=True`` says a second call has the effect of one: after a
    crash, a resumed run may run a call of it again that had started
    without a saved result (``docs/sessions.md``); the default is never to.

    Raises ``ValueError``/``TypeError``/``ImportError`` as :class:`FunctionTool` does.
    """
    if fn is None:
        return lambda f: FunctionTool(
            f,
            name=name,
            description=description,
            isolate=isolate,
            requires_approval=requires_approval,
            idempotent=idempotent,
        )
    return FunctionTool(
        fn,
        name=name,
        description=description,
        isolate=isolate,
        requires_approval=requires_approval,
        idempotent=idempotent,
    )
