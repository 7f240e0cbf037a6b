"""The one scoring function (rulesched.scheduler.scoring.weighted_totals): totals and per-rule
normalised scores equal a per-rule Python computation, for int64 columns and for Python ints
beyond int64, and a constant column normalises as the list normaliser would."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rulesched.lang import BoundScore
from rulesched.scheduler.scoring import normalize, normalize_constant, score_matrix, weighted_totals

MODES = ("none", "max", "reverse", "minmax", "spread")


@given(st.sampled_from(MODES[1:]), st.integers(-5, 10**20), st.integers(1, 6))
def test_a_constant_column_normalises_as_the_list_normaliser(mode: str, value: int, count: int) -> None:
    assert normalize(mode, [value] * count) == [normalize_constant(mode, value)] * count


@given(
    st.lists(st.tuples(st.sampled_from(MODES), st.integers(1, 5)), min_size=1, max_size=4), st.integers(1, 6), st.data()
)
def test_totals_are_the_weighted_sum_of_normalised_scores(
    rules: list[tuple[str, int]], rows: int, data: st.DataObject
) -> None:
    big = data.draw(st.booleans())
    values = st.integers(-3, 2**70 if big else 400)
    raw = [[data.draw(values) for _ in rules] for _ in range(rows)]
    scores = [BoundScore(f"r{i}", weight, mode, lambda n: 0) for i, (mode, weight) in enumerate(rules)]
    vectors = [(*row, sum(w * v for (m, w), v in zip(rules, row, strict=True) if m == "none")) for row in raw]
    per_rule: list = []
    totals = weighted_totals(scores, score_matrix(vectors), per_rule)
    expected_rules = [normalize(mode, [row[i] for row in raw]) for i, (mode, _) in enumerate(rules)]
    assert [[int(v) for v in column] for column in per_rule] == expected_rules
    expected = [sum(w * expected_rules[i][r] for i, (_, w) in enumerate(rules)) for r in range(rows)]
    assert [int(t) for t in totals] == expected
