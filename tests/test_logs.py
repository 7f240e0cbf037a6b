"""Logs an operator can read: at the default level ``rulesched run`` says what it is doing
(start-up with version and rules digest, caches synced, bindings and their failures, shutdown),
every line timestamped and levelled; ``-v``, ``--v=N``, ``log_level`` in ``--config`` and
``RULESCHED_LOG_LEVEL`` add each pod's decision; ``--log-format json`` is one object per line;
text from requests and objects can neither forge a line nor grow one without bound."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rulesched import __version__
from rulesched.cli import _parser, log_settings
from rulesched.errors import ConfigError
from rulesched.extender.cli import settings_from as extender_settings
from rulesched.logs import (
    FIELD_LIMIT,
    VERBOSE,
    JsonFormatter,
    LogSettings,
    TextFormatter,
    cap,
    escape,
    field_value,
    parse_level,
    timestamp,
)
from rulesched.run.cli import settings_from as run_settings
from tests.apiserver import TestApiServer
from tests.extender_client import ExtenderProcess
from tests.helpers.kube import node, pod

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|VERBOSE|INFO|WARNING|ERROR|CRITICAL) [\w.]+: ")
LONG = "x" * 10_000
FORGED = "p\n2026-01-01T00:00:00.000Z ERROR rulesched.run.loop: forged"


def record(msg: str, *args: object, level: int = logging.INFO, **extra: object) -> logging.LogRecord:
    r = logging.LogRecord("rulesched.test", level, __file__, 1, msg, args, None)
    r.created = 1_795_715_646.1234  # 2026-11-26T17:54:06.123Z
    for key, value in extra.items():
        setattr(r, key, value)
    return r


# --- the formatters -------------------------------------------------------------------------------


def test_a_text_line_has_time_level_logger_message_and_fields() -> None:
    line = TextFormatter().format(record("bound", pod="ns/p", node="n1", rule="R", rules="abc123"))
    assert line == "2026-11-26T17:54:06.123Z INFO rulesched.test: bound pod=ns/p node=n1 rule=R rules=abc123"
    assert TextFormatter().format(record("v", level=VERBOSE)).split()[1] == "VERBOSE"
    assert timestamp(0.9999) == "1970-01-01T00:00:00.999Z"


def test_values_with_spaces_quotes_equals_or_controls_are_quoted_and_escaped() -> None:
    assert field_value("plain/value-1") == "plain/value-1"
    assert field_value("two words") == '"two words"'
    assert field_value('say "hi"') == '"say \\"hi\\""'
    assert field_value("a=b") == '"a=b"'
    assert field_value("back\\slash") == '"back\\\\slash"'
    assert field_value("") == '""'
    assert field_value("a\nb\rc\td\x00e\x7f") == '"a\\nb\\rc\\td\\x00e\\x7f"'
    # line and paragraph separators, NEL and bidi overrides are escaped too; other letters stay
    assert escape("a\u2028b\u2029c\x85d\u202ee é") == "a\\u2028b\\u2029c\\x85d\\u202ee é"


def test_a_newline_from_an_object_cannot_forge_a_line() -> None:
    for formatter in (TextFormatter(), TextFormatter(timestamps=False)):
        line = formatter.format(record("skipping %s: %s", FORGED, "bad\r\nthing", pod=FORGED, reason=FORGED))
        assert "\n" not in line and "\r" not in line
        assert line.count("ERROR") == 3 and line.split()[1 if formatter.timestamps else 0] == "INFO"
        assert 'pod="p\\n2026-01-01T00:00:00.000Z ERROR rulesched.run.loop: forged"' in line
    parsed = json.loads(JsonFormatter().format(record("m %s", FORGED, pod=FORGED)))
    assert parsed["pod"] == FORGED and parsed["msg"] == f"m {FORGED}" and parsed["level"] == "INFO"


def test_long_values_and_arguments_are_capped() -> None:
    assert cap(LONG) == "x" * FIELD_LIMIT + f"…(+{10_000 - FIELD_LIMIT})"
    line = TextFormatter().format(record("bind failed: %s", LONG, pod=LONG, count=3))
    assert len(line) < 3 * FIELD_LIMIT + 200
    assert line.count(f"…(+{10_000 - FIELD_LIMIT})") == 2 and line.endswith(" count=3")
    assert "x" * (FIELD_LIMIT + 1) not in line
    parsed = json.loads(JsonFormatter().format(record("%s", LONG, reason=LONG)))
    assert len(parsed["msg"]) == len(parsed["reason"]) == len(cap(LONG))
    # numbers stay numbers for %d and in JSON; a message alone is capped at its own limit
    assert TextFormatter().format(record("%d of %d", 3, 5)).endswith(": 3 of 5")
    assert json.loads(JsonFormatter().format(record("m", nodes=3, ok=True)))["nodes"] == 3
    assert "…(+" in TextFormatter().format(record(LONG))


def test_json_is_one_object_per_line_with_the_fields_by_name() -> None:
    line = JsonFormatter().format(record("bound", pod="ns/p", node="n1", rules="abc", level_="x", empty=""))
    assert "\n" not in line
    assert json.loads(line) == {
        "ts": "2026-11-26T17:54:06.123Z",
        "level": "INFO",
        "logger": "rulesched.test",
        "msg": "bound",
        "pod": "ns/p",
        "node": "n1",
        "rules": "abc",
        "level_": "x",
    }


def test_a_traceback_stays_on_its_line() -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        r = record("worker task failed", level=logging.ERROR)
        r.exc_info = sys.exc_info()
    text = TextFormatter().format(r)
    assert "\n" not in text and 'exception="Traceback' in text and "ValueError: bad\\nvalue" in text
    assert "ValueError: bad\nvalue" in json.loads(JsonFormatter().format(r))["exception"]


# --- where the level comes from -------------------------------------------------------------------


def settings(argv: list[str], env: dict[str, str] | None = None) -> LogSettings:
    return log_settings(_parser().parse_args(argv), env or {})


def test_verbosity_is_accepted_before_and_after_the_subcommand(tmp_path: Path) -> None:
    assert settings(["run"]) == LogSettings(logging.INFO, "text", logging.WARNING, timestamps=True)
    for argv in (["run", "-v"], ["-v", "run"], ["run", "--v=2"], ["run", "--v", "3"], ["extender", "--verbose"]):
        assert settings(argv).level == VERBOSE, argv
    for argv in (["run", "-vv"], ["-v", "run", "-v"], ["--v=4", "run"], ["run", "--v=5"]):
        assert settings(argv).level == logging.DEBUG, argv
    assert settings(["run", "--v=6"]).libraries == logging.DEBUG  # the Kubernetes client's debug too
    assert settings(["run", "--v=0"]).level == logging.INFO
    assert settings(["extender", "--log-format", "json"]).format == "json"
    # the one-shot tools stay quiet (and without timestamps) unless asked
    quiet = settings(["simulate", "c.yaml"])
    assert (quiet.level, quiet.timestamps) == (logging.WARNING, False)
    assert settings(["lint", "x.rules", "-v"]).level == VERBOSE
    with pytest.raises(SystemExit):
        _parser().parse_args(["run", "--v=-1"])


def test_flags_win_over_the_config_file_over_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("log_level: debug\nlog-format: json\nscheduler_name: x\n")
    env = {"RULESCHED_LOG_LEVEL": "error", "RULESCHED_LOG_FORMAT": "text"}
    assert settings(["run"], env).level == logging.ERROR
    assert settings(["run", "--config", str(config)], env) == LogSettings(logging.DEBUG, "json", logging.WARNING)
    assert settings(["run", "--config", str(config), "--v=2", "--log-format=text"], env).level == VERBOSE
    assert settings(["run"], {"RULESCHED_LOG_LEVEL": "2"}).level == VERBOSE
    assert parse_level(3, "x").level == VERBOSE and parse_level("Warning", "x").level == logging.WARNING
    # the commands' own settings skip the logging keys (no "unknown setting")
    assert run_settings(_parser().parse_args(["run", "--config", str(config)])).scheduler_name == "x"
    config.write_text("log_level: 4\nlisten: 127.0.0.1:9\n")
    assert extender_settings(_parser().parse_args(["extender", "--config", str(config)])).listen == "127.0.0.1:9"
    assert settings(["extender", "--config", str(config)]).level == logging.DEBUG
    config.write_text("log_level: loud\n")
    with pytest.raises(ConfigError, match=f"{re.escape(str(config))}: log_level: 'loud' is not a log level"):
        settings(["run", "--config", str(config)])
    with pytest.raises(ConfigError, match="RULESCHED_LOG_FORMAT: 'xml' is not a log format"):
        settings(["run"], {"RULESCHED_LOG_FORMAT": "xml"})


# --- rulesched run, as the image runs it -----------------------------------------------------------


class Run:
    """``rulesched run ARGS`` as a process, its stderr collected line by line."""

    def __init__(self, server: TestApiServer, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        kubeconfig = server.kubeconfig(str(tmp_path / "kubeconfig"))
        command = [sys.executable, "-m", "rulesched.cli", "run", "--kubeconfig", kubeconfig, *args]
        self.proc = subprocess.Popen(
            [*command, "--metrics-bind-address", ""],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, condition: Callable[[], bool], seconds: float = 120.0) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not condition():
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        assert condition(), "\n".join(self.lines)

    def logged(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def stop(self) -> list[str]:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0, "\n".join(self.lines)
        self._reader.join(timeout=5)
        return self.lines

    def kill(self) -> None:
        """A test that failed before :meth:`stop` leaves no scheduler running (it would load
        the machine, and the tests after it, until the end of the session)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def start_run(server: TestApiServer, tmp_path: Path) -> Iterator[Callable[..., Run]]:
    """``start_run(*args, env=None)``: a :class:`Run` against ``server``, killed after the test."""
    started: list[Run] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Run:
        started.append(Run(server, tmp_path, *args, env=env))
        return started[-1]

    yield start
    for run in started:
        run.kill()


