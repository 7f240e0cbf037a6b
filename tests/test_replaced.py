"""rulesched.model.replaced.replaced gives what dataclasses.replace gives, field by field, on the
values the scheduler replaces per pod (the pod, its claim entries, the claims), and takes its own
path for them (not dataclasses.replace's)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.model import Pod
from rulesched.model.dra import ClaimSpec, ResourceClaim
from rulesched.model.objects import PodClaim
from rulesched.model.replaced import _fields, replaced
from tests.helpers.profiles import examples
from tests.strategies import pods


def _same(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    for f in dataclasses.fields(a):
        assert getattr(a, f.name) is getattr(b, f.name), f.name


@settings(max_examples=examples(100), deadline=None)
@given(pods(), st.sampled_from(["n1", "", "node-0"]), st.sampled_from(["", "x"]), st.booleans())
def test_a_pod_replaced_is_the_pod_dataclasses_replace_makes(pod: Pod, node: str, nominated: str, claims: bool) -> None:
    changes: dict[str, Any] = {"node_name": node, "nominated_node_name": nominated}
    if claims:
        changes["resource_claims"] = (PodClaim("gpu", "", "t", "made"),)
    _same(replaced(pod, **changes), dataclasses.replace(pod, **changes))
    _same(replaced(pod), dataclasses.replace(pod))


@given(st.text(max_size=3), st.booleans(), st.sampled_from([(), ("a",)]))
def test_claims_and_entries_replaced_alike(name: str, allocated: bool, finalizers: tuple[str, ...]) -> None:
    entry = PodClaim(name, "", "t", None)
    spec = ClaimSpec()
    _same(replaced(entry, spec=spec, allocated=allocated), dataclasses.replace(entry, spec=spec, allocated=allocated))
    claim = ResourceClaim(name or "c", spec=spec)
    _same(replaced(claim, finalizers=finalizers), dataclasses.replace(claim, finalizers=finalizers))


def test_the_plain_values_take_the_short_path_and_others_the_long_one() -> None:
    assert _fields(Pod) is not None and _fields(PodClaim) is not None and _fields(ResourceClaim) is not None

    @dataclasses.dataclass(frozen=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            if self.value < 0:
                raise ValueError("negative")

    assert _fields(Checked) is None
    with pytest.raises(ValueError, match="negative"):
        replaced(Checked(1), value=-1)  # (its __post_init__ still runs)
    with pytest.raises(TypeError):
        replaced(PodClaim("a"), no_such_field=1)  # (as dataclasses.replace says)
