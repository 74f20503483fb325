"""One exception tree: every public exception of condukt is a ``ConduktError``, drawn once in docs/errors.md.

The walk finds every exception class a public module exports (``__all__``
of ``condukt`` and of every module whose dotted name has no part starting
with ``_``); the drawing must hold exactly those, each under its direct
condukt base, with the built-in bases it also has.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import warnings
from pathlib import Path

import pytest

import condukt

TREE_PAGE = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
_LINE = re.compile(r"^(?P<indent> *)(?P<name>condukt(?:\.\w+)+)(?:  \(also (?P<also>[\w, ]+)\))?$")


def public_modules() -> list[str]:
    names = ["condukt"]
    for module in pkgutil.walk_packages(condukt.__path__, "condukt."):
        if not any(part.startswith("_") for part in module.name.split(".")[1:]):
            names.append(module.name)
    return names


def public_exceptions() -> dict[type[BaseException], set[str]]:
    """Every exception class a public module exports, with the public names it has."""
    found: dict[type[BaseException], set[str]] = {}
    for name in public_modules():
        try:
            module = importlib.import_module(name)
        except ImportError as exc:  # an optional extra (``condukt[otel]``...) the test extra always installs
            pytest.fail(f"{name} does not import ({exc}); install the test extra: pip install -e '.[test]'")
        for export in getattr(module, "__all__", ()):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                value = getattr(module, export)
            if inspect.isclass(value) and issubclass(value, BaseException):
                found.setdefault(value, set()).add(f"{name}.{export}")
    return found


def drawn_tree() -> list[tuple[int, str, list[str]]]:
    """(depth, public name, built-in bases named after "also") per line of the tree in docs/errors.md."""
    text = TREE_PAGE.read_text(encoding="utf-8")
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    lines = []
    for line in block.splitlines():
        match = _LINE.match(line)
        assert match is not None, f"not a tree line: {line!r}"
        indent = len(match["indent"])
        assert indent % 4 == 0, line
        also = [part.strip() for part in (match["also"] or "").split(",") if part.strip()]
        lines.append((indent // 4, match["name"], also))
    return lines


def resolve(dotted: str) -> type[BaseException]:
    module, _, name = dotted.rpartition(".")
    value = getattr(importlib.import_module(module), name)
    assert inspect.isclass(value) and issubclass(value, BaseException), dotted
    return value


def test_every_public_exception_is_a_condukt_error() -> None:
    outside = sorted(min(names) for cls, names in public_exceptions().items() if not issubclass(cls, condukt.ConduktError))
    assert outside == []


def test_the_drawn_tree_is_the_tree_of_the_code() -> None:
    exceptions = public_exceptions()
    parents: list[type[BaseException]] = []
    drawn: list[type[BaseException]] = []
    for depth, name, also in drawn_tree():
        cls = resolve(name)
        assert name in exceptions.get(cls, set()), f"{name} is not a public name of an exported exception"
        assert depth <= len(parents), f"{name} is indented too far"
        del parents[depth:]
        condukt_bases = [base for base in cls.__bases__ if base in exceptions]
        if parents:
            assert condukt_bases == [parents[-1]], f"{name} is drawn under {parents[-1].__name__}"
        else:
            assert cls is condukt.ConduktError
        builtin_bases = [base.__name__ for base in cls.__bases__ if base not in exceptions and base is not Exception]
        assert builtin_bases == also, f"{name}: also {builtin_bases}, drawn with {also}"
        parents.append(cls)
        drawn.append(cls)
    assert len(drawn) == len(set(drawn)), "an exception is drawn twice"
    missing = sorted(min(names) for cls, names in exceptions.items() if cls not in drawn)
    assert missing == [], "public exceptions missing from docs/errors.md"


def test_the_ray_errors_stay_what_they_were() -> None:
    """``RemoteError`` was a plain Exception and ``NodeClosed`` a RuntimeError: still so, under ConduktError."""
    from condukt.ray import RemoteError
    from condukt.ray._hosts import NodeClosed

    assert issubclass(RemoteError, condukt.ConduktError) and issubclass(RemoteError, Exception)
    assert issubclass(NodeClosed, condukt.ConduktError) and issubclass(NodeClosed, RuntimeError)
