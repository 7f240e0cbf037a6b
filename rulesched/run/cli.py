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
    run.add_argument("--config", metavar="FILE", help="YAML with the same settings (snake_case or flag names)")


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
    for name in ("kubeconfig", "scheduler_name", "bind_workers", "percentage_of_nodes_to_score"):
        value = getattr(args, name)
        if value is not None:
            values[name] = value
    if args.rules:
        values["rules"] = tuple(args.rules)
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
    return 0
