"""Hypothesis profiles, chosen with ``HYPOTHESIS_PROFILE`` (tests/conftest.py loads one).

* ``dev`` (the default): each property's own number of examples, random each run, failures
  kept in the example database and replayed first next time;
* ``ci`` (``.ci/run``): half the examples, derandomized (the same examples every run, so CI
  fails only for a change, and ``HYPOTHESIS_PROFILE=ci`` reproduces it locally), no database,
  no deadline and no too-slow health check (CI machines are shared and slow);
* ``thorough``: ten times the examples, for a local run before a release or after an engine
  change (``HYPOTHESIS_PROFILE=thorough python -m pytest -q tests/test_lang_columns.py``).

A property whose examples cost more or less than most gives its count as ``examples(n)``: ``n``
under ``dev``, scaled by the profile (at least 1).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, settings

DEV_EXAMPLES = 100  # hypothesis's own default: ``examples(n)`` is n under dev
PROFILES = {
    "dev": settings(max_examples=DEV_EXAMPLES, deadline=timedelta(seconds=2), print_blob=True),
    "ci": settings(
        max_examples=DEV_EXAMPLES // 2,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    ),
    "thorough": settings(max_examples=DEV_EXAMPLES * 10, deadline=timedelta(seconds=2), print_blob=True),
}
for _name, _settings in PROFILES.items():
    settings.register_profile(_name, _settings)


def load_profile(name: str) -> None:
    if name not in PROFILES:
        raise ValueError(f"HYPOTHESIS_PROFILE={name!r}: expected one of {', '.join(PROFILES)}")
    settings.load_profile(name)


def examples(n: int) -> int:
    """``n`` examples under the dev profile, scaled to the one loaded."""
    return max(1, n * settings.default.max_examples // DEV_EXAMPLES)


def storage_directory() -> Path:
    """Hypothesis's database and caches: the user's cache directory, not the working directory."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rulesched" / "hypothesis"
