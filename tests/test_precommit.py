""".pre-commit-hooks.yaml: every hook runs a command the CLI accepts, on the files it is for."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from rulesched.cli import _parser

HOOKS = Path(__file__).resolve().parents[1] / ".pre-commit-hooks.yaml"


def test_hooks_run_commands_the_cli_accepts() -> None:
    hooks = yaml.safe_load(HOOKS.read_text())
    assert {h["id"] for h in hooks} == {"rulesched-lint", "rulesched-fmt", "rulesched-test"}
    for hook in hooks:
        assert hook["language"] == "python"
        program, *words = shlex.split(hook["entry"])
        assert program == "rulesched"
        files = ["rules/default.rules"] if hook.get("pass_filenames", True) else []
        args = _parser().parse_args([*words, *hook.get("args", []), *files])
        assert args.command in ("lint", "fmt", "test")
        assert re.search(hook["files"], "rules/default.rules")
    (test,) = [h for h in hooks if h["id"] == "rulesched-test"]
    assert re.search(test["files"], "rules/default.test.yaml")
