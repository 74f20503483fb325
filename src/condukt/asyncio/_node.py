"""The node proxy: a :class:`condukt.Node` seen from asyncio.

``spawn`` (and ``whereis`` with a handle class) is typed by what it
starts, as on trio: an agent class gives an
:class:`~condukt.asyncio.AgentHandle`, a supervisor a supervisor proxy,
any other server a :class:`~condukt.asyncio.Handle` of its handle class.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any, Literal, TypeVar, overload

from .. import agent as agent_layer
from .. import otp
from ..otp.lowlevel import Spawnable
from ._handles import AgentHandle, Handle, VirtualHandle
from ._methods import Proxy, call_in, invoke, mirrors, sync_method
from ._supervisors import DynamicSupervisorHandle, SupervisorHandle

__all__ = ["Node"]

H = TypeVar("H", bound=otp.Handle)
AH = TypeVar("AH", bound=agent_layer.AgentHandle)


class Node(Proxy, stands_for=otp.Node):
    """A condukt node seen from asyncio: the methods of :class:`condukt.Node`, all awaitable.

    The handles it gives are proxies (:class:`~condukt.asyncio.Handle`,
    :class:`~condukt.asyncio.AgentHandle`, the supervisor proxies); handed
    back to the node, a proxy arrives as its trio handle.
    """

    @property
    def inner(self) -> otp.Node:
        """The trio-side node (use it only from trio code)."""
        node: otp.Node = self._inner
        return node

    @property
    def process_count(self) -> int:
        """See :attr:`condukt.Node.process_count`."""
        value: int = self._inner.process_count
        return value

    @property
    def root(self) -> otp.DynamicSupervisorHandle:
        """The node's root supervisor: its trio-side handle (:attr:`condukt.Node.root`; use it only from trio code)."""
        value: otp.DynamicSupervisorHandle = self._inner.root
        return value

    @property
    def pubsub(self) -> Any:
        """The node's publish/subscribe hub, trio-side (:attr:`condukt.Node.pubsub`; use it only from trio code)."""
        return self._inner.pubsub

    @property
    def hibernate_after(self) -> float | None:
        """See :attr:`condukt.Node.hibernate_after`: the node's default for agents (set it with ``open_node``)."""
        value: float | None = self._inner.hibernate_after
        return value

    @property
    def extensions(self) -> dict[str, Any]:
        """Per-node services added by higher layers, trio-side (:attr:`condukt.Node.extensions`)."""
        value: dict[str, Any] = self._inner.extensions
        return value

    @overload
    async def spawn(
        self,
        server: type[Spawnable[AH]],
        *args: Any,
        name: Hashable | None = None,
        mailbox_size: int | None = None,
        hibernate_after: float | None = None,
        **kwargs: Any,
    ) -> AgentHandle[AH]: ...

    @overload
    async def spawn(
        self,
        server: type[Spawnable[otp.SupervisorHandle]],
        *args: Any,
        name: Hashable | None = None,
        mailbox_size: int | None = None,
        hibernate_after: float | None = None,
        **kwargs: Any,
    ) -> SupervisorHandle: ...

    @overload
    async def spawn(
        self,
        server: type[Spawnable[otp.DynamicSupervisorHandle]],
        *args: Any,
        name: Hashable | None = None,
        mailbox_size: int | None = None,
        hibernate_after: float | None = None,
        **kwargs: Any,
    ) -> DynamicSupervisorHandle: ...

    @overload
    async def spawn(
        self,
        server: type[Spawnable[H]],
        *args: Any,
        name: Hashable | None = None,
        mailbox_size: int | None = None,
        hibernate_after: float | None = None,
        **kwargs: Any,
    ) -> Handle[H]: ...

    @mirrors(otp.Node.spawn)
    async def spawn(self, server: Any, *args: Any, **kwargs: Any) -> Any:
        return await invoke(self._guest, self._inner.spawn, (server, *args), kwargs)

    @mirrors(otp.Node.agent)
    async def agent(self, cls: Any, key: str, /, **options: Any) -> VirtualHandle:
        inner = await call_in(self._guest, self._inner.agent, cls, key, **options)
        return VirtualHandle(self._guest, inner)

    @mirrors(otp.Node.start_supervisor)
    async def start_supervisor(
        self,
        children: Iterable[otp.ChildSpec],
        *,
        strategy: str = "one_for_one",
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        name: Hashable | None = None,
    ) -> SupervisorHandle:
        options = {"strategy": strategy, "max_restarts": max_restarts, "max_seconds": max_seconds, "name": name}
        result: SupervisorHandle = await invoke(self._guest, self._inner.start_supervisor, (children,), options)
        return result

    @mirrors(otp.Node.start_dynamic_supervisor)
    async def start_dynamic_supervisor(
        self,
        *,
        max_children: int | None = None,
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        name: Hashable | None = None,
        intensity: Literal["supervisor", "per_child"] = "supervisor",
    ) -> DynamicSupervisorHandle:
        options = {
            "max_children": max_children,
            "max_restarts": max_restarts,
            "max_seconds": max_seconds,
            "name": name,
            "intensity": intensity,
        }
        result: DynamicSupervisorHandle = await invoke(self._guest, self._inner.start_dynamic_supervisor, (), options)
        return result

    @overload
    async def whereis(self, name: Hashable) -> Handle[otp.Handle] | None: ...

    @overload
    async def whereis(self, name: Hashable, handle_class: type[AH]) -> AgentHandle[AH] | None: ...

    @overload
    async def whereis(self, name: Hashable, handle_class: type[otp.SupervisorHandle]) -> SupervisorHandle | None: ...

    @overload
    async def whereis(
        self, name: Hashable, handle_class: type[otp.DynamicSupervisorHandle]
    ) -> DynamicSupervisorHandle | None: ...

    @overload
    async def whereis(self, name: Hashable, handle_class: type[H]) -> Handle[H] | None: ...

    @mirrors(otp.Node.whereis)
    async def whereis(self, name: Hashable, *args: Any, **kwargs: Any) -> Any:
        return await invoke(self._guest, self._inner.whereis, (name, *args), kwargs)

    registered = sync_method(otp.Node.registered)
    subscribe = sync_method(otp.Node.subscribe)
    publish = sync_method(otp.Node.publish)
    monitor = sync_method(otp.Node.monitor)
    on_close = sync_method(otp.Node.on_close)
