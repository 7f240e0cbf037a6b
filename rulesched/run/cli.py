"""``rulesched run``: command-line settings (kube-scheduler's flag names where the meaning is
the same), or the same settings from a YAML file (``--config``)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
from pathlib import Path
from typing import Any

import yaml

from rulesched.errors import ConfigError

log = logging.getLogger(__name__)


def add_run_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="schedule pods on a Kubernetes cluster")
    run.add_argument("--kubeconfig", metavar="FILE", help="default: the in-cluster service account")
    run.add_argument("--scheduler-name", metavar="NAME", help="pods naming this scheduler (default rulesched)")
    run.add_argument("--rules", action="append", metavar="PATH", help="rules file or folder (repeatable)")
    run.add_argument("--bind-workers", type=int, metavar="N", help="parallel API calls for bindings (default 16)")
    run.add_argument("--percentage-of-nodes-to-score", type=int, metavar="N")
    run.add_argument("--leader-elect", action="store_true", default=None, help="schedule only while holding a Lease")
    run.add_argument("--leader-elect-resource-namespace", "--lease-namespace", metavar="NS")
    run.add_argument("--leader-elect-resource-name", "--lease-name", metavar="NAME")
    run.add_argument("--leader-elect-lease-duration", type=_seconds, metavar="DURATION", help="default 15s")
    run.add_argument("--leader-elect-renew-deadline", type=_seconds, metavar="DURATION", help="default 10s")
    run.add_argument("--leader-elect-retry-period", type=_seconds, metavar="DURATION", help="default 2s")
    run.add_argument(
        "--metrics-bind-address",
        metavar="HOST:PORT",
        help="/healthz, /readyz, /metrics (default 0.0.0.0:10251; '' turns them off)",
    )
    run.add_argument("--config", metavar="FILE", help="YAML with the same settings (snake_case or flag names)")


def _seconds(text: str) -> float:
    """A duration as kube-scheduler writes them (15s, 1m, 500ms) or plain seconds."""
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * factor
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (say 15s, 500ms, 1m)") from None


def settings_from(args: argparse.Namespace) -> Any:
    from rulesched.run.loop import RunSettings

    values: dict[str, Any] = {}
    if args.config:
        try:
            loaded = yaml.safe_load(Path(args.config).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as err:
            raise ConfigError(f"{args.config}: {err}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{args.config}: expected a mapping of settings")
        fields = {f.name for f in dataclasses.fields(RunSettings)}
        for key, value in loaded.items():
            name = str(key).replace("-", "_")
            if name not in fields:
                raise ConfigError(f"{args.config}: unknown setting {key!r} (known: {', '.join(sorted(fields))})")
            values[name] = tuple(value) if name == "rules" else value
    for name in (
        "kubeconfig",
        "scheduler_name",
        "bind_workers",
        "percentage_of_nodes_to_score",
        "leader_elect",
        "leader_elect_resource_namespace",
        "leader_elect_resource_name",
        "leader_elect_lease_duration",
        "leader_elect_renew_deadline",
        "leader_elect_retry_period",
    ):
        value = getattr(args, name)
        if value is not None:
            values[name] = value
    if args.rules:
        values["rules"] = tuple(args.rules)
    address = (
        args.metrics_bind_address
        if args.metrics_bind_address is not None
        else values.get("metrics_bind_address", "0.0.0.0:10251")
    )
    values["metrics_bind_address"] = address or None
    return RunSettings(**values)


def run_command(args: argparse.Namespace) -> int:
    from rulesched.run.loop import Loop

    loop = Loop(settings_from(args))

    def stop(signum: int, frame: Any) -> None:
        log.info("signal %d: finishing bindings under way, then exiting", signum)
        loop.stop.set()
        loop.scheduler.queue.wake()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    loop.run()
    return loop.exit_code
