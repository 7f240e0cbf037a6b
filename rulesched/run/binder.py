"""Bindings in a process of their own, so their HTTP work does not share the scheduler's
interpreter lock.

Profiled on the basic 5000-node workload, the scheduling process spent about half its CPU in
its binding threads (the ``pods/binding`` POST and the ``Scheduled`` event: urllib3, http.client
and sixteen threads handing the lock around), while the scheduling thread waited for the lock.
Here a child process (``python -m rulesched.run.binder``, the same kubeconfig, the parent's
User-Agent, so the API server sees one caller) binds on its own lock and core: as a pipeline
from one thread (:mod:`rulesched.run.pipeline`), or, where the client goes through a proxy and hands out
no connections, on the same :class:`rulesched.run.workers.Workers` threads as in-process. The
parent writes a line per binding down a pipe (in batches: :data:`BATCH_SECONDS`) and reads the
outcomes back on a thread of its own; the loop applies them exactly as it applies an in-process
worker's (a failure forgets the assumed pod and requeues it).

Lines are JSON arrays. Parent to child::

    ["lease", UNTIL]     writes are allowed until UNTIL (monotonic clock; null: no election)
    ["bind", NAMESPACE, NAME, UID, NODE, RULES, SCHEDULER]
    ["remove", NAMESPACE, NAME, UID, ...]   a preemption victim's removal: the fields of
                         :class:`rulesched.run.evictions.Removal` (:mod:`rulesched.run.remover`)

Child to parent::

    ["ready"]            its API client is built and it takes bindings (sent once, first)
    ["outcome", KEY, NODE, OK, REASON, BOUND_ELSEWHERE, SECONDS, PROFILE, RULES]
                         (the child has written the ``bound`` log line of an OK one)
    ["done", N]          N bindings' work is over (their Scheduled events too)
    ["removed", TOKEN, HOW]   a removal's end: "removed", "gone" (404), "error" (not sent: the
                         lease), or [REFUSED, REASON]: failed, refused by a budget (the Eviction
                         API's 429, not retried) or given up after retries
    ["requests", [[METHOD, CODE, SECONDS], ...]]   API requests, for the parent's rest_client
                         metrics

The child writes what gathered in one write (one ``done`` and one ``requests`` line for all of
it), so the parent's reader wakes, and takes its scheduling thread's lock, once per batch.

Fencing: the parent sends the leader's ``valid_until`` (the lease's last renewal + the renew
deadline) before any binding that follows a change of it; the child writes only while the
shared monotonic clock is before it, so it never writes when the parent could not: a paused or
dead parent's child stops at the same deadline. The child ignores SIGINT and SIGTERM: the
parent ends it by closing the pipe (it finishes its work and exits), or kills it past the grace
period. If the child dies, every binding it had not answered fails (requeued), the parent binds
in-process, and starts a child again after RESTART_SECONDS (1 s, doubling to a minute). Pods
with volume choices always bind in-process (their writes and their undo stay with the parent's
worker). Removals go the same way: written at once (a preemptor waits on them), each one's end
applied by the parent as its own threads' (:meth:`rulesched.run.evictions.EvictionsMixin.removal_over`);
those a dead child had not answered fail (their preemptors tried again at once), and the parent
removes on its own threads until a child lives again.

Next stage: :mod:`rulesched.run.loop` applies the outcomes.
"""

from __future__ import annotations

import argparse
import collections
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import msgspec

from rulesched.errors import ConfigError
from rulesched.kube.api import KubeApi
from rulesched.logs import LogSettings, configure, installed
from rulesched.run.evictions import Ended, Removal, RemovalFailed
from rulesched.run.pipeline import Pipeline
from rulesched.run.remover import Remover
from rulesched.run.workers import REMOVAL_THREADS, Outcome, Target, Workers, log_bound

