"""Supervisor proxies: :class:`SupervisorHandle` and :class:`DynamicSupervisorHandle` seen from asyncio.

Their ``start_child`` is typed by the spec, as on trio: a spec of an
agent class gives an :class:`~condukt.asyncio.AgentHandle`, of a
supervisor a supervisor proxy, of anything else a
:class:`~condukt.asyncio.Handle` of the spec's handle class.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, TypeVar, overload

from .. import agent as agent_layer
from .. import otp
from ._handles import AgentHandle, Handle
from ._methods import invoke, method, mirrors, sync_method

__all__ = ["DynamicSupervisorHandle", "SupervisorHandle"]

H = TypeVar("H", bound=otp.Handle)
AH = TypeVar("AH", bound=agent_layer.AgentHandle)


class SupervisorHandle(Handle[otp.SupervisorHandle], stands_for=otp.SupervisorHandle):
    """A static supervisor's handle seen from asyncio: the methods of :class:`condukt.SupervisorHandle`, awaitable."""

    child_info = sync_method(otp.SupervisorHandle.child_info)
    info = sync_method(otp.SupervisorHandle.info)
    count_children = sync_method(otp.SupervisorHandle.count_children)
    terminate_child = method(otp.SupervisorHandle.terminate_child)
    delete_child = method(otp.SupervisorHandle.delete_child)

    @mirrors(otp.SupervisorHandle.which_children)
    async def which_children(self) -> list[tuple[Hashable, Handle[otp.Handle] | None]]:
        result: list[tuple[Hashable, Handle[otp.Handle] | None]] = await invoke(
            self._guest, self._inner.which_children, (), {}
        )
        return result

    @overload
    async def start_child(self, spec: otp.ChildSpec[AH], *, timeout: float | None = None) -> AgentHandle[AH]: ...

    @overload
    async def start_child(
        self, spec: otp.ChildSpec[otp.SupervisorHandle], *, timeout: float | None = None
    ) -> SupervisorHandle: ...

    @overload
    async def start_child(
        self, spec: otp.ChildSpec[otp.DynamicSupervisorHandle], *, timeout: float | None = None
    ) -> DynamicSupervisorHandle: ...

    @overload
    async def start_child(self, spec: otp.ChildSpec[H], *, timeout: float | None = None) -> Handle[H]: ...

    @mirrors(otp.SupervisorHandle.start_child)
    async def start_child(self, spec: Any, *args: Any, **kwargs: Any) -> Any:
        return await invoke(self._guest, self._inner.start_child, (spec, *args), kwargs)

    @mirrors(otp.SupervisorHandle.restart_child)
    async def restart_child(self, child_id: Hashable, *, timeout: float | None = None) -> Handle[otp.Handle]:
        result: Handle[otp.Handle] = await invoke(
            self._guest, self._inner.restart_child, (child_id,), {"timeout": timeout}
        )
        return result


class DynamicSupervisorHandle(Handle[otp.DynamicSupervisorHandle], stands_for=otp.DynamicSupervisorHandle):
    """A dynamic supervisor's handle from asyncio: :class:`condukt.DynamicSupervisorHandle`'s methods, awaitable."""

    child_info = sync_method(otp.DynamicSupervisorHandle.child_info)
    info = sync_method(otp.DynamicSupervisorHandle.info)
    count_children = sync_method(otp.DynamicSupervisorHandle.count_children)

    @mirrors(otp.DynamicSupervisorHandle.which_children)
    async def which_children(self) -> list[tuple[None, Handle[otp.Handle]]]:
        result: list[tuple[None, Handle[otp.Handle]]] = await invoke(self._guest, self._inner.which_children, (), {})
        return result

    @overload
    async def start_child(self, spec: otp.ChildSpec[AH]) -> AgentHandle[AH]: ...

    @overload
    async def start_child(self, spec: otp.ChildSpec[otp.SupervisorHandle]) -> SupervisorHandle: ...

    @overload
    async def start_child(self, spec: otp.ChildSpec[otp.DynamicSupervisorHandle]) -> DynamicSupervisorHandle: ...

    @overload
    async def start_child(self, spec: otp.ChildSpec[H]) -> Handle[H]: ...

    @mirrors(otp.DynamicSupervisorHandle.start_child)
    async def start_child(self, spec: Any, *args: Any, **kwargs: Any) -> Any:
        return await invoke(self._guest, self._inner.start_child, (spec, *args), kwargs)

    @mirrors(otp.DynamicSupervisorHandle.terminate_child)
    async def terminate_child(self, child: otp.Handle | Handle[otp.Handle]) -> None:
        await invoke(self._guest, self._inner.terminate_child, (child,), {})
