"""The ``condukt`` command line (``pip install 'condukt[cli]'``): run, chat, serve, demo.

``condukt run PROMPT`` streams one run (``--json`` for JSON lines),
``condukt chat`` is an interactive session, ``condukt serve MODULE:APP``
serves an ASGI app with hypercorn on trio, ``condukt demo`` runs the offline
demo. See ``docs/cli.md``. Built on typer (parsing) and rich (rendering).
"""

from __future__ import annotations

try:
    import rich  # noqa: F401
    import typer  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"condukt.cli needs the 'cli' extra (typer, rich): pip install 'condukt[cli]' ({exc})"
    ) from exc

from ._app import app, main
from ._render import JsonPrinter, Renderer

__all__ = ["JsonPrinter", "Renderer", "app", "main"]
