"""engine.arrays.unique_codes is np.unique(return_inverse=True) for non-negative codes, counted by a
table instead of sorted (below the table's limit and beyond); kept_failures.first_seen orders the
distinct reasons by their first row."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rulesched.engine.arrays import SMALL_CODES, unique_codes
from rulesched.engine.kept_failures import first_seen

CODES = st.lists(st.one_of(st.integers(0, 5), st.integers(0, SMALL_CODES + 5), st.integers(-3, -1)), max_size=60)


@given(CODES)
def test_unique_codes_is_numpys_unique(values: list[int]) -> None:
    codes = np.array(values, dtype=np.int64)
    distinct, inverse = unique_codes(codes)
    want_distinct, want_inverse = np.unique(codes, return_inverse=True)
    assert distinct.tolist() == want_distinct.tolist()
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()


@given(st.lists(st.integers(0, 6), min_size=1, max_size=60))
def test_first_seen_orders_reasons_by_their_first_row(values: list[int]) -> None:
    codes = np.array(values, dtype=np.int32)
    names = [(f"reason {i}",) for i in range(7)]
    found = first_seen(codes, names)
    order = list(dict.fromkeys(values))  # distinct codes in the order of their first row
    assert found.reasons == [names[c] for c in order]
    assert found.codes.tolist() == [order.index(c) for c in values]
