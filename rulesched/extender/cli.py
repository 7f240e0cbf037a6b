"""``rulesched extender``: command-line settings, or the same from a YAML file (``--config``)."""

from __future__ import annotations

import argparse
import logging
import signal
from typing import TYPE_CHECKING, Any

from rulesched.config import add_rules_arguments, host_port, merge_flags, read_config

if TYPE_CHECKING:
    import asyncio

    from rulesched.reload import Reloader

log = logging.getLogger(__name__)


def add_extender_parser(sub: Any) -> None:
    ext = sub.add_parser("extender", help="serve the rules to kube-scheduler as a scheduler extender")
    ext.add_argument("--listen", metavar="HOST:PORT", help="default 0.0.0.0:8888 (port 0: any free port)")
    add_rules_arguments(ext)
    ext.add_argument("--kubeconfig", metavar="FILE", help="informer cache and binding through this cluster")
    ext.add_argument("--in-cluster", action="store_true", default=None, help="... through the service account")
    ext.add_argument("--tls-cert", metavar="FILE")
    ext.add_argument("--tls-key", metavar="FILE")
    ext.add_argument("--client-ca", metavar="FILE", help="require client certificates signed by this CA")
    ext.add_argument("--max-body-bytes", type=int, metavar="N", help="larger requests get 413 (default 128 MiB)")
    ext.add_argument(
        "--node-cache-bytes", type=int, metavar="N", help="full-node mode: JSON of decoded nodes kept (default 128 MiB)"
    )
    ext.add_argument(
        "--bind-verb",
        action="store_true",
        default=None,
        help="serve the bind verb (off by default; kube-scheduler's bindVerb must name it)",
    )
    ext.add_argument(
        "--scheduler-name",
        dest="scheduler_names",
        action="append",
        metavar="NAME",
        help="the bind verb binds pods naming this scheduler (repeatable; default default-scheduler)",
    )
    ext.add_argument("--config", metavar="FILE", help="YAML with the same settings (snake_case or flag names)")


def settings_from(args: argparse.Namespace) -> Any:
    from rulesched.extender.server import ExtenderSettings

    values = read_config(args.config, ExtenderSettings, ("rules", "scheduler_names")) if args.config else {}
    merge_flags(
        values,
        args,
        (
            "listen",
            "rules",
            "rules_configmap",
            "rules_max_delay",
            "kubeconfig",
            "in_cluster",
            "tls_cert",
            "tls_key",
            "client_ca",
            "max_body_bytes",
            "node_cache_bytes",
            "bind_verb",
            "scheduler_names",
        ),
    )
    if values.get("rules_configmap") and "rules" not in values:
        values["rules"] = ()  # the ConfigMap alone (its files may `extends "default"`)
    settings = ExtenderSettings(**values)
    host_port(settings.listen, "--listen")  # (checked before anything starts)
    return settings


def extender_command(args: argparse.Namespace) -> int:
    import asyncio  # (here: every other command's start would import it for nothing)

    from rulesched.extender.server import serve

    return asyncio.run(serve(settings_from(args), _stop_on_signals))


def _stop_on_signals(stop: asyncio.Event, reloader: Reloader) -> None:
    import asyncio

    loop = asyncio.get_running_loop()

    def stopping(signum: signal.Signals) -> None:
        log.info("%s: stopping", signum.name)
        stop.set()

    def reload() -> None:
        log.info("SIGHUP: reloading the rules")
        reloader.trigger()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping, signum)
    loop.add_signal_handler(signal.SIGHUP, reload)
