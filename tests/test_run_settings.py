"""`rulesched run` settings: flags named like kube-scheduler's, the same settings from a YAML
file (flags win), durations as kube-scheduler writes them, unknown settings refused in one line;
log lines carry the pod and node they are about."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rulesched.cli import _parser, main
from rulesched.config import host_port
from rulesched.errors import ConfigError
from rulesched.extender.cli import settings_from as extender_settings_from
from rulesched.logs import TextFormatter
from rulesched.run.cli import settings_from
from rulesched.simulate.load import ClusterObjects
from rulesched.simulate.run import SimulateSettings, simulate
from tests.apiserver import TestApiServer


def test_flags_and_a_config_file_make_the_settings(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("scheduler-name: team-a\nbind_workers: 4\nrules: [default, extra.rules]\nleader_elect: true\n")
    args = _parser().parse_args(
        [
            "run",
            "--config",
            str(config),
            "--bind-workers",
            "8",
            "--leader-elect-lease-duration",
            "30s",
            "--leader-elect-retry-period",
            "500ms",
            "--metrics-bind-address",
            "",
        ]
    )
    settings = settings_from(args)
    assert settings.scheduler_name == "team-a" and settings.bind_workers == 8  # the flag wins
    assert settings.rules == ("default", "extra.rules") and settings.leader_elect
    assert (settings.leader_elect_lease_duration, settings.leader_elect_retry_period) == (30.0, 0.5)
    assert settings.metrics_bind_address is None  # '' turns the probes off


def test_a_bad_config_is_one_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("schedulerName: x\n")
    with pytest.raises(ConfigError, match="unknown setting 'schedulerName'"):
        settings_from(_parser().parse_args(["run", "--config", str(config)]))
    with pytest.raises(SystemExit):
        _parser().parse_args(["run", "--leader-elect-lease-duration", "soon"])


@pytest.mark.parametrize("command", ["run", "extender"])
def test_a_malformed_config_file_is_one_located_line(tmp_path: Path, command: str) -> None:
    """As for cluster files, ``FILE:LINE:COL: invalid YAML: ...``, not PyYAML's lines naming
    "<unicode string>" (issue 34, item 11)."""
    config = tmp_path / "config.yaml"
    config.write_text("scheduler-name: x\nbind_workers: [4\n")
    with pytest.raises(ConfigError) as caught:
        settings_of(command, config)
    assert (
        str(caught.value)
        == f"{config}:3:1: invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence)"
    )


@pytest.mark.parametrize("command", ["run", "extender"])
def test_a_config_file_gets_the_alias_limits_of_cluster_files(tmp_path: Path, command: str) -> None:
    """A billion laughs (9^9 strings from a few hundred bytes) is refused at once, as go-yaml and
    cluster files refuse it, instead of being expanded (issue 34, item 11)."""
    lines = ['{"b0": &b0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f', "b{i}": &b{i} [' + ",".join([f"*b{i - 1}"] * 9) + "]" for i in range(1, 9)]
    config = tmp_path / "config.yaml"
    config.write_text("\n".join(lines) + "}\n")
    with pytest.raises(ConfigError, match=rf"^{config}:\d+:\d+: invalid YAML: excessive aliasing"):
        settings_of(command, config)


def settings_of(command: str, config: Path) -> object:
    args = _parser().parse_args([command, "--config", str(config)])
    return (settings_from if command == "run" else extender_settings_from)(args)


def test_leader_timings_that_would_break_fencing_are_refused() -> None:
    # A leader stops writing at its renew deadline; a standby takes over at the lease duration:
    # the deadline must come first (and leave room for a late retry), as client-go requires.
    def parse(*flags: str) -> object:
        return settings_from(_parser().parse_args(["run", "--leader-elect", *flags]))

    with pytest.raises(ConfigError, match=r"renew-deadline \(15s\) must be shorter than --leader-elect-lease-duration"):
        parse("--leader-elect-renew-deadline", "15s")
    with pytest.raises(ConfigError, match=r"longer than 1.2 x --leader-elect-retry-period \(2s\)"):
        parse("--leader-elect-renew-deadline", "2s")
    parse(
        "--leader-elect-lease-duration",
        "3s",
        "--leader-elect-renew-deadline",
        "2s",
        "--leader-elect-retry-period",
        "500ms",
    )


def test_log_lines_carry_pod_and_node() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "bound", (), None)
    record.pod, record.node = "default/p", "n1"
    assert TextFormatter(timestamps=False).format(record) == "INFO x: bound pod=default/p node=n1"


def test_durations_in_a_config_file_read_as_kube_scheduler_writes_them(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("cycle_deadline: 2s\nleader_elect_lease_duration: 1m\nrules_max_delay: 500ms\ngrace_seconds: 3\n")
    settings = settings_from(_parser().parse_args(["run", "--config", str(config)]))
    assert (settings.cycle_deadline, settings.leader_elect_lease_duration) == (2.0, 60.0)
    assert (settings.rules_max_delay, settings.grace_seconds) == (0.5, 3)
    config.write_text("cycle_deadline: soon\n")
    with pytest.raises(ConfigError, match=r"config.yaml: cycle_deadline: not a duration: 'soon'"):
        settings_from(_parser().parse_args(["run", "--config", str(config)]))


def test_the_binding_process_is_on_unless_turned_off(tmp_path: Path) -> None:
    assert settings_from(_parser().parse_args(["run"])).bind_process
    assert not settings_from(_parser().parse_args(["run", "--no-bind-process"])).bind_process
    config = tmp_path / "config.yaml"
    config.write_text("bind_process: false\n")
    assert not settings_from(_parser().parse_args(["run", "--config", str(config)])).bind_process
    config.write_text("bind_process: maybe\n")
    with pytest.raises(ConfigError, match="bind_process: expected true or false, got 'maybe'"):
        settings_from(_parser().parse_args(["run", "--config", str(config)]))


def test_victims_go_through_the_eviction_api_when_a_budget_selects_them_unless_told(tmp_path: Path) -> None:
    assert settings_from(_parser().parse_args(["run"])).evict_victims == "budgeted"
    assert settings_from(_parser().parse_args(["run", "--evict-victims", "all"])).evict_victims == "all"
    config = tmp_path / "config.yaml"
    config.write_text("evict_victims: none\n")
    assert settings_from(_parser().parse_args(["run", "--config", str(config)])).evict_victims == "none"
    config.write_text("evict_victims: some\n")
    with pytest.raises(ConfigError, match="^evict_victims: 'some': expected one of budgeted, all, none$"):
        settings_from(_parser().parse_args(["run", "--config", str(config)]))


@pytest.mark.parametrize("value", ["-5", "150"])
def test_a_percentage_of_nodes_to_score_out_of_range_is_refused(value: str) -> None:
    """As kube-scheduler validates percentageOfNodesToScore, and as the other percentages are
    checked (issue 34, item 7: run and simulate took -5 and 150; simulate's JSON recorded -5)."""
    with pytest.raises(ConfigError, match=rf"^percentage_of_nodes_to_score: {value} is not in 0\.\.100$"):
        settings_from(_parser().parse_args(["run", "--percentage-of-nodes-to-score", value]))
    with pytest.raises(ConfigError, match=rf"^percentage_of_nodes_to_score: {value} is not in 0\.\.100$"):
        simulate(ClusterObjects(), SimulateSettings((), percentage_of_nodes_to_score=int(value)))


@pytest.mark.parametrize("address", ["nonsense", "10251", ":99999", "host name:80"])
def test_a_bad_listening_address_is_refused_before_anything_starts(
    address: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """run logged "starting", then failed with "invalid literal for int()" (issue 34, item 8)."""
    with caplog.at_level(logging.INFO):
        assert main(["run", "--metrics-bind-address", address]) == 2
        assert main(["extender", "--listen", address]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"rulesched: {flag} {address!r}: expected HOST:PORT (say 0.0.0.0:10251, 127.0.0.1:0 or [::1]:8888)"
        for flag in ("--metrics-bind-address", "--listen")
    ]
    assert not [r for r in caplog.records if "starting" in r.getMessage()]


def test_listening_addresses_as_written() -> None:
    assert host_port(":10251", "--x") == ("0.0.0.0", 10251)
    assert host_port("127.0.0.1:0", "--x") == ("127.0.0.1", 0)
    assert host_port("[::1]:8888", "--x") == ("::1", 8888)


def test_the_client_keeps_a_connection_for_each_worker_and_each_watch(server: TestApiServer, tmp_path: Path) -> None:
    """The live client's pool holds ``--bind-workers`` connections for the workers' writes and
    the watches' beside them: at 64 workers on a pool of 64, a preemption burst overflowed it
    ("Connection pool is full, discarding connection", a TLS handshake for each request past it)."""
    from rulesched.kube.api import KubeApi
    from rulesched.mirror import EVERYTHING
    from rulesched.run.loop import Loop
    from rulesched.run.settings import RunSettings

    loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), bind_workers=100))
    assert loop.api._configuration.connection_pool_maxsize >= 100 + len(EVERYTHING)
    assert KubeApi(server.kubeconfig(str(tmp_path / "k2")))._configuration.connection_pool_maxsize == 64
