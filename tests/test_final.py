"""Classes the code dispatches on by exact type are ``@typing.final`` (as trio's ``test_classes_are_final``).

``type(block) is TextBlock`` (fast, and what the tagged unions of
:mod:`condukt.serialization` do) silently skips a subclass: a user's
``class MyText(TextBlock)`` would be neither scrubbed nor serialised as
text. ``@final`` makes a type checker refuse the subclass instead. The scan
below finds every exact-type check in the source (``type(x) is C``, ``is
not``, ``==``, ``in (C, D)``, and through a name bound to ``type(x)``); each
public class it names must be final.
"""

from __future__ import annotations

import ast
import importlib
import typing
from pathlib import Path

import pytest

import condukt
from condukt import events, messages

ROOT = Path(condukt.__file__).parent


def _is_type_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "type"
        and len(node.args) == 1
        and not node.keywords
    )


def exact_type_checks() -> dict[tuple[str, str], list[int]]:
    """(module, expression naming the class) -> lines, for every exact-type comparison in the package."""
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        module = ".".join(["condukt", *path.relative_to(ROOT).with_suffix("").parts]).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound = {
            target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and _is_type_call(node.value)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            for left, op, right in zip(operands, node.ops, operands[1:], strict=False):
                if not isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                    continue
                for typed, other in ((left, right), (right, left)):
                    if not (_is_type_call(typed) or (isinstance(typed, ast.Name) and typed.id in bound)):
                        continue
                    named = other.elts if isinstance(other, (ast.Tuple, ast.List, ast.Set)) else [other]
                    for target in named:
                        if isinstance(target, (ast.Name, ast.Attribute)):
                            found.setdefault((module, ast.unparse(target)), []).append(node.lineno)
    return found


def checked_classes() -> dict[type, list[str]]:
    """The condukt classes the exact-type checks name, with where (``module:line``)."""
    classes: dict[type, list[str]] = {}
    for (module, expression), lines in exact_type_checks().items():
        namespace = vars(importlib.import_module(module))
        try:
            value = eval(expression, namespace)  # a name or attribute path the module itself resolves
        except NameError:
            continue  # a local name (a parameter holding a class): not a class of the package
        if isinstance(value, type) and value.__module__.startswith("condukt"):
            classes.setdefault(value, []).extend(f"{module}:{line}" for line in lines)
    return classes


def test_the_scan_sees_the_checks() -> None:
    checks = exact_type_checks()
    assert sum(len(lines) for lines in checks.values()) > 100
    classes = checked_classes()
    assert messages.TextBlock in classes and events.Done in classes and condukt.agent.Run in classes


def test_every_public_class_checked_by_exact_type_is_final() -> None:
    open_classes = sorted(
        f"{cls.__module__}.{cls.__qualname__} ({', '.join(where[:3])})"
        for cls, where in checked_classes().items()
        if not cls.__name__.startswith("_") and not getattr(cls, "__final__", False)
    )
    assert open_classes == []


@pytest.mark.parametrize(
    "union", [messages.ContentBlock, messages.Message, events.Event], ids=["ContentBlock", "Message", "Event"]
)
def test_the_members_of_the_tagged_unions_are_final(union: object) -> None:
    """The serialiser tags by class name: a subclass would be written as its base, and read back as it."""
    members = typing.get_args(union)
    assert members and all(getattr(member, "__final__", False) for member in members)
    assert getattr(messages.DocumentBlock, "__final__", False)
