"""``rulesched simulate``: command-line settings for the embedded simulator."""

from __future__ import annotations

import argparse
from typing import Any

from rulesched.config import add_preemption_arguments
from rulesched.simulate.nodes import ALL_NODES_UP_TO, BUSIEST_NODES


def add_simulate_parser(sub: Any) -> None:
    sim = sub.add_parser("simulate", help="schedule the pending pods of a cluster read from YAML/JSON")
    sim.add_argument(
        "cluster",
        nargs="+",
        metavar="CLUSTER",
        help="kubectl get -o yaml|json output files or folders; - (once) reads standard input",
    )
    sim.add_argument(
        "--rules",
        action="append",
        metavar="PATH",
        help="rules file or folder (repeatable; default: the bundled default rules)",
    )
    sim.add_argument(
        "--output",
        choices=("table", "json", "summary", "html"),
        default="table",
        help="table (default), json, summary: only the counts and the scheduling time, "
        "or html: one self-contained page (utilisation bars, placements, --explain's scores) for reviews",
    )
    sim.add_argument(
        "--explain",
        action="store_true",
        help="why each pod went where it did: its last cycle's best nodes with their per-rule scores and its "
        "filtered nodes grouped by reason (table: top 3 nodes; JSON: the best 10 and every reason, counted)",
    )
    sim.add_argument(
        "--explain-full",
        action="store_true",
        help="--explain, and JSON lists every evaluated node's reasons and scores (filtered, unresolvable, scores); "
        "both show under the top 3 nodes the lets each score read there (its terms)",
    )
    sim.add_argument(
        "--nodes",
        type=_node_count,
        metavar="N",
        help=f"node rows in table and html output: the N busiest (by their highest share of any resource); "
        f"0: every node (default: every node up to {ALL_NODES_UP_TO}, else the {BUSIEST_NODES} busiest)",
    )
    sim.add_argument(
        "--device-group",
        default="model",
        metavar="ATTRIBUTE",
        help="with DRA devices: the device attribute the devices table groups them by, per driver (default: model)",
    )
    sim.add_argument(
        "--apply",
        metavar="FIX.json",
        help="make one of `explain`'s fixes (a fix from its --output json, or a list of changes) on the cluster "
        "files before scheduling them",
    )
    sim.add_argument(
        "--strict",
        action="store_true",
        help="a pod bound to a node missing from the files is an error (default: warn and skip it)",
    )
    add_cycle_arguments(sim, "seed for breaking score ties")


def add_cycle_arguments(parser: argparse.ArgumentParser, seed_help: str) -> None:
    """What a simulated scheduling cycle takes (``simulate``, ``diff``): the tie-break seed,
    percentageOfNodesToScore and the scheduler name pods must give."""
    parser.add_argument("--seed", type=int, default=0, help=seed_help)
    parser.add_argument(
        "--percentage-of-nodes-to-score",
        type=int,
        default=0,
        metavar="N",
        help="0 (default): upstream's adaptive formula; 100: all nodes",
    )
    parser.add_argument("--scheduler-name", metavar="NAME", help="only schedule pods naming this scheduler")
    parser.add_argument(
        "--node-metrics",
        action="append",
        metavar="FILE",
        help="node load for load-aware rules (node.usage, node.metrics): the JSON `kubectl get --raw "
        "/apis/metrics.k8s.io/v1beta1/nodes` prints, or a name -> node -> value map (docs/language.md; repeatable)",
    )
    add_preemption_arguments(parser)


def _node_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number, 0 or more, not {text!r}")
    return value


def run_simulate(args: argparse.Namespace) -> int:
    from rulesched.simulate.run import SimulateSettings, simulate_command

    settings = SimulateSettings(
        cluster=tuple(args.cluster),
        rules=tuple(args.rules or ("default",)),
        output=args.output,
        explain=args.explain or args.explain_full,
        explain_full=args.explain_full,
        nodes=args.nodes,
        seed=args.seed,
        percentage_of_nodes_to_score=args.percentage_of_nodes_to_score,
        scheduler_name=args.scheduler_name,
        strict=args.strict,
        node_metrics=tuple(args.node_metrics or ()),
        min_candidate_nodes_percentage=args.min_candidate_nodes_percentage,
        min_candidate_nodes_absolute=args.min_candidate_nodes_absolute,
        apply=args.apply,
        device_group=args.device_group,
    )
    return simulate_command(settings)
