"""The project's own rules, checked by their tools: layer contracts, types, no eval of rules.
The tools keep their caches in a temporary directory (tests/conftest.py's ``tool_cache``), not in the tree."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed")
    return found


def test_import_contracts_hold(tool_cache: Path) -> None:
    command = [_tool("lint-imports"), "--cache-dir", str(tool_cache / "import-linter")]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_mypy_strict_is_clean(tool_cache: Path) -> None:
    command = [sys.executable, "-m", "mypy", "--cache-dir", str(tool_cache / "mypy"), "rulesched"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean(tool_cache: Path) -> None:
    command = [_tool("ruff"), "check", "--cache-dir", str(tool_cache / "ruff"), "."]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean(tool_cache: Path) -> None:
    command = [_tool("ruff"), "format", "--check", "--cache-dir", str(tool_cache / "ruff"), "."]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_text_is_never_evaluated_as_python() -> None:
    offenders = []
    for path in (ROOT / "rulesched").rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"(^|[^_.a-z])(eval|exec|compile)\(", line) and "noqa: rules-are-data" not in line:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_test_modules_share_helpers_not_each_other() -> None:
    """Shared builders live in tests/helpers (or tests/strategies.py, tests/apiserver.py, ...):
    importing another test module runs its tests' module code and ties the two together."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                if any(part.startswith("test_") for part in name.split(".")):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {name}")
    assert offenders == []


def test_modules_stay_a_few_hundred_lines() -> None:
    """The guide's hard limit: no module of the package, the benchmarks or the test bed over 600
    lines (a module that grows past it is split along a seam a newcomer would guess)."""
    limit = 600
    offenders = [
        f"{path.relative_to(ROOT)}: {count} lines"
        for folder in ("rulesched", "benchmarks", "testbed")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > limit
    ]
    assert offenders == []
