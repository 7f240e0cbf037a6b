"""What every test gets: hypothesis profiles, tool caches kept out of the source tree, and a check
that no column evaluation fell back node by node because of a bug.

* Hypothesis profile from ``HYPOTHESIS_PROFILE``: ``dev`` (the default), ``ci`` (what ``.ci/run``
  selects) or ``thorough``; see :mod:`tests.helpers.profiles`. Its database and caches go to the
  user's cache directory, not ``.hypothesis/`` in the tree.
* ``tool_cache``: a directory for the caches of the tools tests/test_quality.py runs (mypy, ruff,
  lint-imports), under pytest's temporary directory. pytest's own cache is off
  (``-p no:cacheprovider`` in pyproject.toml; ``-o addopts=`` brings back ``--lf``).
* Column fallbacks: a column evaluation that raises something other than ``Unsupported`` is a bug
  the scheduler survives by evaluating node by node (rulesched.engine.fallback), which
  would leave the properties "columns place pods as node by node does" green whatever the columns
  did. Every test during which that happened fails, naming the rule, the pod and the traceback,
  unless marked ``@pytest.mark.column_fallbacks`` (a test of the fallback itself).
* ``server``: a fresh test API server (tests/apiserver.py) for the test.
* ``real_k8s`` (session) and ``k8s`` (per test): a real control plane (testbed/), see
  :mod:`tests.realk8s`; tests using them are marked ``real_k8s``, skipped without the binaries
  unless ``RULESCHED_REQUIRE_REAL_K8S=1``.
* ``--break-columns OP``: make every column evaluation of the binary operator OP raise, to see
  which tests catch a broken column engine (``python -m pytest --break-columns '<' tests/...``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from traceback import format_exception

import pytest

from rulesched.engine import Fallback, observe
from tests.apiserver import TestApiServer
from tests.helpers.columns import break_columns
from tests.helpers.profiles import load_profile, storage_directory
from tests.realk8s import REQUIRE, Kube, control_plane, unavailable_reason

# Before any test touches hypothesis's storage (read when first used; else .hypothesis/ in the working directory).
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(storage_directory()))
load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

pytest_plugins = ("pytester",)  # tests/test_column_fallbacks.py runs this file on tests of its own


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--break-columns",
        metavar="OP",
        help="make column evaluation raise for the binary operator OP (to see which tests catch it)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    broken = config.getoption("--break-columns")
    profile = os.environ.get("HYPOTHESIS_PROFILE", "dev")
    return f"hypothesis profile: {profile}" + (f"; column operator {broken!r} deliberately broken" if broken else "")


class UnexpectedColumnFallback(AssertionError):
    """Raised in the test's own thread, where the fallback happened: hypothesis then shrinks
    the example that broke the column engine and shows it."""


class FallbackWatch:
    """The column evaluations that fell back during one test (any thread)."""

    def __init__(self, strict: bool) -> None:
        self.seen: list[Fallback] = []
        self.reported = 0
        self.strict = strict
        self.thread = threading.get_ident()

    def __call__(self, fallback: Fallback) -> None:
        self.seen.append(fallback)
        # Other threads (a scheduler's loop, an extender's server) carry on: node by node is
        # right, and the test fails after its call (check) instead of hanging.
        if self.strict and threading.get_ident() == self.thread:
            raise UnexpectedColumnFallback(describe([fallback], traceback=False))  # chained to the error

    def check(self) -> None:
        new, self.reported = self.seen[self.reported :], len(self.seen)
        if new and self.strict:
            pytest.fail(describe(new), pytrace=False)


@pytest.fixture(autouse=True)
def column_fallbacks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FallbackWatch]:
    """The column evaluations that fell back during the test; the test fails if there were any
    and it is not marked ``column_fallbacks``."""
    operator = request.config.getoption("--break-columns")
    if operator:
        break_columns(monkeypatch, operator)
    watch = FallbackWatch(strict=request.node.get_closest_marker("column_fallbacks") is None)
    with observe(watch):
        yield watch
    watch.check()  # those after the test's call (a thread still running)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail the test itself, not its teardown, for fallbacks in other threads during its call."""
    watch = getattr(item, "funcargs", {}).get("column_fallbacks")
    if not isinstance(watch, FallbackWatch):
        return (yield)
    try:
        result = yield
    except BaseException:
        watch.reported = len(watch.seen)  # the test fails already (most likely for these)
        raise
    watch.check()
    return result


def describe(fallbacks: list[Fallback], traceback: bool = True) -> str:
    """The failure message: every (rule, error type) once, and the first one's traceback."""
    kinds = sorted({(f.rule, type(f.error).__name__) for f in fallbacks})
    first = fallbacks[0]
    lines = [
        f"{len(fallbacks)} column evaluation(s) raised and fell back node by node (a column engine bug):",
        *(f"  rule {rule}: {error}" for rule, error in kinds),
        f"first, for pod {first.pod}, rule {first.rule}" + (":" if traceback else ""),
    ]
    if traceback:
        lines.append("".join(format_exception(first.error)).rstrip())
    return "\n".join(lines)


@pytest.fixture(scope="session")
def tool_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where tools run by tests keep their caches: out of the source tree."""
    return tmp_path_factory.mktemp("tool-cache")


@pytest.fixture
def server() -> Iterator[TestApiServer]:
    """The test API server (tests/apiserver.py), empty, stopped after the test."""
    s = TestApiServer()
    yield s
    s.stop()


REAL_K8S_FIXTURES = {"real_k8s", "k8s"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test on the real control plane carries the ``real_k8s`` marker."""
    for item in items:
        if REAL_K8S_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.real_k8s)


@pytest.fixture(scope="session")
def real_k8s(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """The real control plane, started once for the session (tests/realk8s.py)."""
    reason = unavailable_reason()
    if reason:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    with control_plane(tmp_path_factory.mktemp("testbed")) as kube:
        yield kube


@pytest.fixture
def k8s(real_k8s: Kube) -> Iterator[Kube]:
    """The real control plane, emptied of what the test made after it."""
    yield real_k8s
    real_k8s.reset()
