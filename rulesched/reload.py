"""Hot reload: the active rule set follows its sources while the scheduler or extender runs.

Sources are files and folders (``--rules``, watched with watchfiles; SIGHUP asks too) and a
ConfigMap (``--rules-configmap NAMESPACE/NAME``, watched through the API: every key ending in
``.rules`` is a file of the set; the files named by ``--rules`` come first, so ``--rules default``
composes as on the command line).

A change marks the set dirty. The reloader's own thread waits until the changes have been quiet
for ``debounce`` seconds (a burst of updates is one reload), reads every source as it is then, and
parses, checks and compiles the whole set there, off the scheduling path. A set that compiles is
swapped into the :class:`rulesched.lang.RulesHandle` in one assignment; a scheduling cycle and an
extender request read the handle once, at their start, so none ever sees a mix, and the old set's
caches go with it. A set that does not compile changes nothing: the last good set stays, every
diagnostic is logged with its ``file:line:col``, a Warning Event carrying them is posted on the
ConfigMap (when the rules come from one), and the failure is counted. A set equal in content to
the active one (the same digest) is not swapped.
Next stage: the loop (:mod:`rulesched.run.loop`) and the extender read ``RulesHandle.rules``.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import watchfiles

from rulesched.errors import ConfigError, KubeError, NotFoundError, RulesError
from rulesched.kube.api import CONFIGMAPS, KubeApi, Scope
from rulesched.kube.informer import Delta, Informer
from rulesched.lang import (
    Diagnostic,
    RuleSet,
    RulesHandle,
    Severity,
    bundled_rules_dir,
    load_sources,
    resolve_rules_path,
)

log = logging.getLogger(__name__)


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


def render(err: RulesError) -> list[str]:
    """Each error as ``file:line:col: message [code]``; the error's own line when it carries no
    diagnostics (an unreadable file, a ConfigMap with no .rules keys)."""
    lines = [
        f"{d.location}: {d.message} [{d.code}]"
        for d in err.diagnostics
        if isinstance(d, Diagnostic) and d.severity is Severity.ERROR
    ]
    return lines or [str(err)]


class Reloader:
    def __init__(
        self,
        sources: RulesSources,
        api: KubeApi | None,
        stop: threading.Event,
        on_outcome: Callable[[ReloadOutcome], None] = lambda outcome: None,
        debounce: float = 0.1,
        controller: str = "rulesched",
    ) -> None:
        self.sources, self.api, self.stop = sources, api, stop
        self.handle: RulesHandle | None = None  # from initial()
        self.on_outcome = on_outcome
        self.debounce = debounce
        self.controller = controller
        self.reloads = 0  # sets swapped in
        self.failures = 0  # sets refused
        self._dirty = threading.Event()
        self._lock = threading.Lock()
        self._configmap: dict[str, Any] | None = None  # the latest ConfigMap object
        self._threads: list[threading.Thread] = []
        self._informer: Informer | None = None
        scope = sources.configmap_scope
        if scope is not None:
            if api is None:
                raise ConfigError("--rules-configmap needs API access (--kubeconfig, or running in a cluster)")
            self._informer = Informer(api, CONFIGMAPS, self._configmap_changed, stop, scope=scope)

    # --- the first set ------------------------------------------------------------------------
    def initial(self) -> RulesHandle:
        """The handle of the set to start with (read now, the ConfigMap with one GET); errors
        raise: with no last good set there is nothing to fall back on."""
        scope = self.sources.configmap_scope
        if scope is not None:
            assert self.api is not None and scope.name is not None
            try:
                self._configmap = self.api.get(CONFIGMAPS, scope.namespace, scope.name)
            except NotFoundError:
                raise ConfigError(f"ConfigMap {self.sources.configmap} not found") from None
            except KubeError as err:
                raise ConfigError(f"ConfigMap {self.sources.configmap}: {err}") from None
        self.handle = RulesHandle(self._load())
        log.debug("rules loaded", extra={"rules": self.handle.digest, "files": ",".join(self.handle.rules.files)})
        return self.handle

    def _load(self) -> RuleSet:
        with self._lock:
            configmap = self._configmap
        texts = configmap_texts(configmap) if configmap is not None else None
        if self.sources.configmap is not None and configmap is None:
            raise RulesError(f"ConfigMap {self.sources.configmap} was deleted")
        return load_sources(self.sources.resolved(), texts)

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
            log.warning("watching %s stopped: %s", ", ".join(map(str, folders)), err)

    def _configmap_changed(self, delta: Delta) -> None:
        with self._lock:
            self._configmap = None if delta.type == "DELETED" else delta.obj
        self.trigger()

    def _run(self) -> None:
        while not self.stop.is_set():
            if not self._dirty.wait(0.2):
                continue
            while True:  # coalesce: wait until the changes have been quiet for a moment
                self._dirty.clear()
                if self.stop.wait(self.debounce):
                    return
                if not self._dirty.is_set():
                    break
            self.reload_now()

    # --- one reload ---------------------------------------------------------------------------
    def reload_now(self) -> ReloadOutcome:
        """Read every source, compile, and swap the set in if it compiled and differs."""
        handle = self.handle
        assert handle is not None, "initial() first"
        active = handle.rules
        try:
            rules = self._load()
        except RulesError as err:
            self.failures += 1
            lines = render(err)
            for line in lines:
                log.error("rules rejected: %s", line, extra={"rules": active.digest})
            log.error("rules rejected; keeping the last good set", extra={"rules": active.digest})
            self._warn(lines)
            outcome = ReloadOutcome(False, active.digest, tuple(active.files), "; ".join(lines))
        else:
            changed = rules.digest != active.digest
            if changed:
                handle.swap(rules)
                self.reloads += 1
                log.info(
                    "rules reloaded: %s -> %s",
                    active.digest,
                    rules.digest,
                    extra={"rules": rules.digest, "files": ",".join(rules.files)},
                )
            else:
                log.debug("rules unchanged", extra={"rules": active.digest})
            outcome = ReloadOutcome(True, handle.digest, tuple(handle.rules.files), changed=changed)
        self.on_outcome(outcome)
        return outcome

    def _warn(self, lines: list[str]) -> None:
        """A Warning Event on the ConfigMap, carrying the diagnostics."""
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
        note = "rules not loaded, keeping the last good set: " + "\n".join(lines)
        try:
            self.api.post_event(regarding, "Warning", "RulesRejected", "Reload", note, self.controller)
        except KubeError as err:
            log.warning("event RulesRejected not posted on ConfigMap %s: %s", self.sources.configmap, err)
