"""``rulesched simulate``: command-line settings for the embedded simulator."""

from __future__ import annotations

import argparse
from typing import Any


def add_simulate_parser(sub: Any) -> None:
    sim = sub.add_parser("simulate", help="schedule the pending pods of a cluster read from YAML/JSON")
    sim.add_argument("cluster", nargs="+", metavar="CLUSTER", help="kubectl get -o yaml|json output files")
    sim.add_argument(
        "--rules",
        action="append",
        metavar="PATH",
        help="rules file or folder (repeatable; default: the bundled default rules)",
    )
    sim.add_argument("--output", choices=("table", "json"), default="table")
    sim.add_argument("--explain", action="store_true", help="include per-node filter reasons and scores")
    sim.add_argument("--seed", type=int, default=0, help="seed for breaking score ties")
    sim.add_argument(
        "--percentage-of-nodes-to-score",
        type=int,
        default=0,
        metavar="N",
        help="0 (default): upstream's adaptive formula; 100: all nodes",
    )
    sim.add_argument("--scheduler-name", metavar="NAME", help="only schedule pods naming this scheduler")


def run_simulate(args: argparse.Namespace) -> int:
    from rulesched.simulate.run import SimulateSettings, simulate_command

    settings = SimulateSettings(
        cluster=tuple(args.cluster),
        rules=tuple(args.rules or ("default",)),
        output=args.output,
        explain=args.explain,
        seed=args.seed,
        percentage_of_nodes_to_score=args.percentage_of_nodes_to_score,
        scheduler_name=args.scheduler_name,
    )
    return simulate_command(settings)