log = logging.getLogger(__name__)
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode
# The child's writer, woken, waits this long for more lines to write at once, and while lines
# keep coming looks again every LINGER_SECONDS instead of sleeping until woken (waking it for
# each line was a fifth of the child's lock samples). Each write wakes the parent's reader
# thread, which must take the scheduling thread's interpreter lock: at 0.5 ms that was about
# 2000 hand-overs a second; at 5 ms the binding process took ~10% less CPU a pod and the
# scheduler ~5% more pods a second (alternated runs, loaded machine). An outcome is then up to
# 5 ms later, which delays nothing: the pod is assumed on its node from the start.
LINGER_SECONDS = 0.005
AWAKE_SECONDS = 0.05  # ... while lines came within this long
# A binding line waits up to this long for others to be written with it: one write (and one
# wake-up of the child) for several bindings, where a write for each was, with the interpreter
# lock to take back after it, cost the scheduling thread about 65 us of CPU a pod (370 -> 304 us
# on the basic workload); 5 ms is about seven bindings at full speed and little beside a
# binding's own latency under load.
BATCH_SECONDS = 0.005
STOP_WAIT_SECONDS = 1.0  # at shutdown, how long the child may take to exit once it has nothing to do
# A child that died is started again after the first of these, doubling up to the second (and
# from the first again if it had lived longer than that); meanwhile the workers bind in-process.
RESTART_SECONDS = (1.0, 60.0)
# At most this long the child waits for its pipeline's connections before it says it is ready
# (an API server that is slow to answer: the bindings then open what is missing, as before).
OPEN_SECONDS = 10.0


@dataclass(frozen=True)
class BindTarget:
    """A pod to bind, as the child knows it: what the binding and its event name."""

    namespace: str
    name: str
    uid: str
    scheduler_name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _exit_code(process: subprocess.Popen[bytes] | None) -> int | None:
    """The ended child's exit code (-9: killed), waiting a moment for it: its pipe closes just
    before it is gone."""
    if process is None:
        return None
    try:
        return process.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        return None


def _wire_until(until: float) -> float | None:
    return None if until == math.inf else max(until, -1.0)


