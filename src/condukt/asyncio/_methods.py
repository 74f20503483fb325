"""trio methods as asyncio awaitables: the typed descriptors the proxies declare, and the bridge they call.

A proxy class lists the methods of the trio class it stands for, each as
``name = method(TrioClass.name)`` (or :func:`sync_method` for a trio
method that is a plain function): a type checker reads the trio method's
parameters through the descriptor (a ``ParamSpec``), so a proxy method
takes exactly what the trio one takes and returns an awaitable of what it
returns. At run time the descriptor looks the method up on the proxied
object (a handle class of the user's own may override it) and bridges it:
arguments unwrapped, the call started in trio (:meth:`Guest.start`), the
answer's nodes and handles wrapped. The bridged method is kept on the
proxy, so later look-ups are a dictionary hit.

:class:`Proxy` is the base of the proxies: it adds ``call_in_trio`` (a
typed way to run any trio function, a user's own handle methods
included) and, at run time only, a ``__getattr__`` that bridges any other
public method of the proxied object the same way. Type checkers do not
see that fallback, so a misspelt method is an error for them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from ._guest import Call, Guest
from ._translate import ProxyBase, unwrap_args, unwrap_kwargs, wrap

__all__ = ["Begin", "Proxy", "Method", "call_in", "invoke", "method", "mirrors", "sync_method"]

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

#: Starts a call in trio without a task of its own (see :class:`~._guest.Call`).
Begin = Callable[[Call], Callable[[], None] | None]

#: Said of every bridged method, after the trio method's own docstring.
_BRIDGED_NOTE = """

From asyncio (:mod:`condukt.asyncio`): awaitable, run inside the node's
trio run; trio nodes and handles in the result arrive as proxies.
Cancelling the awaiting task cancels the trio call, and the await returns
once that has ended; what the trio call raises arrives as that exception."""


async def invoke(guest: Guest, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Await trio's ``fn(*args, **kwargs)`` from asyncio: proxies in, proxies out (a ``str`` result as it is)."""
    if args:
        args = unwrap_args(args)
    if kwargs:
        kwargs = unwrap_kwargs(kwargs)
    call = guest.start(fn, args, kwargs)
    result = call.result() if call.finished else await guest.wait(call)
    return result if type(result) is str else wrap(guest, result)


async def call_in(guest: Guest, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Await trio's ``fn(*args, **kwargs)`` from asyncio: proxies in, the result as it is."""
    return await guest.call(fn, *unwrap_args(args), **unwrap_kwargs(kwargs))


def mirrors(trio_method: Callable[..., Any]) -> Callable[[F], F]:
    """For a proxy method written out (it returns proxies, or takes them): documented as ``trio_method``."""

    def decorate(fn: F) -> F:
        fn.__doc__ = (inspect.getdoc(trio_method) or "") + _BRIDGED_NOTE
        return fn

    return decorate


class Proxy(ProxyBase):
    """A proxy whose trio methods are asyncio awaitables (see the module)."""

    def _bridge(
        self, name: str, value: Callable[..., Any], begin: Begin | None = None
    ) -> Callable[..., Coroutine[Any, Any, Any]]:
        """``value`` (the proxied object's method ``name``) as an asyncio coroutine function, kept on the proxy."""
        guest = self._guest

        @functools.wraps(value)
        async def bridged(*args: Any, **kwargs: Any) -> Any:
            # invoke()'s body, inline: the path of every call (a coroutine frame less).
            if args:
                args = unwrap_args(args)
            if kwargs:
                kwargs = unwrap_kwargs(kwargs)
            call = guest.start(value, args, kwargs, begin)
            result = call.result() if call.finished else await guest.wait(call)
            return result if type(result) is str else wrap(guest, result)

        if inspect.ismethod(value) and value.__self__ is self._inner:
            self.__dict__[name] = bridged  # a method of the inner object: later look-ups skip the descriptor
        return bridged

    if not TYPE_CHECKING:  # for type checkers a proxy has the members it declares, no more

        def __getattr__(self, name: str) -> Any:
            """Any other attribute of the proxied object: a public method bridged, anything else as it is.

            Reaches what the proxy classes do not declare: the methods of a
            handle class of your own (``handle_class``) among others. For a
            typed call, use :meth:`call_in_trio`.
            """
            value = getattr(self._inner, name)
            if not callable(value) or name.startswith("_") or inspect.isclass(value):
                return value
            return self._bridge(name, value)

    async def call_in_trio(self, fn: Callable[P, Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Await the trio function ``fn(*args, **kwargs)`` inside this proxy's trio run, from asyncio.

        For trio-side code of your own next to a node or a handle, and the
        typed way to call the methods of a handle class of your own:
        ``await handle.call_in_trio(MyHandle.method, handle.inner, ...)``.
        Proxies among the arguments arrive as the trio objects they stand
        for; the result is returned as is (no proxies). Cancelling the
        awaiting task cancels ``fn``, and the await returns once ``fn`` has
        ended; what ``fn`` raises arrives as that exception.
        """
        result: R = await call_in(self._guest, fn, *args, **kwargs)
        return result

    def __repr__(self) -> str:
        return f"<condukt.asyncio proxy of {self._inner!r}>"


class Method(Generic[P, R]):
    """A trio method on a proxy class: awaitable, with the trio method's parameters (made by :func:`method`).

    On an instance it is the bridged method of the proxied object (see the
    module); on the class, a coroutine function taking the proxy first,
    documented as the trio method plus how the bridge treats it.
    """

    __slots__ = ("begin", "name", "unbound")

    def __init__(self, fn: Callable[..., Any], begin: Callable[[Any], Begin | None] | None = None) -> None:
        self.name: str = fn.__name__
        #: Given the proxied object, what starts a call of this method without a trio task, if anything.
        self.begin = begin
        name = self.name

        async def unbound(proxy: Any, /, *args: Any, **kwargs: Any) -> Any:
            return await getattr(proxy, name)(*args, **kwargs)

        functools.update_wrapper(unbound, fn)
        unbound.__doc__ = (inspect.getdoc(fn) or "") + _BRIDGED_NOTE
        self.unbound = unbound

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.name:
            raise TypeError(f"{owner.__qualname__}.{name} mirrors {self.name}: a proxy method keeps the trio name")
        self.unbound.__module__ = owner.__module__
        self.unbound.__qualname__ = f"{owner.__qualname__}.{name}"

    @overload
    def __get__(self, proxy: None, owner: type[Any]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]: ...

    @overload
    def __get__(self, proxy: Proxy, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(self, proxy: Proxy | None, owner: type[Any]) -> Any:
        if proxy is None:
            return self.unbound
        inner = proxy._inner
        begin = self.begin
        return proxy._bridge(self.name, getattr(inner, self.name), None if begin is None else begin(inner))


def method(
    fn: Callable[Concatenate[Any, P], Awaitable[R]], *, begin: Callable[[Any], Begin | None] | None = None
) -> Method[P, R]:
    """The trio async method ``fn`` on a proxy class: ``name = method(TrioClass.name)``.

    ``begin(inner)``, if given, returns what starts a call without a trio
    task of its own for that proxied object (or None: a task it is).
    """
    return Method[P, R](fn, begin)


def sync_method(fn: Callable[Concatenate[Any, P], R]) -> Method[P, R]:
    """The trio method ``fn``, a plain function there, on a proxy class: awaitable here (it runs inside trio's run)."""
    return Method[P, R](fn)