def one(lines: list[str], *parts: str) -> str:
    found = [line for line in lines if all(p in line for p in parts)]
    assert len(found) == 1, (parts, lines)
    return found[0]


def test_the_default_level_tells_the_operator_what_happens(
    server: TestApiServer, start_run: Callable[..., Run]
) -> None:
    for i in range(3):
        server.add("nodes", node(f"n{i}"))
    server.add("pods", pod("web"))
    server.add("pods", pod("huge", cpu="64"))
    server.set_faults(bind_conflict_rate=1.0)  # the first binding fails: that is logged too
    run = start_run()
    run.wait_for(lambda: run.logged("binding failed"))
    server.set_faults()
    run.wait_for(lambda: run.logged(" bound "))
    lines = run.stop()
    assert all(LINE.match(line) for line in lines), lines
    start = one(lines, "INFO rulesched.run.cli: rulesched", "starting")
    digest = re.search(r" rules=([0-9a-f]+)", start)
    assert digest and f"version={__version__}" in start and "scheduler=rulesched" in start
    assert "leader_elect=off" in start and "files=" in start
    assert "nodes=3" in one(lines, "INFO rulesched.run.loop: caches synced", f"rules={digest[1]}")
    # Every binding until the faults are lifted fails (again after each 1 s backoff, should this
    # process be slow to lift them): a line for each, naming the node and the reason.
    failed = [line for line in lines if "WARNING" in line and "binding failed" in line]
    assert failed and all("pod=default/web" in line for line in failed), lines
    assert all(re.search(r" node=n\d ", line) and "reason=" in line for line in failed), failed
    assert re.search(r"INFO rulesched.run.workers: bound pod=default/web node=n\d rules=" + digest[1], "\n".join(lines))
    one(lines, "INFO", "SIGTERM: giving up the cycle under way, finishing bindings under way")
    assert lines[-1].split(" ", 1)[1].startswith("INFO rulesched.run.cli: stopped exit=0")
    # each pod's decision is for -v: none here, and no routine event at WARNING
    assert not any(" VERBOSE " in line or " DEBUG " in line for line in lines)
    assert not any(" WARNING " in line for line in lines if "binding failed" not in line), lines


