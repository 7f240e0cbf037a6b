"""``rulesched test``: rule unit tests in YAML files next to the rules (being written)."""

from __future__ import annotations

import argparse
from typing import Any


def add_test_parser(sub: Any) -> None:
    test = sub.add_parser("test", help="run rule unit tests (YAML files next to the rules)")
    test.add_argument("paths", nargs="+", metavar="PATH", help="test files or folders")


def test_command(args: argparse.Namespace) -> int:
    raise NotImplementedError
