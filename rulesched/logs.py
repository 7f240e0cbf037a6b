"""What every command writes on stderr: levels, verbosity and the two line formats.

Operators set verbosity where they are used to: ``-v``/``-vv`` or klog's ``--v=N`` before or
after the subcommand, ``log_level`` in a ``--config`` file, or ``RULESCHED_LOG_LEVEL``; the
first of these given wins, in that order (:func:`resolve`). Levels, klog numbers in brackets:

* ``info`` (``--v=0``, 1; the default of ``run`` and ``extender``): start-up, caches synced,
  leadership, rule reloads, bindings and their failures, evictions, shutdown;
* ``verbose`` (``--v=2``, 3; ``-v``): each pod's decision as well (scheduled, unschedulable,
  nominated; the extender's filter, prioritize and preempt answers);
* ``debug`` (``--v=4``, 5; ``-vv``): rulesched's internals; ``--v=6`` and up (``-vvv``) adds
  the libraries' own debug logging (HTTP requests of the Kubernetes client, aiohttp);
* ``warning``, ``error``: less. The one-shot tools (lint, fmt, simulate, test, diff) default to
  ``warning`` and leave the timestamp out, so their stderr stays as terse as a compiler's.

Every record is one line, whatever it carries: ``2026-11-26T17:54:06.123Z INFO
rulesched.run.workers: bound pod=ns/p node=n1 rules=abc123`` (:class:`TextFormatter`), or one
JSON object (:class:`JsonFormatter`: ``ts``, ``level``, ``logger``, ``msg``, then the fields).
Text from requests and objects (pod names, reasons, error messages) cannot forge a line or a
level: control characters and line separators are escaped (``\\n``), a field value with spaces,
quotes or ``=`` is quoted, and each interpolated argument and field value is cut at
:data:`FIELD_LIMIT` characters (``…(+N)`` says how many more there were).
Standard library only: no module of rulesched is imported here, so every layer may log with it.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
import time
import traceback
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

VERBOSE = 15  # between DEBUG and INFO: per-pod decisions (klog's V(2))
FIELD_LIMIT = 256  # characters of one field value or one interpolated argument
MESSAGE_LIMIT = 1024  # characters of a whole message
EXCEPTION_LIMIT = 4096  # characters of a traceback (its end is kept: the error is there)
ENV_LEVEL = "RULESCHED_LOG_LEVEL"
ENV_FORMAT = "RULESCHED_LOG_FORMAT"
FORMATS = ("text", "json")
LEVELS = {
    "debug": logging.DEBUG,
    "verbose": VERBOSE,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
}
logging.addLevelName(VERBOSE, "VERBOSE")


class LogSettingError(ValueError):
    """A level or format that means nothing; the command line turns it into one line."""


@dataclass(frozen=True)
class LogSettings:
    level: int = logging.INFO  # rulesched's own loggers
    format: str = "text"  # text | json
    libraries: int = logging.WARNING  # every other logger (kubernetes, urllib3, aiohttp, watchfiles)
    timestamps: bool = True  # text lines start with an ISO-8601 UTC time

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise LogSettingError(f"log format {self.format!r}: expected text or json")


@dataclass(frozen=True)
class Verbosity:
    """A level as an operator gave it, with what it means for the libraries' loggers."""

    level: int
    libraries: int


def from_klog(number: int) -> Verbosity:
    """klog's ``--v=N``: 0-1 info, 2-3 verbose, 4-5 debug, 6 and up debug for the libraries too."""
    if number < 0:
        raise LogSettingError(f"verbosity {number}: expected 0 or more")
    level = logging.INFO if number < 2 else VERBOSE if number < 4 else logging.DEBUG
    return Verbosity(level, logging.DEBUG if number >= 6 else logging.WARNING)


