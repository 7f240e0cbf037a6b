"""What a DRA pod's claims ask, as part of its equivalence class's key (see
:class:`rulesched.lang.evaluation.ruleset.Session`): pods whose claims ask the same of the same
devices share a class.

The key is the text of the claims' names and specs. Working it out is a ``repr`` of nested
dataclasses, ~30 µs a pod; a template's claims share the template's spec object (the claim
controller copies the reference), so a session keeps the text by the specs' identity
(:class:`ClaimsKeys`) and works it out once per template, not once per pod (twice, before: once
for the class key's part and once to decide whether the pod may share a class at all).
"""

from __future__ import annotations

from typing import Any

from rulesched.model import Pod

_KEPT = 1_000  # texts a session keeps by the specs' identity; past it, afresh


def dra_claims_key(pod: Pod) -> str | None:
    """What a DRA pod's claims ask, when pods asking the same may share a class: every claim
    known and not allocated (an allocated claim pins the pod by its own node selector); else None."""
    if any(entry.spec is None or entry.allocated for entry in pod.resource_claims):
        return None
    return repr([(entry.name, entry.spec) for entry in pod.resource_claims])


class ClaimsKeys:
    """:func:`dra_claims_key`, kept by the identity of the claims' specs (held here, so an id
    is never another object's while its entry stands). One per session: not shared between
    threads."""

    def __init__(self) -> None:
        # ((entry name, id of its spec), ...) -> (the specs, the key)
        self._kept: dict[tuple[tuple[str, int], ...], tuple[tuple[Any, ...], str]] = {}

    def key(self, pod: Pod) -> str | None:
        """``dra_claims_key(pod)``."""
        entries = pod.resource_claims
        if any(entry.spec is None or entry.allocated for entry in entries):
            return None
        ids = tuple([(entry.name, id(entry.spec)) for entry in entries])
        hit = self._kept.get(ids)
        if hit is not None and all(kept is entry.spec for kept, entry in zip(hit[0], entries, strict=True)):
            return hit[1]
        if len(self._kept) >= _KEPT:
            self._kept.clear()
        found = repr([(entry.name, entry.spec) for entry in entries])
        self._kept[ids] = (tuple(entry.spec for entry in entries), found)
        return found
