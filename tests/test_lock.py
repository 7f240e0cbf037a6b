"""The lock files against pyproject.toml (issue 34, item 1): every dependency pinned in the lock
(constraints.txt, what CI and the README install) at a release its range allows; the lower-bounds
file (constraints-lowest.txt, what .ci/lower-bounds installs) pins each runtime dependency and test
runner at exactly its lower bound; the lint tools' lower bounds are the lock's releases. A change
to pyproject.toml without ``scripts/lock`` fails here, saying what to run."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
RUNTIME = [Requirement(r) for r in PROJECT["dependencies"]]
TEST = [Requirement(r) for r in PROJECT["optional-dependencies"]["test"]]
# the other extras (bench: benchmarks' plots) are locked too, their lower bounds not tested
OTHER = [Requirement(r) for name, rs in PROJECT["optional-dependencies"].items() if name != "test" for r in rs]
LINT = ("mypy", "ruff", "import-linter", "types-")
REFRESH = "run scripts/lock and commit constraints.txt and constraints-lowest.txt"


def pins(name: str) -> dict[str, list[Version]]:
    found: dict[str, list[Version]] = {}
    for line in (ROOT / name).read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9._-]+)==([^\s;]+)", line)
        if match:
            found.setdefault(canonicalize_name(match.group(1)), []).append(Version(match.group(2)))
    return found


def lower_bound(requirement: Requirement) -> Version:
    bounds = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    assert len(bounds) == 1, f"pyproject.toml: {requirement} needs one lower bound (>=)"
    return bounds[0]


def is_lint(requirement: Requirement) -> bool:
    return requirement.name.lower().startswith(LINT)


@pytest.mark.parametrize("requirement", RUNTIME + TEST + OTHER, ids=str)
def test_the_lock_pins_every_dependency_within_its_range(requirement: Requirement) -> None:
    versions = pins("constraints.txt").get(canonicalize_name(requirement.name))
    assert versions, f"constraints.txt has no pin for {requirement.name}: {REFRESH}"
    for version in versions:
        assert requirement.specifier.contains(version, prereleases=True), f"{requirement} vs {version}: {REFRESH}"


@pytest.mark.parametrize("requirement", [r for r in RUNTIME + TEST if not is_lint(r)], ids=str)
def test_the_lower_bounds_file_pins_each_lower_bound(requirement: Requirement) -> None:
    versions = pins("constraints-lowest.txt").get(canonicalize_name(requirement.name))
    assert versions == [lower_bound(requirement)], f"constraints-lowest.txt: {requirement.name} {versions}: {REFRESH}"


@pytest.mark.parametrize("requirement", [r for r in TEST if is_lint(r)], ids=str)
def test_a_lint_tools_lower_bound_is_the_locked_release(requirement: Requirement) -> None:
    locked = pins("constraints.txt")[canonicalize_name(requirement.name)]
    assert locked == [lower_bound(requirement)], (
        f"{requirement.name}: the lock holds {locked}: raise its lower bound in pyproject.toml to it"
    )


def test_ci_and_the_readme_install_from_the_lock() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "pip install --quiet -c constraints.txt -e '.[test]' && python -m pytest -q" in ci
    assert "bash .ci/lower-bounds" in ci and "-c constraints-lowest.txt" in (ROOT / ".ci" / "lower-bounds").read_text()
    assert "pip install -q -c constraints.txt -e '.[test]'" in readme
    assert "pip install -q -c constraints.txt ." in readme
