"""``rulesched diff``'s command line: its arguments, and the command that runs
:func:`rulesched.authoring.diff.diff` and prints the result as text, json
(:mod:`rulesched.authoring.diff`) or html (:mod:`rulesched.authoring.diff_html`). Kept apart
from both so that neither imports the other's caller.
Next stage: :func:`rulesched.authoring.diff.diff`.
"""

from __future__ import annotations

import argparse
from typing import Any

from rulesched.authoring.diff import EXPLAIN_LIMIT, DiffSettings, diff, render_json, render_text
from rulesched.authoring.diff_html import render_html
from rulesched.simulate.cli import add_cycle_arguments


def add_diff_parser(sub: Any) -> None:
    diff = sub.add_parser(
        "diff",
        help="simulate two rule sets on one cluster and report what changes",
        description="Schedule a cluster's pending pods with an old and a new rule set and report the pods whose "
        "placement changes, naming the rules that made the difference. Exit 0: no change; 1: changes; 2: errors.",
    )
    diff.add_argument("cluster", nargs="+", metavar="CLUSTER", help="kubectl get -o yaml|json output files")
    diff.add_argument(
        "--old", action="append", metavar="PATH", help="the current rules: file, folder or 'default' (repeatable)"
    )
    diff.add_argument(
        "--new", action="append", required=True, metavar="PATH", help="the changed rules (repeatable, as --old)"
    )
    diff.add_argument(
        "--output",
        choices=("text", "json", "html"),
        default="text",
        help="text (default), json, or html: one self-contained page for a review",
    )
    add_cycle_arguments(diff, "seed for breaking score ties (the same for both runs)")
    diff.add_argument(
        "--explain-limit",
        type=int,
        default=EXPLAIN_LIMIT,
        metavar="N",
        help=f"name the rules behind the first N changed pods only (default {EXPLAIN_LIMIT})",
    )


def diff_command(args: argparse.Namespace) -> int:
    settings = DiffSettings(
        cluster=tuple(args.cluster),
        old=tuple(args.old or ("default",)),
        new=tuple(args.new),
        output=args.output,
        seed=args.seed,
        percentage_of_nodes_to_score=args.percentage_of_nodes_to_score,
        scheduler_name=args.scheduler_name,
        explain_limit=args.explain_limit,
        node_metrics=tuple(args.node_metrics or ()),
        min_candidate_nodes_percentage=args.min_candidate_nodes_percentage,
        min_candidate_nodes_absolute=args.min_candidate_nodes_absolute,
    )
    result = diff(settings)
    if settings.output == "html":
        print(render_html(result))
    else:
        print(render_json(result) if settings.output == "json" else render_text(result))
    return 1 if result.changed else 0
