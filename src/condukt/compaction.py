"""Compaction: keeping a conversation within the model's context.

The compactors and the capability that runs them live in
:mod:`condukt.agent.capabilities.compaction`; this module is their public
path (``condukt.compaction.Sliding``, ``Summarize``...). See ``docs/compaction.md``.
"""

from .agent.capabilities.compaction import Compactor, Sliding, ToolResultPrune, compact_with
from .agent.capabilities.summarize import ContextTooLong, Summarize, TokenEstimate, model_view

__all__ = [
    "Compactor",
    "ContextTooLong",
    "Sliding",
    "Summarize",
    "TokenEstimate",
    "ToolResultPrune",
    "compact_with",
    "model_view",
]
