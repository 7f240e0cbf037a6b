"""``rulesched diff``: two rule sets simulated on one cluster, and what changes (being written)."""

from __future__ import annotations

import argparse
from typing import Any


def add_diff_parser(sub: Any) -> None:
    diff = sub.add_parser("diff", help="simulate two rule sets on one cluster and report what changes")
    diff.add_argument("cluster", nargs="+", metavar="CLUSTER")


def diff_command(args: argparse.Namespace) -> int:
    raise NotImplementedError
