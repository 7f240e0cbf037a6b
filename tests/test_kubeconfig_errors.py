"""A kubeconfig the client cannot use is one line naming the file and the problem, exit 2, for
every command that takes ``--kubeconfig`` (issue 34, item 2: bad YAML printed ~60 lines ending
in ``yaml.parser.ParserError``, a file holding one word a ``TypeError`` from kube/api.py, a
missing file "Invalid kube-config file. No configuration found.")."""

from __future__ import annotations

from pathlib import Path

import pytest

from rulesched.cli import main

COMMANDS = [["run"], ["extender"], ["audit", "--live"]]
FILES = [
    ("bad.yaml", "apiVersion: v1\nclusters: [\n", ":3:1: invalid YAML: did not find expected node content"),
    ("hello.yaml", "hello\n", ": expected a mapping (clusters, contexts, users), got the string 'hello'"),
    ("empty.yaml", "# nothing\n", ": expected a mapping (clusters, contexts, users), got an empty file"),
    ("tabs.yaml", "a:\n\tb: 1\n", ":2:1: invalid YAML: found character that cannot start any token"),
    ("context.yaml", "apiVersion: v1\ncontexts: [x]\ncurrent-context: x\n", "cannot configure the Kubernetes client"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(("name", "text", "words"), FILES, ids=[f[0] for f in FILES])
def test_a_kubeconfig_the_client_cannot_use_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], name: str, text: str, words: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    code = main([*command, "--kubeconfig", str(path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and str(path) in err and words in err, err


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_missing_kubeconfig_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    path = tmp_path / "nowhere.yaml"
    code = main([*command, "--kubeconfig", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err == f"rulesched: kubeconfig {path}: cannot read: No such file or directory\n", err
