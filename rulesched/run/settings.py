"""``rulesched run``'s settings: one frozen dataclass built by :mod:`rulesched.run.cli` from the
command line or a ``--config`` file, checked whole when made (a bad value is one line naming the
setting, before anything starts), and handed to :class:`rulesched.run.loop.Loop`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rulesched.config import host_port
from rulesched.errors import ConfigError
from rulesched.loadsources.settings import LoadSourceSettings
from rulesched.run.evictions import BUDGETED, EVICT_VICTIMS
from rulesched.run.leader import check_timing
from rulesched.run.profiles import ProfileSettings, check_profiles
from rulesched.scheduler.framework import (
    MIN_CANDIDATE_NODES_ABSOLUTE,
    MIN_CANDIDATE_NODES_PERCENTAGE,
    check_percentage_of_nodes_to_score,
    check_sampling,
)

# A cycle is given up this long after it took its pod (--cycle-deadline). The costliest set the
# cost limits accept takes ~0.65 s per pod on 5,000 nodes running 50,000 pods (docs/language.md,
# "Cost"; a default-profile cycle: ~16 ms), so 5 s only stops cycles something is wrong with
# (limits lifted, a machine starved), with room for a loaded one; and it is kube-scheduler's
# extender httpTimeout, the time it gives one verb of one pod, so one pod can hold the queue at
# most as long as an extender may.
CYCLE_DEADLINE_SECONDS = 5.0


@dataclass(frozen=True)
class RunSettings:
    """Built by the command line (or a --config file); named like kube-scheduler's flags.
    ``scheduler_name``, ``rules`` and ``rules_configmap`` are the one profile's when
    ``profiles`` is empty (see :attr:`effective_profiles`)."""

    kubeconfig: str | None = None
    scheduler_name: str = "rulesched"
    rules: tuple[str, ...] = ("default",)
    rules_configmap: str | None = None  # NAMESPACE/NAME: its .rules keys join the set, watched
    profiles: tuple[ProfileSettings, ...] = ()  # several scheduler names (--config's profiles:)
    rules_debounce: float = 0.1  # a burst of rule changes ends after this much quiet ...
    rules_max_delay: float = 2.0  # ... or this long after its first change
    rules_event_interval: float = 60.0  # at most one RulesRejected event per interval
    rules_last_good: bool = True  # keep the last accepted ConfigMap set in NAME-last-good
    bind_workers: int = 64  # API calls at once: bindings in the binding process, evictions and status writes here
    # Bindings (and their Scheduled events) in a process of their own, off the scheduler's
    # interpreter lock (rulesched.run.binder); off: on the scheduler's own threads.
    bind_process: bool = True
    percentage_of_nodes_to_score: int = 0
    min_candidate_nodes_percentage: int = MIN_CANDIDATE_NODES_PERCENTAGE  # (DefaultPreemptionArgs)
    min_candidate_nodes_absolute: int = MIN_CANDIDATE_NODES_ABSOLUTE
    # preemption's victims through the Eviction API: those a PodDisruptionBudget selects
    # (budgeted; the others with a DELETE, as kube-scheduler deletes them), all, or none
    evict_victims: str = BUDGETED
    grace_seconds: float = 10.0  # on SIGTERM: how long in-flight bindings may take
    leader_elect: bool = False
    leader_elect_resource_namespace: str = "kube-system"
    leader_elect_resource_name: str = "rulesched"
    leader_elect_lease_duration: float = 15.0
    leader_elect_renew_deadline: float = 10.0
    leader_elect_retry_period: float = 2.0
    metrics_bind_address: str | None = None  # host:port of /healthz, /readyz, /metrics (None: off)
    cycle_deadline: float = CYCLE_DEADLINE_SECONDS  # seconds a scheduling cycle may take; 0: no limit
    load_sources: tuple[LoadSourceSettings, ...] = ()  # node load for rules (--config's load_sources:)
    audit_interval: float = 0.0  # seconds between audits of the running pods (PolicyReports); 0: off
    # Watch pod groups (gangs): scheduler-plugins' PodGroups (the CRD must be installed) and
    # KEP-4671's Workloads (the alpha API must be served); their members are placed all or nothing.
    pod_groups: bool = False
    workloads: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.audit_interval, bool) or not isinstance(self.audit_interval, int | float):
            raise ConfigError(f"audit_interval: expected seconds, got {self.audit_interval!r}")
        if not self.audit_interval >= 0:
            raise ConfigError(f"audit_interval: {self.audit_interval!r}: expected 0 (off) or more seconds")
        check_profiles(self.effective_profiles)
        if not isinstance(self.bind_process, bool):
            raise ConfigError(f"bind_process: expected true or false, got {self.bind_process!r}")
        for name in ("min_candidate_nodes_percentage", "min_candidate_nodes_absolute"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name}: expected a whole number, got {value!r}")
        check_sampling(self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute)
        if self.evict_victims not in EVICT_VICTIMS:
            raise ConfigError(f"evict_victims: {self.evict_victims!r}: expected one of {', '.join(EVICT_VICTIMS)}")
        check_percentage_of_nodes_to_score(self.percentage_of_nodes_to_score)
        if self.metrics_bind_address:  # (checked before anything starts, not when the server binds)
            host_port(self.metrics_bind_address, "--metrics-bind-address")
        if isinstance(self.cycle_deadline, bool) or not isinstance(self.cycle_deadline, int | float):
            raise ConfigError(f"cycle_deadline: expected seconds, got {self.cycle_deadline!r}")
        if not self.cycle_deadline >= 0:
            raise ConfigError(f"cycle_deadline: {self.cycle_deadline!r}: expected 0 (no deadline) or more seconds")
        if self.leader_elect:  # (refused before anything starts: fencing relies on these)
            check_timing(
                self.leader_elect_lease_duration, self.leader_elect_renew_deadline, self.leader_elect_retry_period
            )

    @property
    def effective_profiles(self) -> tuple[ProfileSettings, ...]:
        """The profiles to serve: ``profiles``, or the one the single-profile settings make."""
        return self.profiles or (ProfileSettings(self.scheduler_name, self.rules, self.rules_configmap),)
