"""``python -m condukt``: the ``condukt`` command line (``python -m condukt.demo`` runs the demo)."""

try:
    from .cli import main
except ImportError as exc:  # without the cli extra: say how to get it, and where the demo is
    raise SystemExit(f"{exc}\nThe demo runs without it: python -m condukt.demo") from None

main()
