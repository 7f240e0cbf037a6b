"""Hot reload: the active rule set follows its sources while the scheduler or extender runs.

Sources are files and folders (``--rules``, watched with watchfiles; SIGHUP asks too) and a
ConfigMap (``--rules-configmap NAMESPACE/NAME``, watched through the API: every key ending in
``.rules`` is a file of the set; the files named by ``--rules`` come first, so ``--rules default``
composes as on the command line).

A change marks the set dirty. The reloader's own thread waits until the changes have been quiet
for ``debounce`` seconds (a burst of updates is one reload), but never more than ``max_delay``
after the first change it saw (a stream of updates that never goes quiet is still applied, at
least that often). It then reads every source as it is, and parses, checks and compiles the whole
set there, off the scheduling path. A set that compiles is swapped into the
:class:`rulesched.lang.RulesHandle` in one assignment; a scheduling cycle and an extender request
read the handle once, at their start, so none ever sees a mix, and the old set's caches go with
it. A set that does not compile changes nothing: the last good set stays, every diagnostic is
logged with its ``file:line:col``, a Warning Event carrying them is posted on the ConfigMap (when
the rules come from one; at most one per ``event_interval``, the refusals in between counted in
the next: :mod:`rulesched.rejections`), and the failure is counted. Any other failure while
loading (a RecursionError, a bug) is refused the same way; the reloader's thread never dies of
one. A set equal in content to the active one (the same digest) is not swapped.

Restarts: a set accepted from a ConfigMap is recorded in ``NAME-last-good``
(:mod:`rulesched.last_good`) by the replica that may write. At start, a live set that does not
compile is replaced by the recorded one, with a Warning event naming the rejected keys; with no
record either, the handle starts empty (not loaded): the process stays up, not ready and not
scheduling, until the first valid set arrives through the watches.
Next stage: the loop (:mod:`rulesched.run.loop`) and the extender read ``RulesHandle.rules``.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import watchfiles

from rulesched.errors import ConfigError, KubeError, NotFoundError, RulesError
from rulesched.kube.api import KubeApi
from rulesched.kube.informer import Delta, Informer
from rulesched.kube.resources import CONFIGMAPS, Scope
from rulesched.lang import (
    Diagnostic,
    RuleSet,
    RulesHandle,
    Severity,
    bundled_rules_dir,
    load_sources,
    resolve_rules_path,
)
from rulesched.last_good import LastGoodRecord, Recorded
from rulesched.rejections import RejectionEvents

log = logging.getLogger(__name__)

# Files (or paths) and ConfigMap texts to a compiled set: load_sources, or a test's stand-in.
Loader = Callable[[Sequence[Path], Mapping[str, str | bytes] | None], RuleSet]
RECORD_RETRY = 5.0  # seconds before writing the last good record again after a failure (doubling)
RECORD_RETRY_MAX = 300.0


@dataclass(frozen=True)
class ReloadSettings:
    """How reloads are paced and reported (the command line's --rules-* settings)."""

    debounce: float = 0.1  # a burst of changes ends after this much quiet ...
    max_delay: float = 2.0  # ... or this long after its first change, whichever comes first
    event_interval: float = 60.0  # at most one RulesRejected event per interval (the rest counted)
    last_good: bool = True  # record accepted ConfigMap sets in NAME-last-good and start from it

    def __post_init__(self) -> None:
        if self.debounce < 0 or self.max_delay <= 0 or self.event_interval < 0:
            raise ConfigError("rules reload: debounce, max delay and event interval must be positive")


@dataclass(frozen=True)
class RulesSources:
    """Where the rule set comes from: paths (files, folders, bundled names) and a ConfigMap."""

    paths: tuple[str, ...] = ()
    configmap: str | None = None  # NAMESPACE/NAME

    def __post_init__(self) -> None:
        if self.configmap is not None and self.configmap.count("/") != 1:
            raise ConfigError(f"--rules-configmap {self.configmap!r}: expected NAMESPACE/NAME")
        if not self.paths and self.configmap is None:
            raise ConfigError("no rules: give --rules PATH or --rules-configmap NAMESPACE/NAME")

    @property
    def configmap_scope(self) -> Scope | None:
        if self.configmap is None:
            return None
        namespace, name = self.configmap.split("/")
        return Scope(namespace, name)

    def resolved(self) -> list[Path]:
        return [resolve_rules_path(p) for p in self.paths]

    def watched(self) -> list[Path]:
        """What to watch on disk: the folders of the user's files (a ConfigMap mounted as a
        volume swaps a symlink in its folder), never the bundled sets."""
        bundled = bundled_rules_dir().resolve()
        folders = set()
        for path in self.resolved():
            path = path.resolve()
            if path.is_relative_to(bundled):
                continue
            folders.add(path if path.is_dir() else path.parent)
        return sorted(folders)


@dataclass(frozen=True)
class ReloadOutcome:
    ok: bool
    digest: str  # the active set's, after this reload
    files: tuple[str, ...]
    error: str = ""
    changed: bool = False  # a new set was swapped in


def configmap_texts(obj: dict[str, Any]) -> dict[str, str | bytes]:
    """A ConfigMap's ``data`` and ``binaryData`` entries (the keys decide what is a rules file)."""
    texts: dict[str, str | bytes] = {}
    for key, value in (obj.get("data") or {}).items():
        texts[str(key)] = str(value)
    for key, value in (obj.get("binaryData") or {}).items():
        try:
            texts[str(key)] = base64.b64decode(str(value))
        except ValueError:
            texts[str(key)] = b"\x00"  # decode_source then says it is not a rules file
    return texts


def _errors(err: BaseException) -> list[Diagnostic]:
    found = err.diagnostics if isinstance(err, RulesError) else ()
    return [d for d in found if isinstance(d, Diagnostic) and d.severity is Severity.ERROR]


def render(err: BaseException) -> list[str]:
    """Each error as ``file:line:col: message [code]``; the error's own line when it carries no
    diagnostics (an unreadable file, a ConfigMap with no .rules keys); any other exception (a
    RecursionError on a deeply nested set, a bug) as one line naming it."""
    if not isinstance(err, RulesError):
        return [f"internal error while loading the rules: {type(err).__name__}: {err}"]
    return [f"{d.location}: {d.message} [{d.code}]" for d in _errors(err)] or [str(err)]


def rejected_keys(err: BaseException, configmap: dict[str, Any] | None) -> list[str]:
    """The ConfigMap keys a refusal names (every ``.rules`` key when no diagnostic names one)."""
    if configmap is None:
        return []
    keys = sorted(configmap_texts(configmap))
    named = {d.span.source.path if d.span is not None else d.path for d in _errors(err)}
    return [k for k in keys if k in named] or [k for k in keys if k.endswith(".rules")]


class _Labelled(logging.LoggerAdapter[logging.Logger]):
    """A logger whose lines carry its fields besides their own (``profile=NAME``)."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


class Reloader:
    def __init__(
        self,
        sources: RulesSources,
        api: KubeApi | None,
        stop: threading.Event,
        on_outcome: Callable[[ReloadOutcome], None] = lambda outcome: None,
        settings: ReloadSettings | None = None,
        controller: str = "rulesched",
        loader: Loader = load_sources,
        may_record: Callable[[], bool] = lambda: True,
        profile: str | None = None,
    ) -> None:
        """``may_record``: whether this replica writes the last good record now (the leader);
        ``loader`` compiles the sources (``load_sources``; tests inject failures through it);
        ``profile``: the scheduler name every log line carries (a process serving several)."""
        self.sources, self.api, self.stop = sources, api, stop
        self._log: logging.Logger | logging.LoggerAdapter[logging.Logger] = (
            log if profile is None else _Labelled(log, {"profile": profile})
        )
        self.handle: RulesHandle | None = None  # from initial()
        self.on_outcome = on_outcome
        self.settings = settings or ReloadSettings()
        self.controller = controller
        self.loader, self.may_record = loader, may_record
        self.reloads = 0  # sets swapped in
        self.failures = 0  # sets refused
        self.origin = ""  # what initial() started from: "sources", "last good record" or "nothing"
        self.events = RejectionEvents(self._post_warning, self.settings.event_interval)
        self._dirty = threading.Event()
        self._lock = threading.Lock()
        self._configmap: dict[str, Any] | None = None  # the latest ConfigMap object
        self._absent = "not found"  # why there is no ConfigMap object
        self._threads: list[threading.Thread] = []
        self._informer: Informer | None = None
        self._record: LastGoodRecord | None = None
        self._unrecorded: tuple[dict[str, Any], str] | None = None  # (ConfigMap, digest) to record
        self._recorded = ""  # the digest the record is known to hold
        self._record_due, self._record_backoff = 0.0, RECORD_RETRY
        scope = sources.configmap_scope
        if scope is not None:
            if api is None:
                raise ConfigError("--rules-configmap needs API access (--kubeconfig, or running in a cluster)")
            self._informer = Informer(api, CONFIGMAPS, self._configmap_changed, stop, scope=scope)
            if self.settings.last_good:
                namespace, name = str(sources.configmap).split("/")
                self._record = LastGoodRecord(api, namespace, name, controller)
                if not self._record.usable:
                    self._log.warning("ConfigMap name too long for %s: no last good record", self._record.name)
                    self._record = None

    # --- the first set ------------------------------------------------------------------------
    def initial(self) -> RulesHandle:
        """The handle to start with: the sources as they are now (the ConfigMap with one GET);
        if they do not compile, the last good record; with neither, an empty handle (not
        loaded) that the first valid set fills. Never raises for the rules themselves."""
        scope = self.sources.configmap_scope
        if scope is not None:
            assert self.api is not None and scope.name is not None
            try:
                configmap = self.api.get(CONFIGMAPS, scope.namespace, scope.name)
            except NotFoundError:
                self._absent = "not found"
            except KubeError as err:
                self._absent = f"not read: {err}"
            else:
                with self._lock:
                    self._configmap = configmap
        try:
            rules, used = self._load()
        except Exception as err:  # noqa: BLE001 - whatever the failure, start from what else there is
            return self._start_without(err)
        self.handle = RulesHandle(rules)
        self.origin = "sources"
        self._accepted(used, rules.digest)
        self._log.debug("rules loaded", extra={"rules": rules.digest, "files": ",".join(rules.files)})
        return self.handle

    def _start_without(self, err: BaseException) -> RulesHandle:
        """The live set was refused at start: the last good record, or nothing yet."""
        lines = render(err)
        for line in lines:
            self._log.error("rules not loaded: %s", line)
        _debug_traceback(err)
        with self._lock:
            configmap = self._configmap
        keys = rejected_keys(err, configmap)
        rejected = f"ConfigMap {self.sources.configmap} keys {', '.join(keys)} rejected" if keys else "rules not loaded"
        restored = self._restore()
        if restored is not None:
            rules, recorded = restored
            self.handle = RulesHandle(rules)
            self.origin = "last good record"
            when = f" recorded at {recorded.recorded_at}" if recorded.recorded_at else ""
            where = self._record.name if self._record is not None else ""
            self._log.warning(
                "%s; starting from the last good rules %s%s (ConfigMap %s)",
                rejected,
                rules.digest,
                when,
                where,
                extra={"rules": rules.digest},
            )
            self._reject(f"{rejected} at start; running the last good set {rules.digest}{when}: " + "\n".join(lines))
        else:
            more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
            self.handle = RulesHandle.empty(f"no valid rules: {lines[0]}{more}")
            self.origin = "nothing"
            self._log.error(
                "no valid rules and no last good set: not scheduling until a valid set arrives "
                "(the sources are watched)"
            )
            self._reject(
                f"{rejected} at start and no last good set: not scheduling until a valid set arrives: "
                + "\n".join(lines)
            )
        return self.handle

    def _restore(self) -> tuple[RuleSet, Recorded] | None:
        record = self._record
        if record is None:
            return None
        try:
            recorded = record.read()
        except KubeError as err:
            self._log.error("last good rules %s/%s not read: %s", record.namespace, record.name, err)
            return None
        if recorded is None:
            self._log.warning("no last good rules recorded in %s/%s", record.namespace, record.name)
            return None
        try:
            rules = self.loader(self.sources.resolved(), configmap_texts(recorded.configmap))
        except Exception as err:  # noqa: BLE001 - a record that no longer compiles is no fallback
            self._log.error("last good rules %s/%s do not compile: %s", record.namespace, record.name, render(err)[0])
            return None
        if recorded.digest and rules.digest != recorded.digest:
            self._log.warning(
                "last good rules recorded as %s compile to %s now (the bundled sets or --rules files changed)",
                recorded.digest,
                rules.digest,
            )
        self._recorded = recorded.digest
        return rules, recorded

    def _load(self) -> tuple[RuleSet, dict[str, Any] | None]:
        """The set the sources make now, and the ConfigMap object it was made from."""
        with self._lock:
            configmap, absent = self._configmap, self._absent
        if self.sources.configmap is not None and configmap is None:
            raise RulesError(f"ConfigMap {self.sources.configmap} {absent}")
        texts = configmap_texts(configmap) if configmap is not None else None
        return self.loader(self.sources.resolved(), texts), configmap

    # --- watching -----------------------------------------------------------------------------
    def start(self) -> Reloader:
        assert self.handle is not None, "initial() first"
        self._spawn(self._run, "rules-reload")
        folders = self.sources.watched()
        if folders:
            self._spawn(lambda: self._watch_files(folders), "rules-files")
        if self._informer is not None:
            self._informer.start()
        return self

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def join(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)
        if self._informer is not None:
            self._informer.join(timeout)

    def trigger(self) -> None:
        """Reload soon (SIGHUP, a file or ConfigMap change)."""
        self._dirty.set()

    def _watch_files(self, folders: list[Path]) -> None:
        try:
            for _ in watchfiles.watch(*folders, stop_event=self.stop, debounce=50, step=20, raise_interrupt=False):
                self.trigger()
        except (OSError, RuntimeError) as err:  # a folder gone: SIGHUP still works
            self._log.warning("watching %s stopped: %s", ", ".join(map(str, folders)), err)

    def _configmap_changed(self, delta: Delta) -> None:
        with self._lock:
            held = self._configmap
            if delta.type == "DELETED":
                self._configmap, self._absent = None, "was deleted"
            else:
                self._configmap = delta.obj
                if held is not None and _version(held) == _version(delta.obj):
                    return  # the version already held (the informer's first list, a relist): no change
        self.trigger()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self._tick()
                if not self._dirty.wait(0.2):
                    continue
                if not self._settle():
                    return
                self.reload_now()
            except Exception as err:  # noqa: BLE001 - reported; the reloader must outlive any failure
                self._log.error("rules reloader: %s: %s (still watching)", type(err).__name__, err)
                _debug_traceback(err)
                self.stop.wait(0.2)

    def _settle(self) -> bool:
        """Coalesce a burst: wait for ``debounce`` of quiet, or until ``max_delay`` after the
        burst's first change (a stream that never goes quiet is applied that often). False
        when stopping."""
        deadline = time.monotonic() + self.settings.max_delay
        while True:
            self._dirty.clear()
            wait = max(0.0, min(self.settings.debounce, deadline - time.monotonic()))
            if self.stop.wait(wait):
                return False
            if not self._dirty.is_set() or time.monotonic() >= deadline:
                return True  # (changes after the deadline stay marked: the next burst has them)

    def _tick(self) -> None:
        """Between reloads: post held refusals, write the last good record when it is due."""
        self.events.flush()
        pending, record = self._unrecorded, self._record
        if pending is None or record is None or time.monotonic() < self._record_due or not self.may_record():
            return
        configmap, digest = pending
        try:
            written = record.write(configmap, digest)
        except Exception as err:  # noqa: BLE001 - 403, the API down (or a bug): retried, with backoff
            self._log.warning(
                "last good rules not recorded in %s/%s: %s (again in %.0fs)",
                record.namespace,
                record.name,
                err,
                self._record_backoff,
            )
            self._record_due = time.monotonic() + self._record_backoff
            self._record_backoff = min(self._record_backoff * 2, RECORD_RETRY_MAX)
            return
        self._record_backoff = RECORD_RETRY
        if written:
            self._unrecorded, self._recorded = None, digest
            self._log.info(
                "last good rules %s recorded in %s/%s", digest, record.namespace, record.name, extra={"rules": digest}
            )

    def _accepted(self, configmap: dict[str, Any] | None, digest: str) -> None:
        """A set made from ``configmap`` compiled: it is the one to record (unless it is)."""
        if self._record is None or configmap is None:
            return
        self._unrecorded = None if digest == self._recorded else (configmap, digest)

    # --- one reload ---------------------------------------------------------------------------
    def reload_now(self) -> ReloadOutcome:
        """Read every source, compile, and swap the set in if it compiled and differs. Any
        failure refuses the set (logged, an event, counted): the active set stays."""
        handle = self.handle
        assert handle is not None, "initial() first"
        active = handle.rules
        try:
            rules, used = self._load()
        except Exception as err:  # noqa: BLE001 - a RecursionError or a bug refuses the set as a typo does
            outcome = self._refused(handle, err)
        else:
            changed = not handle.loaded or rules.digest != active.digest
            if changed:
                first = not handle.loaded
                handle.swap(rules)
                self.reloads += 1
                if first:
                    self._log.info(
                        "rules loaded: %s; scheduling starts",
                        rules.digest,
                        extra={"rules": rules.digest, "files": ",".join(rules.files)},
                    )
                else:
                    self._log.info(
                        "rules reloaded: %s -> %s",
                        active.digest,
                        rules.digest,
                        extra={"rules": rules.digest, "files": ",".join(rules.files)},
                    )
            self._accepted(used, rules.digest)
            outcome = ReloadOutcome(True, handle.digest, tuple(handle.rules.files), changed=changed)
        self.on_outcome(outcome)
        return outcome

    def _refused(self, handle: RulesHandle, err: BaseException) -> ReloadOutcome:
        self.failures += 1
        active = handle.rules
        lines = render(err)
        for line in lines:
            self._log.error("rules rejected: %s", line, extra={"rules": active.digest})
        _debug_traceback(err)
        with self._lock:
            keys = rejected_keys(err, self._configmap)
        named = f"keys {', '.join(keys)} " if keys else ""
        if handle.loaded:
            self._log.error("keeping rules %s", active.digest, extra={"rules": active.digest})
            note = f"rules {named}not loaded, keeping the last good set {active.digest}: "
        else:
            handle.waiting = f"no valid rules: {lines[0]}"
            self._log.error("still no valid rules: not scheduling until a valid set arrives")
            note = f"rules {named}not loaded, and no good set yet: not scheduling: "
        self._reject(note + "\n".join(lines))
        return ReloadOutcome(False, active.digest, tuple(active.files), "; ".join(lines))

    # --- events -------------------------------------------------------------------------------
    def _reject(self, note: str) -> None:
        if self.api is not None and self.sources.configmap is not None:
            self.events.rejected(note)

    def _post_warning(self, note: str) -> None:
        """A Warning Event on the ConfigMap (nothing to post it on when it is gone)."""
        with self._lock:
            configmap = self._configmap
        if self.api is None or configmap is None:
            return
        meta = configmap.get("metadata") or {}
        regarding = {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "namespace": str(meta.get("namespace") or ""),
            "name": str(meta.get("name") or ""),
            "uid": str(meta.get("uid") or ""),
        }
        try:
            self.api.post_event(regarding, "Warning", "RulesRejected", "Reload", note, self.controller)
        except KubeError as err:
            self._log.warning("event RulesRejected not posted on ConfigMap %s: %s", self.sources.configmap, err)


def _version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _debug_traceback(err: BaseException) -> None:
    """Not a rules problem: the traceback goes to the debug log (the error line is logged)."""
    if not isinstance(err, RulesError):
        log.debug("reload failure", exc_info=err)
