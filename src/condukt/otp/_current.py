"""The current node of a task: the innermost ``open_node`` block, or the process the task belongs to."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._node import Node

__all__ = ["current_node_var"]

current_node_var: ContextVar[Node | None] = ContextVar("condukt_node", default=None)