@pytest.mark.parametrize(
    ("args", "env", "config"),
    [
        (["-v"], {}, ""),
        (["--v=4"], {}, ""),
        ([], {"RULESCHED_LOG_LEVEL": "2", "RULESCHED_LOG_FORMAT": "json"}, ""),
        ([], {"RULESCHED_LOG_LEVEL": "error"}, "log_level: verbose\n"),  # (the file wins over the environment)
    ],
    ids=["-v", "--v=4", "env-json", "config"],
)
def test_more_verbosity_logs_each_pods_decision(
    server: TestApiServer,
    tmp_path: Path,
    start_run: Callable[..., Run],
    args: list[str],
    env: dict[str, str],
    config: str,
) -> None:
    """One decision line per scheduling cycle, as many as the process says it ran (``cycles``
    in its "stopped" line). ``huge`` fits nowhere and may be attempted more than once before
    the test stops the process: its PodScheduled=False condition comes back through the watch
    and requeues it (1 s backoff), and a loaded machine binds ``web`` after that."""
    server.add("nodes", node("n1"))
    server.add("pods", pod("web"))
    server.add("pods", pod("huge", cpu="64"))
    if config:
        (tmp_path / "config.yaml").write_text(config)
        args = ["--config", str(tmp_path / "config.yaml")]
    run = start_run(*args, env=env)
    run.wait_for(lambda: run.logged("unschedulable") and run.logged("bound"))
    lines = run.stop()
    if env.get("RULESCHED_LOG_FORMAT") == "json":
        records = [json.loads(line) for line in lines]  # every line one JSON object
        assert all(set(r) >= {"ts", "level", "logger", "msg"} for r in records)
        (scheduled,) = [r for r in records if r["msg"] == "scheduled"]
        assert (scheduled["level"], scheduled["pod"], scheduled["node"]) == ("VERBOSE", "default/web", "n1")
        unschedulable = [r for r in records if r["msg"] == "unschedulable"]
        assert unschedulable and all(r["level"] == "VERBOSE" for r in unschedulable), unschedulable
        assert all(r["pod"] == "default/huge" and "Insufficient cpu" in r["reason"] for r in unschedulable)
        (stopped,) = [r for r in records if r["msg"] == "stopped"]
        assert stopped["exit"] == 0 and stopped["cycles"] == 1 + len(unschedulable), (stopped, unschedulable)
        return
    assert all(LINE.match(line) for line in lines), lines
    assert "evaluated=1 feasible=1" in one(lines, "VERBOSE rulesched.run.loop: scheduled pod=default/web node=n1")
    unschedulable = [line for line in lines if "VERBOSE rulesched.run.loop: unschedulable pod=default/huge" in line]
    assert unschedulable and all("Insufficient cpu" in line for line in unschedulable), lines
    cycles = re.search(r" cycles=(\d+)", one(lines, "INFO rulesched.run.cli: stopped exit=0"))
    assert cycles and int(cycles[1]) == 1 + len(unschedulable), (cycles, unschedulable)
    # (and no other decision: one line per cycle)
    assert len([line for line in lines if " VERBOSE rulesched.run.loop: " in line]) == int(cycles[1]), lines


