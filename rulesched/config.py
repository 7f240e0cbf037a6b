"""Settings files and values shared by the long-running commands (``run``, ``extender``).

A ``--config`` file is YAML mapping setting names (snake_case, or the flag's own spelling with
dashes) to values; flags given on the command line win over it. Durations are written as
kube-scheduler writes them (``15s``, ``500ms``, ``1m``) or as plain seconds. ``log_level`` and
``log_format`` are read before the command starts (:func:`read_log_config`, for
:mod:`rulesched.logs`), so the first lines are already at the level asked for.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from rulesched.errors import ConfigError
from rulesched.scheduler.framework import MIN_CANDIDATE_NODES_ABSOLUTE, MIN_CANDIDATE_NODES_PERCENTAGE
from rulesched.yamlreader import read_yaml_file


def seconds(text: str) -> float:
    """A duration as kube-scheduler writes them (15s, 1m, 500ms) or plain seconds."""
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * factor
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (say 15s, 500ms, 1m)") from None


def host_port(address: str, flag: str) -> tuple[str, int]:
    """A listening address, ``HOST:PORT`` (``:PORT`` or ``0.0.0.0:PORT``: every interface;
    ``[::1]:PORT`` for IPv6; port 0: any free one), checked before anything starts: ConfigError
    naming the flag otherwise."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535 or any(c.isspace() for c in host):
        raise ConfigError(f"{flag} {address!r}: expected HOST:PORT (say 0.0.0.0:10251, 127.0.0.1:0 or [::1]:8888)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", int(port)


def add_rules_arguments(parser: argparse.ArgumentParser) -> None:
    """``--rules``, ``--rules-configmap`` and ``--rules-max-delay``, as ``run`` and ``extender``
    take them (both sources watched; the other reload settings are --config only)."""
    parser.add_argument("--rules", action="append", metavar="PATH", help="rules file or folder (repeatable; watched)")
    parser.add_argument(
        "--rules-configmap", metavar="NS/NAME", help="a ConfigMap whose .rules keys join the set (watched)"
    )
    parser.add_argument(
        "--rules-max-delay",
        type=seconds,
        metavar="DURATION",
        help="apply rule changes at most this long after the first of a burst, even if more keep coming (default 2s)",
    )


LOG_SETTINGS = ("log_level", "log_format")  # every --config file may carry them


def _load(path: str) -> dict[Any, Any]:
    """The file's mapping, read as cluster files are (aliases bounded; one-line errors)."""
    try:
        loaded = read_yaml_file(path) or {}
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    return loaded


def read_log_config(path: str) -> dict[str, Any]:
    """``log_level`` and ``log_format`` from a ``--config`` file (flag spellings too)."""
    return {str(k).replace("-", "_"): v for k, v in _load(path).items() if str(k).replace("-", "_") in LOG_SETTINGS}


def read_config(path: str, settings: type[Any], tuples: tuple[str, ...] = ("rules",)) -> dict[str, Any]:
    """The settings a ``--config`` file gives, checked against the dataclass ``settings``
    (the logging settings, read by :func:`read_log_config`, are skipped)."""
    loaded = _load(path)
    fields = {f.name for f in dataclasses.fields(settings)}
    # durations: the fields holding seconds (their type says float), written "15s" or 15
    durations = {f.name for f in dataclasses.fields(settings) if "float" in str(f.type)}
    values: dict[str, Any] = {}
    for key, value in loaded.items():
        name = str(key).replace("-", "_")
        if name in LOG_SETTINGS:
            continue
        if name not in fields:
            known = sorted(fields | set(LOG_SETTINGS))
            raise ConfigError(f"{path}: unknown setting {key!r} (known: {', '.join(known)})")
        if name in durations and isinstance(value, str):
            try:
                value = seconds(value)
            except argparse.ArgumentTypeError as err:
                raise ConfigError(f"{path}: {key}: {err}") from None
        values[name] = tuple(value) if name in tuples and isinstance(value, list) else value
    return values


def merge_flags(values: dict[str, Any], args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, Any]:
    """Flags given on the command line (not None) over the file's values."""
    for name in names:
        value = getattr(args, name)
        if value is not None:
            values[name] = tuple(value) if isinstance(value, list) else value
    return values


def add_preemption_arguments(parser: argparse.ArgumentParser, defaults: bool = True) -> None:
    """DefaultPreemptionArgs: how many candidate nodes a preemption looks for (``simulate``,
    ``diff``; ``run`` without defaults, which its --config may give)."""
    parser.add_argument(
        "--min-candidate-nodes-percentage",
        type=int,
        default=MIN_CANDIDATE_NODES_PERCENTAGE if defaults else None,
        metavar="N",
        help=f"preemption looks for candidates on N%% of the nodes it may help on (default {MIN_CANDIDATE_NODES_PERCENTAGE})",
    )
    parser.add_argument(
        "--min-candidate-nodes-absolute",
        type=int,
        default=MIN_CANDIDATE_NODES_ABSOLUTE if defaults else None,
        metavar="N",
        help=f"... or on N nodes, whichever is more (default {MIN_CANDIDATE_NODES_ABSOLUTE})",
    )
