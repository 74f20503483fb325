"""``python -m condukt`` runs the demo."""

from .demo import run

run()
