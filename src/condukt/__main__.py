"""``python -m condukt`` runs the agents demo."""

from .demo.agents import run

run()
