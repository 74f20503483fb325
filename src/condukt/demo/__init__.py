"""Demos: ``python -m condukt.demo`` (agents) and ``python -m condukt.demo runtime`` (OTP only)."""