class BindingProcess:
    """(The scheduler's side.) The child, the pipe to it, and the thread reading its answers:
    ``outcome`` for each binding, ``finished`` once its work is over, ``observe`` for each
    request (the parent's metrics), ``wake`` after each read's answers, ``removed`` for each
    removal, all on that thread."""

    def __init__(
        self,
        kubeconfig: str | None,
        threads: int,
        agent: str,
        outcome: Callable[[Outcome], None],
        finished: Callable[[], None],
        observe: Callable[[str, str, float], None],
        wake: Callable[[], None] = lambda: None,
        removed: Callable[[Removal, Ended], None] = lambda removal, ended: None,
    ) -> None:
        self.kubeconfig, self.threads, self.agent = kubeconfig, threads, agent
        self.outcome, self.finished, self.observe = outcome, finished, observe
        self.wake = wake  # once after the outcomes of one read, not after each
        self.removed = removed
        self.removals_answered = 0  # removals the child ended (not those a dead child left)
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[str, str]] = {}  # key -> (node, profile): no outcome yet
        self._removals: dict[str, Removal] = {}  # token -> a removal handed over, not yet ended
        self._unfinished = 0  # bindings sent, their "done" not yet read
        self._until: float | None = -1.0
        self._alive = False
        self._closing = False
        self._process: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._buffer: list[bytes] = []  # lines not yet written (see BATCH_SECONDS)
        self._started = 0.0  # (monotonic) when the child was last started
        self._restart_wait = RESTART_SECONDS[0]  # before a dead child is started again
        self._buffered_since = 0.0
        # The first child said it takes bindings: its imports (the Kubernetes client's, ~1-2 s
        # on a loaded machine) and its client are done. Latched: a child started again later
        # does not take readiness back (bindings bind in-process meanwhile).
        self._ready = threading.Event()

    @property
    def ready(self) -> bool:
        """Whether a child has said it takes bindings (``rulesched run``'s /readyz waits for it:
        bindings handed over before sat in the pipe until the child had started, the first
        binding 0.5-2.5 s after the first pod on the test bed)."""
        return self._ready.is_set()

    def start(self) -> BindingProcess:
        settings = installed()
        command = [sys.executable, "-m", "rulesched.run.binder", "--threads", str(self.threads), "--agent", self.agent]
        command += ["--log-level", str(settings.level), "--log-libraries", str(settings.libraries)]
        command += ["--log-format", settings.format] + ([] if settings.timestamps else ["--no-timestamps"])
        if self.kubeconfig:
            command += ["--kubeconfig", self.kubeconfig]
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        with self._lock:
            self._process, self._alive, self._started = process, True, time.monotonic()
            self._until = -1.0  # (a new child knows no lease yet)
        self._reader = threading.Thread(target=self._read, name="binder-reader", daemon=True)
        self._reader.start()
        return self

    @property
    def alive(self) -> bool:
        return self._alive

    @property
    def pid(self) -> int | None:
        """The child's process id while it lives (its metrics: rulesched_binding_process_*)."""
        process = self._process
        return process.pid if process is not None and self._alive else None

    def bind(self, pod: Target, node: str, rules: str, until: float) -> bool:
        """Hand the binding over; False when the child is gone (bind in-process instead). The
        line waits in a buffer for others (see :data:`BATCH_SECONDS`) unless it has waited long
        enough; :meth:`flush` writes what waits."""
        wire = _wire_until(until)
        with self._lock:
            process = self._process
            if not self._alive or self._closing or process is None or process.stdin is None:
                return False
            buffer = self._buffer
            now = time.monotonic()
            if not buffer:
                self._buffered_since = now
            self._lease(wire)
            buffer.append(_encode(["bind", pod.namespace, pod.name, pod.uid, node, rules, pod.scheduler_name]))
            self._pending[pod.key] = (node, pod.scheduler_name)
            self._unfinished += 1
            if now - self._buffered_since >= BATCH_SECONDS:
                self._write(process)
        return True

    def _lease(self, wire: float | None) -> None:
        """(Under the lock.) The lease line, before a line that follows a change of it."""
        if wire != self._until:
            self._buffer.append(_encode(["lease", wire]))
            self._until = wire

    def remove(self, removal: Removal, until: float) -> bool:
        """Hand a victim's removal over, written at once with what waits (its preemptor waits on
        it; a preemption's victims come microseconds apart, and preemptions are few); False when
        the child is gone (remove in-process instead)."""
        with self._lock:
            process = self._process
            if not self._alive or self._closing or process is None or process.stdin is None:
                return False
            self._lease(_wire_until(until))
            self._buffer.append(_encode(["remove", *removal.wire()]))
            self._removals[removal.token] = removal
            self._write(process)
        return True

    def flush(self, late_only: bool = False) -> None:
        """Write the lines that wait (the scheduler's thread: before it waits for pods; and,
        ``late_only``, after each cycle if they have waited BATCH_SECONDS, for cycles that bind
        nothing, as when the pods left stop fitting, would hold them back until the queue empties)."""
        if late_only and (not self._buffer or time.monotonic() - self._buffered_since < BATCH_SECONDS):
            return  # (read without the lock: a line added meanwhile is written by its own bind or the next cycle)
        with self._lock:
            if self._buffer and self._process is not None:
                self._write(self._process)

    def _write(self, process: subprocess.Popen[bytes]) -> None:
        """(Under the lock.) The buffered lines in one write. If the child is gone they are
        lost with it: the reader then sees the pipe end and fails every unanswered binding
        (requeued), as it does for lines the child had read but not answered."""
        data = b"\n".join(self._buffer) + b"\n"
        self._buffer.clear()
        if process.stdin is None:
            return
        try:  # (unbuffered: the whole batch, however many writes the pipe takes)
            view = memoryview(data)
            while view:
                view = view[os.write(process.stdin.fileno(), view) :]
        except (OSError, ValueError):
            pass

    def _read(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        fd = process.stdout.fileno()
        try:
            buffer = b""
            while chunk := os.read(fd, 65536):  # (unbuffered pipe: read it in chunks, never by lines)
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    self._answer(_decode(line))
                self.wake()
        except (OSError, ValueError, msgspec.DecodeError) as err:
            log.error("binding process: unreadable answer: %s", err)
        self._ended()

    def _answer(self, message: list[Any]) -> None:
        kind = message[0]
        if kind == "ready":
            self._ready.set()
        elif kind == "requests":
            observe = self.observe
            for method, code, seconds in message[1]:
                observe(method, code, seconds)
        elif kind == "outcome":
            _, key, node, ok, reason, elsewhere, seconds, profile, rules = message
            with self._lock:
                self._pending.pop(key, None)
            self.outcome(Outcome(key, node, ok, reason, elsewhere, seconds, profile, rules, logged=ok))
        elif kind == "done":
            with self._lock:
                self._unfinished -= message[1]
            for _ in range(message[1]):
                self.finished()
        elif kind == "removed":
            _, token, how = message
            with self._lock:
                removal = self._removals.pop(token, None)
                self.removals_answered += removal is not None
            if removal is not None:
                failed = isinstance(how, list)
                self.removed(removal, RemovalFailed(removal.key, removal.preemptor, *how) if failed else how)

    def _ended(self) -> None:
        """The child's answers ended: every binding it left unanswered failed (requeued)."""
        with self._lock:
            self._alive = False
            pending, self._pending = self._pending, {}
            unfinished, self._unfinished = self._unfinished, 0
            removals, self._removals = list(self._removals.values()), {}
            closing = self._closing
        if not closing:
            code = _exit_code(self._process)
            if time.monotonic() - self._started > RESTART_SECONDS[1]:  # (it had lived a while: a fresh start)
                self._restart_wait = RESTART_SECONDS[0]
            log.error(
                "binding process ended; binding in-process until it is started again in %gs",
                self._restart_wait,
                extra={"exit": code, "unanswered": len(pending) or None},
            )
            self._restart_later()
        for key, (node, profile) in pending.items():
            self.outcome(Outcome(key, node, False, "the binding process ended", profile=profile))
        for _ in range(unfinished):
            self.finished()
        for removal in removals:  # (sent or not, its preemptor tries again at once)
            self.removed(removal, RemovalFailed(removal.key, removal.preemptor, False, "the binding process ended"))
        self.wake()

    def _restart_later(self) -> None:
        timer = threading.Timer(self._restart_wait, self._restart)
        timer.daemon = True
        timer.start()
        self._restart_wait = min(2 * self._restart_wait, RESTART_SECONDS[1])

    def _restart(self) -> None:
        """(A timer's thread.) Start a child again, unless this one is closing."""
        with self._lock:
            if self._closing or self._alive:
                return
            old, self._buffer = self._process, []
        for pipe in (old.stdin, old.stdout) if old is not None else ():
            if pipe is not None:
                pipe.close()
        try:
            self.start()
        except OSError as err:
            log.error("binding process not started again: %s", err)
            self._restart_later()
            return
        log.info("binding process started again")

    def close(self) -> None:
        """Send nothing more: the child finishes what it has and exits."""
        with self._lock:
            self._closing = True
            process = self._process
            if process is not None and self._buffer:
                self._write(process)
            if process is not None and process.stdin is not None:
                try:
                    process.stdin.close()
                except OSError:
                    pass

    def kill(self) -> None:
        """End the child now (its unanswered bindings then fail, as if it had crashed)."""
        if self._process is not None:
            self._process.kill()

    def stop(self, wait: float = STOP_WAIT_SECONDS) -> None:
        """Close; give the child ``wait`` seconds to exit, then kill it (past the grace period,
        as in-process bindings die with the process)."""
        self.close()
        process = self._process
        if process is None:
            return
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if self._reader is not None:
            self._reader.join(timeout=wait)


class _LineWriter:
    """(The child's side.) Lines to the parent, written by one thread in batches: the binding
    threads never wait on the pipe, and wake the writer only when it sleeps (a queue put for
    every line, each waking it, was a fifth of this process's interpreter time). A batch is its
    outcomes, then one ``requests`` line and one ``done`` line for everything else gathered."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        # (deques: appended by the binding threads, emptied by the writer, no lock needed)
        self._outcomes: collections.deque[Outcome] = collections.deque()
        self._requests: collections.deque[list[Any]] = collections.deque()  # written with the next lines
        self._done: collections.deque[None] = collections.deque()  # one entry per binding whose work is over
        self._removed: collections.deque[list[Any]] = collections.deque()  # ["removed", TOKEN, HOW] lines
        self._wake = threading.Event()
        self._idle = False
        self._closing = False
        self._thread = threading.Thread(target=self._write, name="writer", daemon=True)
        self._thread.start()

    def outcome(self, o: Outcome) -> None:
        """A binding's outcome; once it is written, the writer logs the ``bound`` line of an OK
        one (one thread writing them: the scheduler's thread no longer formats a line a pod)."""
        self._outcomes.append(o)
        if self._idle:
            self._wake.set()

    def done(self) -> None:
        """One binding's work is over (after its outcome was sent)."""
        self._done.append(None)
        if self._idle:
            self._wake.set()

    def removed(self, removal: Removal, ended: Ended) -> None:
        """A removal's end (:mod:`rulesched.run.remover`)."""
        how = [ended.refused, ended.reason] if isinstance(ended, RemovalFailed) else ended
        self._removed.append(["removed", removal.token, how])
        if self._idle:
            self._wake.set()

    def request(self, method: str, code: str, seconds: float) -> None:
        """An API request, sent with the next lines (no wake-up of its own)."""
        self._requests.append([method, code, seconds])

    def close(self) -> None:
        """Write what is queued, then stop."""
        self._closing = True
        self._wake.set()
        self._thread.join()

    def _write(self) -> None:
        lines, done, removed = self._outcomes, self._done, self._removed
        last = -math.inf  # when lines were last written
        while True:
            if not lines and not done and not removed:
                if self._closing:
                    if self._requests:  # (the last requests' observations)
                        self._flush(0)
                    return
                if time.monotonic() - last < AWAKE_SECONDS:  # lines came lately: look again soon
                    time.sleep(LINGER_SECONDS)
                    continue
                self._idle = True
                if not (lines or done or removed or self._closing):  # (checked again: a send may have seen busy)
                    self._wake.wait()
                self._wake.clear()
                self._idle = False
                time.sleep(LINGER_SECONDS)  # let a few lines gather: one write for them
                continue
            last = time.monotonic()
            finished = len(done)  # (counted before the outcomes are taken: each one's outcome is among them)
            for _ in range(finished):
                done.popleft()
            if not self._flush(finished):
                return

    def _flush(self, finished: int) -> bool:
        """Write the outcomes, the requests and ``finished``; False when the parent is gone."""
        outcomes, requests = self._outcomes, self._requests
        written = [outcomes.popleft() for _ in range(len(outcomes))]
        batch: list[list[Any]] = [
            ["outcome", o.key, o.node, o.ok, o.reason, o.bound_elsewhere, o.seconds, o.profile, o.rules]
            for o in written
        ]
        removed = self._removed
        batch += [removed.popleft() for _ in range(len(removed))]
        if requests:
            batch.append(["requests", [requests.popleft() for _ in range(len(requests))]])
        if finished:
            batch.append(["done", finished])
        data = b"".join(_encode(m) + b"\n" for m in batch)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError:  # the parent is gone: nobody to tell
            return False
        for o in written:
            if o.ok:
                log_bound(o)
        return True


def serve(api: KubeApi, threads: int, incoming: IO[bytes], out_fd: int) -> None:
    """(The child's side.) Bind what the parent sends until it closes the pipe; then finish.
    Ready (told to the parent) once the pipeline's connections are open, or OPEN_SECONDS on."""
    writer = _LineWriter(out_fd)
    until = [-math.inf]  # nothing is written before the parent says until when

    def observe(method: str, host: str, code: str, seconds: float | None) -> None:
        if seconds is not None:
            writer.request(method, code, seconds)

    api.observer = observe

    may_write = lambda: time.monotonic() < until[0]  # noqa: E731 - (the removals' fencing too)
    remover = Remover(api, REMOVAL_THREADS, may_write, writer.removed)
    pipeline, workers = None, None  # a pipeline on channels; through a proxy (no channels), threads
    if Pipeline.available(api):
        pipeline = Pipeline(api, threads, writer.outcome, writer.done)
        pipeline.wait_open(OPEN_SECONDS)
    else:
        workers = Workers(api, writer.outcome, threads, may_write=may_write, finished=writer.done)
    # (the writer's thread writes nothing before a binding's outcome: this line comes first)
    os.write(out_fd, _encode(["ready"]) + b"\n")
    for line in incoming:
        message = _decode(line)
        if message[0] == "lease":
            until[0] = math.inf if message[1] is None else float(message[1])
        elif message[0] == "bind":
            _, namespace, name, uid, node, rules, scheduler = message
            target = BindTarget(namespace, name, uid, scheduler)
            if pipeline is not None:
                pipeline.bind(target, node, rules, until[0])
            elif workers is not None:
                workers.bind(target, node, rules)
        elif message[0] == "remove":
            remover.remove(Removal.from_wire(message[1:]))
    remover.close()
    if pipeline is not None:
        pipeline.close()
    if workers is not None:
        workers.shutdown(wait=True)
    writer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rulesched.run.binder")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--agent", required=True)
    parser.add_argument("--log-level", type=int, default=logging.INFO)
    parser.add_argument("--log-libraries", type=int, default=logging.WARNING)
    parser.add_argument("--log-format", default="text")
    parser.add_argument("--no-timestamps", action="store_true")
    args = parser.parse_args(argv)
    configure(LogSettings(args.log_level, args.log_format, args.log_libraries, not args.no_timestamps))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when this ends (the pipe)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out_fd = os.dup(1)  # the answers' pipe; stray prints go to stderr, never into it
    os.dup2(2, 1)
    try:
        api = KubeApi(args.kubeconfig, agent=args.agent)
    except ConfigError as err:
        log.error("binding process: %s", err)
        return 2
    serve(api, args.threads, sys.stdin.buffer, out_fd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
