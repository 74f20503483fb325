"""Structured output: the answer is an instance of your class, validated.

    python examples/structured_output.py        # offline, on a scripted model
    CONDUKT_MODEL=openai:gpt-4o-mini python examples/structured_output.py

With ``output=Invoice`` the model must call a ``submit_result`` tool whose
arguments match the class's schema; a wrong result is sent back to the
model to fix (here the scripted model's first try misses a field).
"""

from __future__ import annotations

import os

import attrs
import trio

import condukt
from condukt.testing import ScriptedModel, call

MODEL = os.environ.get("CONDUKT_MODEL")  # unset: the scripted model, offline

EMAIL = """\
Hello, please find attached invoice INV-2041 from Acme Tools for the
cordless drill (2 units at 89.50 EUR each). Payment due by 2026-01-15.
"""


@attrs.frozen
class Line:
    item: str
    quantity: int
    unit_price: float


@attrs.frozen
class Invoice:
    number: str
    vendor: str
    currency: str
    due: str
    lines: list[Line]


def scripted_model() -> ScriptedModel:
    line = {"item": "cordless drill", "quantity": 2, "unit_price": 89.5}
    first_try = {"number": "INV-2041", "vendor": "Acme Tools", "due": "2026-01-15", "lines": [line]}
    return ScriptedModel(
        [
            call("submit_result", first_try),  # no currency: rejected, the model tries again
            call("submit_result", {**first_try, "currency": "EUR"}),
        ]
    )


async def main() -> None:
    model = MODEL or scripted_model()
    invoice = await condukt.run(f"Extract the invoice:\n\n{EMAIL}", model=model, output=Invoice)
    print(invoice)
    total = sum(line.quantity * line.unit_price for line in invoice.lines)
    print(f"total: {total:.2f} {invoice.currency}")


if __name__ == "__main__":
    trio.run(main)
