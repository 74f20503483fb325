"""``python -m condukt.testing.server``: the protocol server as a program (see :mod:`._program`)."""

from __future__ import annotations

import sys

from ._program import main

if __name__ == "__main__":
    sys.exit(main())
