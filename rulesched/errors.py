"""The exceptions rulesched raises, in one tree.

    RuleschedError                 every error a user can cause; ``str()`` is one clear line
    ├── RulesError                 a rules file does not load (lang: diagnostics attached)
    ├── InputError                 a cluster file or API object is malformed
    │   └── ObjectError            ... naming the object and the field
    ├── ConfigError                bad command-line or configuration settings
    └── KubeError                  the API server said no (rulesched.kube.api maps client errors here)
        ├── ConflictError          409: resourceVersion/bind conflicts
        ├── GoneError              410: a watch's resourceVersion is too old; relist
        ├── NotFoundError          404
        ├── TooManyRequestsError   429: an eviction a PodDisruptionBudget forbids now; throttling
        └── UnavailableError       5xx, or no connection: retried with backoff

The command line catches ``RuleschedError`` and prints its one line; anything else is a bug.
"""

from __future__ import annotations


class RuleschedError(Exception):
    """Base of every error a user's input or environment can cause."""


class RulesError(RuleschedError):
    """Rules that do not load. ``diagnostics`` holds every located problem found."""

    def __init__(self, message: str, diagnostics: tuple[object, ...] = ()) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics


class InputError(RuleschedError):
    """A cluster file that cannot be read or parsed. The message is kept to one line: control
    characters from the input (a NUL or a newline in a name, say) are shown escaped."""

    def __init__(self, message: object = "", *args: object) -> None:
        text = str(message)
        if not text.isprintable():
            text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
        super().__init__(text, *args)


class ObjectError(InputError):
    """A Kubernetes object with a bad field: ``file: Kind ns/name: field.path: problem``."""

    def __init__(self, problem: str, *, source: str = "", obj: str = "", field: str = "") -> None:
        self.problem = problem
        self.source = source
        self.obj = obj
        self.field = field
        parts = [p for p in (source, obj, field) if p]
        super().__init__(": ".join([*parts, problem]))


class ConfigError(RuleschedError):
    """Settings that make no sense together, or that name missing files."""


class KubeError(RuleschedError):
    """The API server refused a request or could not be reached."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class ConflictError(KubeError):
    """409 Conflict."""


class GoneError(KubeError):
    """410 Gone: the resourceVersion is too old."""


class NotFoundError(KubeError):
    """404 Not Found."""


class TooManyRequestsError(KubeError):
    """429 Too Many Requests."""


class UnavailableError(KubeError):
    """5xx, or the API server could not be reached (status 0)."""
