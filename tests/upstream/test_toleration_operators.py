"""Toleration operators Gt and Lt (KEP-5471, TaintTolerationComparisonOperators: alpha, off by
default in 1.37), ported from k8s.io/api/core/v1/toleration_test.go at v0.37.2
(TestTolerationToleratesTaint with the gate on, TestCompareNumericValues). An API server accepts
such a toleration only with the gate on, so a pod carrying one is judged as with the gate on.
"""

from __future__ import annotations

import pytest

from rulesched.model.objects import Taint, Toleration
from rulesched.semantics.matching import compare_numeric, tolerates

TOLERATES = [
    (
        "toleration with Gt operator - taint value less than toleration value, expect not tolerated",
        "Gt",
        "950",
        "800",
        False,
    ),
    (
        "toleration with Gt operator - taint value greater than toleration value, expect tolerated",
        "Gt",
        "750",
        "950",
        True,
    ),
    (
        "toleration with Lt operator - taint value greater than toleration value, expect not tolerated",
        "Lt",
        "800",
        "950",
        False,
    ),
    (
        "toleration with Lt operator - taint value less than toleration value, expect tolerated",
        "Lt",
        "950",
        "800",
        True,
    ),
    ("toleration with Gt operator and taint with equal numeric value, expect not tolerated", "Gt", "950", "950", False),
    ("toleration with Gt operator and taint with non-numeric value, expect not tolerated", "Gt", "950", "high", False),
    (
        "toleration with Gt operator and negative numeric values - taint value less than threshold, expect not tolerated",
        "Gt",
        "-100",
        "-200",
        False,
    ),
    (
        "toleration with Gt operator and large int64 values - taint value less than threshold, expect not tolerated",
        "Gt",
        "9223372036854775806",
        "100",
        False,
    ),
]


@pytest.mark.parametrize(
    ("operator", "value", "taint_value", "want"), [pytest.param(*c[1:], id=c[0]) for c in TOLERATES]
)
def test_toleration_tolerates_taint(operator: str, value: str, taint_value: str, want: bool) -> None:
    toleration = Toleration(key="node.example.com/slo", operator=operator, value=value, effect="NoSchedule")
    taint = Taint(key="node.example.com/slo", value=taint_value, effect="NoSchedule")
    assert tolerates(toleration, taint) is want


COMPARE = [
    ("Gt operator - taint value greater than toleration value, expect true", "100", "200", "Gt", True),
    ("Gt operator - taint value less than toleration value, expect false", "200", "100", "Gt", False),
    ("Gt operator - taint value equal to toleration value, expect false", "100", "100", "Gt", False),
    ("Gt operator - negative numbers, taint greater, expect true", "-100", "-50", "Gt", True),
    ("Gt operator - negative numbers, taint less, expect false", "-50", "-100", "Gt", False),
    ("Gt operator - zero and positive, expect true", "0", "1", "Gt", True),
    (
        "Gt operator - large int64 values, taint greater, expect true",
        "9223372036854775806",
        "9223372036854775807",
        "Gt",
        True,
    ),
    ("Lt operator - taint value less than toleration value, expect true", "200", "100", "Lt", True),
    ("Lt operator - taint value greater than toleration value, expect false", "100", "200", "Lt", False),
    ("Lt operator - taint value equal to toleration value, expect false", "100", "100", "Lt", False),
    ("Lt operator - negative numbers, taint less, expect true", "-50", "-100", "Lt", True),
    ("Lt operator - negative numbers, taint greater, expect false", "-100", "-50", "Lt", False),
    ("Lt operator - zero and negative, expect true", "0", "-1", "Lt", True),
    ("Gt operator - invalid toleration value (non-numeric), expect false", "abc", "100", "Gt", False),
    ("Gt operator - invalid toleration value (empty string), expect false", "", "100", "Gt", False),
    ("Gt operator - invalid toleration value (leading zero), expect false", "0100", "200", "Gt", False),
    ("Gt operator - invalid toleration value (plus sign), expect false", "+100", "200", "Gt", False),
    ("Gt operator - invalid toleration value (floating point), expect false", "100.5", "200", "Gt", False),
    ("Gt operator - invalid toleration value (just minus sign), expect false", "-", "100", "Gt", False),
    ("Gt operator - invalid taint value (non-numeric), expect false", "100", "xyz", "Gt", False),
    ("Gt operator - invalid taint value (empty string), expect false", "100", "", "Gt", False),
]


@pytest.mark.parametrize(("toleration", "taint", "operator", "want"), [pytest.param(*c[1:], id=c[0]) for c in COMPARE])
def test_compare_numeric_values(toleration: str, taint: str, operator: str, want: bool) -> None:
    assert compare_numeric(toleration, taint, operator) is want


def test_a_pod_with_gt_decodes_and_the_default_rules_honour_it() -> None:
    from tests.upstream.harness import filter_reasons, node, pod, state

    taint = {"key": "slo", "value": "950", "effect": "NoSchedule"}
    cluster = state([node("n", taints=[taint])])
    gt = pod("p", spec={"tolerations": [{"key": "slo", "operator": "Gt", "value": "900", "effect": "NoSchedule"}]})
    lt = pod("q", spec={"tolerations": [{"key": "slo", "operator": "Lt", "value": "900", "effect": "NoSchedule"}]})
    assert filter_reasons(gt, cluster, "n", "TaintToleration") is None
    assert filter_reasons(lt, cluster, "n", "TaintToleration") == ("node(s) had untolerated taint {slo: 950}",)
