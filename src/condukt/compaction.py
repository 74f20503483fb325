"""Compaction: keeping a conversation within the model's context.

The compactors and the capability that runs them live in
:mod:`condukt.agent.capabilities.compaction`; this module is their public
path (``condukt.compaction.Sliding``...). See ``docs/compaction.md``.
"""

from .agent.capabilities.compaction import Compactor, Sliding, ToolResultPrune, compact_with

__all__ = ["Compactor", "Sliding", "ToolResultPrune", "compact_with"]