# --- the extender --------------------------------------------------------------------------------


def test_the_extender_caps_and_escapes_what_a_request_names(server: TestApiServer, tmp_path: Path) -> None:
    server.add("nodes", node("n1"))
    kubeconfig = server.kubeconfig(str(tmp_path / "kubeconfig"))
    process = ExtenderProcess("--kubeconfig", kubeconfig, "--rules", "default", "-v")
    try:
        process.wait_ready()
        forged_node = "n1" + FORGED + LONG  # a node the cache does not know: the answer drops it, the log names it
        body = {
            "Pod": {
                "metadata": {"name": "p", "namespace": "default", "uid": "u"},
                "spec": {"containers": [{"name": "c"}]},
            },
            "NodeNameToMetaVictims": {forged_node: {"Pods": [{"UID": "v"}], "NumPDBViolations": 0}},
        }
        status, answer = process.post("/preempt", body)
        assert status == 200 and answer["NodeNameToMetaVictims"] in ({}, None), answer
        end = time.monotonic() + 10
        wanted = ("node unknown", "caches synced")  # (the census runs on the request thread: either may come last)
        while time.monotonic() < end and not all(any(w in line for line in process.log) for w in wanted):
            time.sleep(0.05)
    finally:
        process.stop()
    lines = [line.rstrip("\n") for line in process.log]
    assert all(LINE.match(line) for line in lines), lines  # the name forged no line
    start = one(lines, "INFO rulesched.extender.server: rulesched", "extender listening on")
    assert f"version={__version__}" in start and "rules=" in start
    one(lines, "INFO rulesched.extender.server: caches synced", "nodes=1")
    dropped = one(lines, "VERBOSE rulesched.extender.service: preempt: node unknown")
    assert 'node="n1p\\n2026-01-01T00:00:00.000Z ERROR rulesched.run.loop: forged' in dropped
    assert "x" * (FIELD_LIMIT + 1) not in dropped and len(dropped) < 6 * FIELD_LIMIT
    assert not any(" forged" in line and "node unknown" not in line for line in lines)
    one(lines, "INFO rulesched.extender.server: stopped")
