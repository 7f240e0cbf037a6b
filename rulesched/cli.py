"""The ``rulesched`` command: parses arguments into settings dataclasses and runs one job.

Logging is set up here, before the command runs (:mod:`rulesched.logs`): ``-v``, ``--v=N`` and
``--log-format`` are accepted before and after the subcommand, then a ``--config`` file's
``log_level``, then ``RULESCHED_LOG_LEVEL``.

Every :class:`rulesched.errors.RuleschedError` ends here as one line on stderr and exit status 2
(lint's own findings exit 1), preceded for rules that do not load by each located problem as lint
prints it; anything else escaping is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence

from rulesched import __version__
from rulesched.errors import ConfigError, RuleschedError, RulesError
from rulesched.logs import FORMATS, LogSettingError, LogSettings, Verbosity, configure, from_klog, resolve

LONG_RUNNING = ("run", "extender")  # default level INFO, timestamped lines; the rest WARNING


def _klog_number(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"not a verbosity: {text!r} (say 0, 2 or 4)")
    return number


def _add_logging_arguments(parser: argparse.ArgumentParser, suffix: str) -> None:
    """The same logging flags before the subcommand (``suffix`` "") and after it ("_sub"): two
    destinations, since a subcommand's defaults would overwrite what was given before it."""
    group = parser.add_argument_group("logging")
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        dest="verbose" + suffix,
        help="more logging: -v each pod's decision, -vv debug",
    )
    group.add_argument(
        "--v",
        type=_klog_number,
        metavar="N",
        dest="klog_v" + suffix,
        help="verbosity as klog numbers it: 0 info, 2 each pod's decision, 4 debug, 6 libraries' debug too",
    )
    group.add_argument("--log-format", choices=FORMATS, dest="log_format" + suffix, help="text (default) or json")


class _Parser(argparse.ArgumentParser):
    """The top-level parser, knowing its subcommands' parsers: an argument no subcommand takes
    is reported with that subcommand's usage (``simulate --bogus`` shows simulate's, not the
    list of commands)."""

    commands: dict[str, argparse.ArgumentParser]

    def parse_args(self, args: Sequence[str] | None = None, namespace: None = None) -> argparse.Namespace:  # type: ignore[override]
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            command = self.commands.get(getattr(parsed, "command", "") or "", self)
            command.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed


def _parser() -> _Parser:
    parser = _Parser(prog="rulesched", description="Kubernetes scheduling policy as rules.")
    parser.add_argument("--version", action="version", version=f"rulesched {__version__}")
    _add_logging_arguments(parser, "")
    sub = parser.add_subparsers(dest="command", required=True)

    lint = sub.add_parser("lint", help="check rules files like a compiler")
    lint.add_argument("paths", nargs="+", metavar="PATH", help="rules files or folders")
    lint.add_argument("--format", choices=("text", "json"), default="text")
    lint.add_argument("--strict", action="store_true", help="warnings fail too")
    lint.add_argument(
        "--for",
        dest="target",
        choices=("scheduler", "extender"),
        help="what the rules are for: `rulesched run`/`simulate` (a set without a resource-fit filter "
        "is warned about), or `rulesched extender` (it is not); default: a file's `# rulesched: extender` line",
    )

    fmt = sub.add_parser("fmt", help="print rules files in canonical form")
    fmt.add_argument("paths", nargs="+", metavar="PATH")
    fmt.add_argument("--check", action="store_true", help="only report files that would change (exit 1)")
    fmt.add_argument("--write", action="store_true", help="rewrite the files in place")

    from rulesched.authoring.audit import add_audit_parser
    from rulesched.authoring.diff_cli import add_diff_parser
    from rulesched.authoring.ruletest import add_test_parser
    from rulesched.authoring.why import add_explain_parser
    from rulesched.extender.cli import add_extender_parser
    from rulesched.run.cli import add_run_parser
    from rulesched.simulate.cli import add_simulate_parser

    add_simulate_parser(sub)
    add_run_parser(sub)
    add_extender_parser(sub)
    add_test_parser(sub)
    add_diff_parser(sub)
    add_explain_parser(sub)
    add_audit_parser(sub)
    for command in sub.choices.values():
        _add_logging_arguments(command, "_sub")
    parser.commands = dict(sub.choices)
    return parser


def log_settings(args: argparse.Namespace, env: Mapping[str, str]) -> LogSettings:
    """Flags (either side of the subcommand) over ``--config`` over the environment over the
    command's default."""
    count = args.verbose + args.verbose_sub
    numbers = [n for n in (args.klog_v, args.klog_v_sub) if n is not None]
    flag: Verbosity | None = from_klog(max([2 * count, *numbers])) if count or numbers else None
    config: dict[str, object] = {}
    if getattr(args, "config", None):
        from rulesched.config import read_log_config

        config = read_log_config(args.config)
    default = logging.INFO if args.command in LONG_RUNNING else logging.WARNING
    try:
        return resolve(flag, args.log_format_sub or args.log_format, config, env, default, getattr(args, "config", ""))
    except LogSettingError as err:
        raise ConfigError(str(err)) from None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        configure(log_settings(args, os.environ))
        if args.command == "lint":
            return _lint(args)
        if args.command == "fmt":
            return _fmt(args)
        if args.command == "run":
            from rulesched.run.cli import run_command

            return run_command(args)
        if args.command == "test":
            from rulesched.authoring.ruletest import test_command

            return test_command(args)
        if args.command == "diff":
            from rulesched.authoring.diff_cli import diff_command

            return diff_command(args)
        if args.command == "audit":
            from rulesched.authoring.audit import audit_command

            return audit_command(args)
        if args.command == "explain":
            from rulesched.authoring.why import explain_command

            return explain_command(args)
        if args.command == "extender":
            from rulesched.extender.cli import extender_command

            return extender_command(args)
        from rulesched.simulate.cli import run_simulate

        return run_simulate(args)
    except RuleschedError as err:
        _print_diagnostics(err)
        print(f"rulesched: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        sys.stderr.close()
        return 0


def _print_diagnostics(err: RuleschedError) -> None:
    """Rules that do not load: every problem as lint shows it (the line, a caret, a suggestion)
    on stderr, before the one-line summary. Notes (what an override replaced) are left out."""
    if not isinstance(err, RulesError):
        return
    from rulesched.lang.frontend.source import Diagnostic, Severity

    for d in err.diagnostics:
        if isinstance(d, Diagnostic) and d.severity is not Severity.NOTE:
            print(d.render(), file=sys.stderr)


def _lint(args: argparse.Namespace) -> int:
    from rulesched.lang.frontend.lint import LintSettings, exit_code, lint, render

    settings = LintSettings(tuple(args.paths), args.format, args.strict, args.target)
    result = lint(settings)
    print(render(result, settings.format))
    return exit_code(result, settings.strict)


def _fmt(args: argparse.Namespace) -> int:
    from rulesched.lang.frontend.format import FormatSettings, format_paths

    return format_paths(FormatSettings(tuple(args.paths), check=args.check, write=args.write))


if __name__ == "__main__":
    raise SystemExit(main())
