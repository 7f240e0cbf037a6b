"""The allocator's bookkeeping per request and per claim constraint while it searches
(upstream's requestData and its matchAttribute/distinctAttribute constraints): which requests a
constraint covers and the attribute values the devices taken so far have, as devices are taken
and given back by the backtracking search (:mod:`rulesched.semantics.dra`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rulesched.model.dra import DeviceClass, ExactRequest
from rulesched.semantics.dra_devices import Candidate, lookup_attribute


@dataclass(slots=True)
class RequestData:
    """One request, or one subrequest, being allocated (upstream's requestData)."""

    claim: int
    index: int
    name: str  # the request's name, or the subrequest's
    parent: str  # the parent request's name for a subrequest, else ""
    spec: ExactRequest
    cls: DeviceClass
    count: int = 0
    all_devices: list[Candidate] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name

    @property
    def admin(self) -> bool:
        return bool(self.spec.admin_access)


class Constraint:
    """matchAttribute or distinctAttribute over some requests of a claim, as devices come and go."""

    def __init__(self, requests: Sequence[str], attribute: str, match: bool) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute
        self.match = match
        self.values: list[Any] = []

    def applies(self, req: RequestData) -> bool:
        if not self.requests:
            return True
        if req.parent:
            return req.parent in self.requests or req.full_name in self.requests
        return req.name in self.requests

    def add(self, req: RequestData, cand: Candidate) -> bool:
        if not self.applies(req):
            return True
        value = lookup_attribute(cand.device, cand.slice.driver, self.attribute)
        if value is None:
            return False
        key = (value.kind, value.value)
        # (a list-valued attribute, DRAListTypeAttributes being off, matches nothing once a
        # device is in the set: upstream's "unknown type")
        if self.values and value.kind not in ("int", "bool", "string", "version"):
            return False
        if self.match:
            if self.values and self.values[0] != key:
                return False
        elif key in self.values:
            return False
        self.values.append(key)
        return True

    def remove(self, req: RequestData) -> None:
        if self.applies(req):
            self.values.pop()
