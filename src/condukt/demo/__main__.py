"""``python -m condukt.demo [agents|runtime] [--live]``."""

import sys

if len(sys.argv) > 1 and sys.argv[1] == "runtime":
    from .runtime import run
else:
    from .agents import run

run()
