"""Preemption with its dry runs batched (rulesched.engine.dryrun) from one node on: upstream's
DefaultPreemption tables (tests/upstream/test_defaultpreemption.py) run both ways with it, and
tests/test_dry_runs_together.py compares the two ways on generated clusters."""

from __future__ import annotations

from typing import Any

import pytest

from rulesched.engine import ColumnStore
from rulesched.scheduler import preemption


def batch_every_preemption(monkeypatch: pytest.MonkeyPatch, calls: list[int] | None = None) -> None:
    """Every ``preemption.preempt`` call from now on (until ``monkeypatch`` undoes it) gets the
    snapshot's columns, batches its dry runs from one node on and hands every candidate on (the
    tables observe them); ``calls`` gets one entry per batch of dry runs."""
    monkeypatch.setattr(preemption, "BATCH_FROM", 1)
    monkeypatch.setattr(preemption, "OUTRANK", False)
    real, together = preemption.preempt, preemption.dry_runs_together

    def with_columns(
        snapshot: Any,
        session: Any,
        p: Any,
        statuses: Any = None,
        reserved: Any = None,
        columns: Any = None,
        between: Any = None,
        *more: Any,
        **named: Any,
    ) -> Any:
        columns = columns or ColumnStore().current(snapshot)
        return real(snapshot, session, p, statuses, reserved, columns, between, *more, **named)

    def counted(*args: Any, **named: Any) -> Any:
        if calls is not None:
            calls.append(1)
        return together(*args, **named)

    monkeypatch.setattr(preemption, "preempt", with_columns)
    monkeypatch.setattr(preemption, "dry_runs_together", counted)
