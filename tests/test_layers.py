"""DESIGN.md's layering, checked on the source: what may import what.

* ``condukt.otp`` is the runtime: it imports nothing else of condukt.
* No package imports another package's private modules or names
  (``from ..otp._process import Process`` or ``from ..agent import _thing``):
  what a layer needs from another is public there, or in its ``lowlevel``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import condukt

ROOT = Path(condukt.__file__).parent


def _imports() -> list[tuple[str, int, str, str]]:
    """(file, line, importing module, imported module.name) for every condukt import in the package."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = ["condukt", *path.relative_to(ROOT).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        module = parts[:-1] if is_package else parts
        here = module if is_package else module[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                names = [f"{target}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name == "condukt" or name.startswith("condukt."):
                    found.append((str(path.relative_to(ROOT)), node.lineno, ".".join(module), name))
    return found


def _package(dotted: str) -> str:
    """The layer a module belongs to: ``condukt.agent._loop`` -> ``condukt.agent``; top-level modules -> ``condukt``."""
    parts = dotted.split(".")
    if len(parts) >= 2 and (ROOT / parts[1]).is_dir():
        return ".".join(parts[:2])
    return "condukt"


def test_the_import_scan_sees_the_package() -> None:
    imports = _imports()
    assert len(imports) > 100
    assert any(module.startswith("condukt.agent") and name.startswith("condukt.otp") for _, _, module, name in imports)


def test_the_runtime_imports_no_agent_code() -> None:
    offending = [
        f"{file}:{line}: {name}"
        for file, line, module, name in _imports()
        if module.startswith("condukt.otp") and not name.startswith("condukt.otp")
    ]
    assert offending == []


def test_no_package_imports_another_packages_private_names() -> None:
    offending = []
    for file, line, module, name in _imports():
        if _package(module) == _package(name):
            continue
        private = [part for part in name.split(".") if part.startswith("_") and not part.startswith("__")]
        if private:
            offending.append(f"{file}:{line}: {module} imports {name}")
    assert offending == []