def parse_level(value: object, where: str) -> Verbosity:
    """A level name (``info``, ``debug``...) or a klog number, as a config file or the
    environment gives it; ``where`` names the source in the error."""
    text = str(value).strip().lower()
    if isinstance(value, bool):
        text = "?"
    if text.isdigit():
        return from_klog(int(text))
    if text in LEVELS:
        level = LEVELS[text]
        return Verbosity(level, max(level, logging.WARNING))
    raise LogSettingError(f"{where}: {value!r} is not a log level (say {', '.join(LEVELS)} or a number like 2)")


def parse_format(value: object, where: str) -> str:
    text = str(value).strip().lower()
    if text not in FORMATS:
        raise LogSettingError(f"{where}: {value!r} is not a log format (say text or json)")
    return text


def resolve(
    flag: Verbosity | None,
    flag_format: str | None,
    config: Mapping[str, object],
    env: Mapping[str, str],
    default: int,
    config_path: str = "",
) -> LogSettings:
    """Flags over the config file (``log_level``, ``log_format``) over the environment over the
    command's default. The default also decides timestamps: only the long-running commands
    (default INFO) print them. ``config_path`` names the file in errors."""
    where = f"{config_path}: " if config_path else ""
    if flag is not None:
        verbosity = flag
    elif config.get("log_level") is not None:
        verbosity = parse_level(config["log_level"], f"{where}log_level")
    elif env.get(ENV_LEVEL):
        verbosity = parse_level(env[ENV_LEVEL], ENV_LEVEL)
    else:
        verbosity = Verbosity(default, max(default, logging.WARNING))
    if flag_format is not None:
        fmt = parse_format(flag_format, "--log-format")
    elif config.get("log_format") is not None:
        fmt = parse_format(config["log_format"], f"{where}log_format")
    elif env.get(ENV_FORMAT):
        fmt = parse_format(env[ENV_FORMAT], ENV_FORMAT)
    else:
        fmt = "text"
    return LogSettings(verbosity.level, fmt, verbosity.libraries, timestamps=default <= logging.INFO)


# --- making text safe ---------------------------------------------------------------------------

_ASCII_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")
_QUOTE_NEEDED = re.compile(r'[\s"=\\]')
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})  # controls, bidi marks, line separators
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def cap(text: str, limit: int = FIELD_LIMIT) -> str:
    """``text`` cut at ``limit`` characters, ``…(+N)`` saying how many more there were."""
    return text if len(text) <= limit else f"{text[:limit]}…(+{len(text) - limit})"


def _escape_char(char: str) -> str:
    short = _SHORT.get(char)
    if short is not None:
        return short
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape(text: str) -> str:
    """Control characters, line and paragraph separators and invisible format characters as
    escapes, so a value cannot end a line or disguise what follows it."""
    if text.isascii():
        return _ASCII_UNSAFE.sub(lambda m: _escape_char(m.group()), text)
    return "".join(_escape_char(c) if unicodedata.category(c) in _UNSAFE_CATEGORIES else c for c in text)


def field_value(value: object) -> str:
    """One ``key=value`` value: capped, escaped, quoted when it holds spaces, quotes, ``=`` or
    a backslash (or is empty)."""
    text = cap(str(value))
    if text and _QUOTE_NEEDED.search(text) is None and escape(text) == text:
        return text
    return quote(text)


def quote(text: str) -> str:
    """``"text"`` with backslashes and quotes escaped, then control characters."""
    return '"' + escape(text.replace("\\", "\\\\").replace('"', '\\"')) + '"'


def _capped_arg(value: object) -> object:
    if value is None or isinstance(value, int | float):
        return value  # (numbers keep %d and %.1f working)
    text = str(value)
    return value if len(text) <= FIELD_LIMIT else cap(text)


