"""``rulesched run``: command-line settings (kube-scheduler's flag names where the meaning is
the same), or the same settings from a YAML file (``--config``), whose ``profiles:`` list serves
several scheduler names from one process (:mod:`rulesched.run.profiles`)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import Any

from rulesched.config import add_preemption_arguments, add_rules_arguments, merge_flags, read_config, seconds
from rulesched.errors import ConfigError
from rulesched.loadsources.settings import parse_load_sources
from rulesched.run.profiles import SINGLE_PROFILE_SETTINGS, parse_profiles

# The scheduling thread computes without pause while the binding workers and informers wait on
# sockets; each of those needs the interpreter lock back after every send and receive, and at
# CPython's default switch interval (5 ms) it can wait that long behind a cycle. 0.5 ms: basic
# workload 828 -> 893 pods/s, p99 creation-to-binding 6.0 -> 5.8 s (medians of 7 alternated
# runs, benchmarks/README.md); set for the run process only, like its signal handlers.
SWITCH_INTERVAL_SECONDS = 0.0005

log = logging.getLogger(__name__)


def add_run_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="schedule pods on a Kubernetes cluster")
    run.add_argument("--kubeconfig", metavar="FILE", help="default: the in-cluster service account")
    run.add_argument("--scheduler-name", metavar="NAME", help="pods naming this scheduler (default rulesched)")
    add_rules_arguments(run)
    run.add_argument("--bind-workers", type=int, metavar="N", help="parallel API calls for bindings (default 64)")
    run.add_argument(
        "--bind-process",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="bind (and post Scheduled events) from a helper process, off the scheduler's interpreter lock "
        "(default on)",
    )
    run.add_argument(
        "--percentage-of-nodes-to-score",
        type=int,
        metavar="N",
        help="0..100: a cycle stops looking once N%% of the nodes fit (default 0: upstream's adaptive formula)",
    )
    add_preemption_arguments(run, defaults=False)
    run.add_argument(
        "--evict-victims",
        choices=("budgeted", "all", "none"),
        help="preemption's victims through the Eviction API: those a PodDisruptionBudget selects, the others "
        "deleted as kube-scheduler deletes every victim (budgeted, the default); all; or none. Under budgeted and "
        "all, victims that would violate a budget are not chosen; a victim whose eviction a budget refuses all "
        "the same is spared while the budget holds, its preemptor tried again at once",
    )
    run.add_argument(
        "--cycle-deadline",
        type=seconds,
        metavar="DURATION",
        help="give a scheduling cycle up after this long: its pod is retried with backoff (default 5s; 0: never)",
    )
    run.add_argument(
        "--audit-interval",
        type=seconds,
        metavar="DURATION",
        help="audit the running pods against the rules this often: violations as metrics and as "
        "wgpolicyk8s.io PolicyReports per namespace (default 0: off)",
    )
    run.add_argument("--leader-elect", action="store_true", default=None, help="schedule only while holding a Lease")
    run.add_argument(
        "--leader-elect-resource-namespace", "--lease-namespace", metavar="NS", help="the Lease's (default kube-system)"
    )
    run.add_argument(
        "--leader-elect-resource-name", "--lease-name", metavar="NAME", help="the Lease's (default rulesched)"
    )
    run.add_argument("--leader-elect-lease-duration", type=seconds, metavar="DURATION", help="default 15s")
    run.add_argument("--leader-elect-renew-deadline", type=seconds, metavar="DURATION", help="default 10s")
    run.add_argument("--leader-elect-retry-period", type=seconds, metavar="DURATION", help="default 2s")
    run.add_argument(
        "--metrics-bind-address",
        metavar="HOST:PORT",
        help="/healthz, /readyz, /metrics (default 0.0.0.0:10251; '' turns them off)",
    )
    run.add_argument(
        "--pod-groups",
        action="store_true",
        default=None,
        help="watch scheduler-plugins' PodGroups (scheduling.x-k8s.io; the CRD must be installed): gangs",
    )
    run.add_argument(
        "--workloads",
        action="store_true",
        default=None,
        help="watch the workload API's PodGroups (scheduling.k8s.io/v1beta1 in 1.37, v1alpha2 in 1.36) and "
        "CompositePodGroups (v1alpha3): gangs; the API server must serve them (GenericWorkload)",
    )
    run.add_argument("--config", metavar="FILE", help="YAML with the same settings (snake_case or flag names)")


def settings_from(args: argparse.Namespace) -> Any:
    from rulesched.run.settings import RunSettings

    values = read_config(args.config, RunSettings) if args.config else {}
    if "load_sources" in values:
        values["load_sources"] = parse_load_sources(args.config, values["load_sources"])
    if "profiles" in values:
        values["profiles"] = parse_profiles(args.config, values["profiles"])
        given = [n for n in SINGLE_PROFILE_SETTINGS if n in values]
        given += [f"--{n.replace('_', '-')}" for n in SINGLE_PROFILE_SETTINGS if getattr(args, n) is not None]
        if given:
            raise ConfigError(
                f"{args.config}: {', '.join(given)} cannot be combined with profiles: set them in each profile"
            )
    merge_flags(
        values,
        args,
        (
            "kubeconfig",
            "scheduler_name",
            "rules",
            "rules_configmap",
            "rules_max_delay",
            "bind_workers",
            "bind_process",
            "percentage_of_nodes_to_score",
            "min_candidate_nodes_percentage",
            "min_candidate_nodes_absolute",
            "evict_victims",
            "cycle_deadline",
            "audit_interval",
            "leader_elect",
            "leader_elect_resource_namespace",
            "leader_elect_resource_name",
            "leader_elect_lease_duration",
            "leader_elect_renew_deadline",
            "leader_elect_retry_period",
            "pod_groups",
            "workloads",
        ),
    )
    address = (
        args.metrics_bind_address
        if args.metrics_bind_address is not None
        else values.get("metrics_bind_address", "0.0.0.0:10251")
    )
    values["metrics_bind_address"] = address or None
    if values.get("rules_configmap") and "rules" not in values:
        values["rules"] = ()  # the ConfigMap alone (its files may `extends "default"`)
    return RunSettings(**values)


def run_command(args: argparse.Namespace) -> int:
    from rulesched import __version__
    from rulesched.run.loop import Loop

    settings = settings_from(args)
    loop = Loop(settings)
    single = len(loop.profiles) == 1
    rules = loop.rules.rules
    log.info(
        "rulesched %s starting",
        __version__,
        extra={
            "version": __version__,
            "scheduler": ",".join(p.name for p in loop.profiles),
            "rules": rules.digest if single else None,  # (several profiles: a line each, below)
            "files": ",".join(rules.files) if single else None,
            "configmap": loop.profiles[0].settings.rules_configmap if single else None,
            "leader_elect": "on" if settings.leader_elect else "off",
            "lease": f"{settings.leader_elect_resource_namespace}/{settings.leader_elect_resource_name}"
            if settings.leader_elect
            else None,
            "metrics": settings.metrics_bind_address,
        },
    )
    for profile in loop.profiles if not single else ():
        log.info(
            "profile %s",
            profile.name,
            extra={
                "profile": profile.name,
                "rules": profile.rules.digest,
                "files": ",".join(profile.rules.rules.files),
                "configmap": profile.settings.rules_configmap,
            },
        )

    signalled: list[int] = []

    def stop(signum: int, frame: Any) -> None:
        # (a signal handler: only plain reads here, no locks the interrupted code may hold)
        if signalled:  # a second signal: exit now (as kube-scheduler does), bindings or not
            log.warning("%s again: exiting now", signal.Signals(signum).name)
            logging.shutdown()
            os._exit(1)
        signalled.append(signum)
        log.info(
            "%s: giving up the cycle under way, finishing bindings under way, then exiting",
            signal.Signals(signum).name,
            extra={"in_flight": loop.workers.in_flight, "grace": f"{settings.grace_seconds:g}s"},
        )
        loop.stop.set()
        loop.scheduler.queue.wake()

    def reload(signum: int, frame: Any) -> None:
        log.info("SIGHUP: reloading the rules")
        loop.reload()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, reload)
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    loop.run()
    left = loop.workers.in_flight
    (log.warning if left or loop.exit_code else log.info)(
        "stopped",
        extra={"exit": loop.exit_code, "cycles": loop.cycles, "abandoned": left or None},
    )
    if left:  # past the grace period: nor wait for them at exit (pool threads are joined)
        logging.shutdown()
        os._exit(loop.exit_code)
    return loop.exit_code
