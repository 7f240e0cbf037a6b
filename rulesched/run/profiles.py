"""Profiles, as kube-scheduler's: one ``rulesched run`` serving several scheduler names.

Each profile is a scheduler name with its own rules (files, bundled sets, a ConfigMap: each its
own :class:`rulesched.reload.Reloader`, last good record and ``RulesRejected`` events) and,
optionally, its own percentage of nodes to score. Everything else is shared, as upstream shares
it: the informer cache, one scheduling queue (priority order across profiles), the nominations,
leader election, the binding workers and ``/metrics`` (each series labelled with its ``profile``).

A ``--config`` file lists them under ``profiles:``; without that list, the single-profile
settings (``--scheduler-name``, ``--rules``, ``--rules-configmap``) make the one profile, as they
always did. Mistakes are one line naming the file and the entry: an unknown key, a missing or
duplicate ``scheduler_name`` (kube-scheduler refuses duplicates too), two profiles on one
ConfigMap (each keeps its last good record beside its ConfigMap, under one name).
Next stage: :mod:`rulesched.run.loop` runs a reloader per profile and one scheduler for all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.errors import ConfigError

# The single-profile settings a `profiles:` list replaces (in the file, or as flags)
SINGLE_PROFILE_SETTINGS = ("scheduler_name", "rules", "rules_configmap")


@dataclass(frozen=True)
class ProfileSettings:
    """One profile: the scheduler name its pods give in ``spec.schedulerName``, and its rules."""

    scheduler_name: str
    rules: tuple[str, ...] = ("default",)
    rules_configmap: str | None = None  # NAMESPACE/NAME: its .rules keys join the set, watched
    percentage_of_nodes_to_score: int | None = None  # None: the top-level setting


def check_profiles(profiles: Sequence[ProfileSettings], where: str = "profiles") -> None:
    """Refuse what cannot work together: no profile, a name given twice, one ConfigMap shared
    (``where`` names the file in the message)."""
    if not profiles:
        raise ConfigError(f"{where}: at least one profile is needed")
    names: dict[str, int] = {}
    configmaps: dict[str, int] = {}
    for i, profile in enumerate(profiles):
        if not profile.scheduler_name:
            raise ConfigError(f"{where}[{i}].scheduler_name: required")
        if profile.scheduler_name in names:
            raise ConfigError(
                f"{where}[{i}].scheduler_name: duplicate value {profile.scheduler_name!r} "
                f"(profiles[{names[profile.scheduler_name]}] has it)"
            )
        names[profile.scheduler_name] = i
        configmap = profile.rules_configmap
        if configmap is not None:
            if configmap in configmaps:
                raise ConfigError(
                    f"{where}[{i}].rules_configmap: {configmap} is profiles[{configmaps[configmap]}]'s already "
                    "(each profile needs its own ConfigMap: its last good record is kept beside it)"
                )
            configmaps[configmap] = i
        percent = profile.percentage_of_nodes_to_score
        if percent is not None and not 0 <= percent <= 100:
            raise ConfigError(f"{where}[{i}].percentage_of_nodes_to_score: {percent} is not in 0..100")


def parse_profiles(path: str, raw: Any) -> tuple[ProfileSettings, ...]:
    """The ``profiles:`` list of a ``--config`` file: mappings with ``scheduler_name``, ``rules``
    (a path or a list), ``rules_configmap`` and ``percentage_of_nodes_to_score`` (snake_case or
    dashed). Without ``rules``, a profile runs the bundled ``default`` set, or its ConfigMap's
    alone when it names one (as the flags do)."""
    where = f"{path}: profiles"
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: expected a list of mappings (scheduler_name, rules, rules_configmap, ...)")
    known = [f.name for f in dataclasses.fields(ProfileSettings)]
    profiles = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}[{i}]: expected a mapping (scheduler_name, rules, ...), got {entry!r}")
        values: dict[str, Any] = {}
        for key, value in entry.items():
            name = str(key).replace("-", "_")
            if name not in known:
                raise ConfigError(f"{where}[{i}]: unknown setting {key!r} (known: {', '.join(known)})")
            values[name] = value
        profiles.append(_profile(f"{where}[{i}]", values))
    check_profiles(profiles, where)
    return tuple(profiles)


def _profile(where: str, values: dict[str, Any]) -> ProfileSettings:
    name = values.get("scheduler_name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.scheduler_name: required (the name pods give in spec.schedulerName)")
    rules = values.get("rules")
    if isinstance(rules, str):
        rules = [rules]
    if rules is not None and (not isinstance(rules, list) or not all(isinstance(r, str) and r for r in rules)):
        raise ConfigError(f"{where}.rules: expected a path or a list of paths, got {rules!r}")
    configmap = values.get("rules_configmap")
    if configmap is not None and not isinstance(configmap, str):
        raise ConfigError(f"{where}.rules_configmap: expected NAMESPACE/NAME, got {configmap!r}")
    if configmap is not None and configmap.count("/") != 1:
        raise ConfigError(f"{where}.rules_configmap: {configmap!r}: expected NAMESPACE/NAME")
    percent = values.get("percentage_of_nodes_to_score")
    if percent is not None and (not isinstance(percent, int) or isinstance(percent, bool)):
        raise ConfigError(f"{where}.percentage_of_nodes_to_score: expected a whole number 0..100, got {percent!r}")
    if rules is None:
        rules = [] if configmap else ["default"]
    if not rules and not configmap:
        raise ConfigError(f"{where}: no rules: give rules or rules_configmap")
    return ProfileSettings(name, tuple(rules), configmap, percent)