def message(record: logging.LogRecord, escaped: bool = True) -> str:
    """The record's message with each argument capped, then the whole capped and (for text
    lines; JSON escapes its own way) escaped."""
    args = record.args
    if args:
        capped: Any
        if isinstance(args, Mapping):
            capped = {key: _capped_arg(value) for key, value in args.items()}
        else:
            capped = tuple(_capped_arg(value) for value in args)
        try:
            text = str(record.msg) % capped
        except (TypeError, ValueError, KeyError):
            text = record.getMessage()  # (what logging itself would have made of it)
    else:
        text = str(record.msg)
    text = cap(text, MESSAGE_LIMIT)
    return escape(text) if escaped else text


_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def fields(record: logging.LogRecord) -> list[tuple[str, object]]:
    """What ``extra={...}`` added to the record (pod, node, rule, reason, rules, ...), in the
    order given; empty values left out."""
    return [
        (key, value)
        for key, value in vars(record).items()
        if key not in _STANDARD and not key.startswith("_") and value is not None and value != ""
    ]


def _exception(record: logging.LogRecord) -> str:
    if not record.exc_info:
        return ""
    text = "".join(traceback.format_exception(*record.exc_info)).rstrip()
    if len(text) > EXCEPTION_LIMIT:
        text = f"(+{len(text) - EXCEPTION_LIMIT})…{text[-EXCEPTION_LIMIT:]}"
    return text


def timestamp(created: float) -> str:
    """ISO-8601 in UTC with milliseconds: ``2026-11-26T17:54:06.123Z``."""
    seconds = math.floor(created)
    millis = min(999, int((created - seconds) * 1000))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


class TextFormatter(logging.Formatter):
    """``TIME LEVEL logger: message key=value ...`` on one line (no time for the one-shot tools);
    a traceback is the last field, ``exception="..."``, escaped like any value."""

    def __init__(self, timestamps: bool = True) -> None:
        super().__init__()
        self.timestamps = timestamps

    def format(self, record: logging.LogRecord) -> str:
        parts = [timestamp(record.created)] if self.timestamps else []
        parts.append(f"{record.levelname} {record.name}: {message(record)}")
        parts.extend(f"{escape(key)}={field_value(value)}" for key, value in fields(record))
        exception = _exception(record)
        if exception:
            parts.append(f"exception={quote(exception)}")  # (capped by its own limit)
        return " ".join(parts)


_RESERVED = ("ts", "level", "logger", "msg", "exception")


def _json_value(value: object) -> object:
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return cap(str(value))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg``, then the record's
    fields by name (a field named like one of those gets a trailing ``_``) and ``exception``.
    Non-ASCII is escaped too, so no byte of the line can be read as a line break."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": message(record, escaped=False),
        }
        for key, value in fields(record):
            out[key + "_" if key in _RESERVED else key] = _json_value(value)
        exception = _exception(record)
        if exception:
            out["exception"] = exception
        return json.dumps(out, ensure_ascii=True, default=str)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time (a test's captured stream included)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr  # (under the handler's lock: Handler.handle holds it)
        super().emit(record)


def installed() -> LogSettings:
    """The settings :func:`configure` installed (defaults where it was never called): what a
    helper process of this one configures to write the same lines."""
    root = logging.getLogger()
    handler = next((h for h in root.handlers if isinstance(h, StderrHandler)), None)
    formatter = handler.formatter if handler is not None else None
    return LogSettings(
        logging.getLogger("rulesched").getEffectiveLevel(),
        "json" if isinstance(formatter, JsonFormatter) else "text",
        root.level if handler is not None else logging.WARNING,
        formatter.timestamps if isinstance(formatter, TextFormatter) else True,
    )


def configure(settings: LogSettings) -> None:
    """Install the one stderr handler on the root logger (replacing one an earlier call
    installed) and set the levels: rulesched's loggers at ``settings.level``, the rest at
    ``settings.libraries``."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, StderrHandler):
            root.removeHandler(handler)
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter() if settings.format == "json" else TextFormatter(settings.timestamps))
    root.addHandler(handler)
    root.setLevel(settings.libraries)
    logging.getLogger("rulesched").setLevel(settings.level)
