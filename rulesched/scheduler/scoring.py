"""Score normalisation, the ways kube-scheduler's score plugins normalise, and host selection.

Scores are int64 in kube-scheduler, so the arithmetic here is integer arithmetic that truncates
toward zero as Go's does.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.lang import BoundScore
from rulesched.scheduler.framework import MAX_NODE_SCORE

Column = npt.NDArray[np.int64]


def _div(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def normalize(mode: str, scores: Sequence[int]) -> list[int]:
    if mode == "none" or not scores:
        return list(scores)
    if mode in ("max", "reverse"):  # helper.DefaultNormalizeScore
        reverse = mode == "reverse"
        top = max(0, max(scores))
        if top == 0:
            return [MAX_NODE_SCORE if reverse else s for s in scores]
        out = [_div(MAX_NODE_SCORE * s, top) for s in scores]
        return [MAX_NODE_SCORE - s for s in out] if reverse else out
    if mode == "minmax":  # InterPodAffinity.NormalizeScore
        low, high = min(scores), max(scores)
        if high == low:
            return [0] * len(scores)
        return [int(MAX_NODE_SCORE * ((s - low) / (high - low))) for s in scores]
    if mode == "spread":  # PodTopologySpread.NormalizeScore; negative marks an ignored node
        valid = [s for s in scores if s >= 0]
        if not valid:
            return [0] * len(scores)
        low, high = min(valid), max(valid)
        if high == 0:
            return [0 if s < 0 else MAX_NODE_SCORE for s in scores]
        return [0 if s < 0 else _div(MAX_NODE_SCORE * (high + low - s), high) for s in scores]
    raise ValueError(f"unknown normalization {mode!r}")  # the checker admits only the above


def normalize_constant(mode: str, value: int) -> int:
    """What :func:`normalize` makes of a column whose values all equal ``value``."""
    if mode == "max":
        return MAX_NODE_SCORE if value > 0 else value
    if mode == "reverse":
        return 0 if value > 0 else MAX_NODE_SCORE
    if mode == "minmax":
        return 0
    if mode == "spread":
        return 0 if value < 0 else MAX_NODE_SCORE
    return value


def _div_array(a: Column, b: int) -> Column:
    """:func:`_div` over an array, for b > 0."""
    q = np.abs(a) // b
    return np.where(a >= 0, q, -q)


def normalize_array(mode: str, scores: Column) -> Column:
    """:func:`normalize` over a non-empty int64 array, value for value the same."""
    if mode == "none":
        return scores
    if mode in ("max", "reverse"):
        top = max(0, int(scores.max()))
        if top == 0:
            return np.full_like(scores, MAX_NODE_SCORE) if mode == "reverse" else scores
        out = _div_array(MAX_NODE_SCORE * scores, top)
        return MAX_NODE_SCORE - out if mode == "reverse" else out
    if mode == "minmax":
        low, high = int(scores.min()), int(scores.max())
        if high == low:
            return np.zeros_like(scores)
        # The same float operations in the same order as the list version, then truncation.
        return (MAX_NODE_SCORE * ((scores - low) / (high - low))).astype(np.int64)
    if mode == "spread":
        valid = scores >= 0
        if not valid.any():
            return np.zeros_like(scores)
        low, high = int(scores[valid].min()), int(scores[valid].max())
        if high == 0:
            return np.where(valid, MAX_NODE_SCORE, 0)
        return np.where(valid, _div_array(MAX_NODE_SCORE * (high + low - scores), high), 0)
    raise ValueError(f"unknown normalization {mode!r}")


Matrix = npt.NDArray[Any]  # rows x (score rules + 1): raw scores, then the fixed sum
_EXACT = 2**62 // 1000  # int64 normalisation of values within this bound cannot overflow


def score_matrix(vectors: Sequence[Sequence[int]]) -> Matrix:
    """Score vectors as a matrix for :func:`weighted_totals`: int64 where every value fits, else
    Python ints (an object array: the same operations, without overflow)."""
    try:
        return np.array(vectors, dtype=np.int64)
    except OverflowError:
        return np.array(vectors, dtype=object)


def weighted_totals(
    scores: Sequence[BoundScore], matrix: Matrix, per_rule: list[Matrix] | None = None, ranking_only: bool = False
) -> Matrix:
    """The one scoring function (cycles, explain and the extender all total with it): each
    score rule's column normalised as the rule says, times its weight, plus the fixed sum of the
    rules that are not normalised (the last column). With ``per_rule``, each rule's normalised
    column is appended to it, in rule order. ``ranking_only`` leaves out what adds the same to
    every node (a column of equal values), for a caller that only picks the highest."""
    totals = matrix[:, -1].copy()
    offset = 0  # the constant columns' share, added once
    for index, s in enumerate(scores):
        column = matrix[:, index]
        if s.normalize == "none":
            if per_rule is not None:
                per_rule.append(column)
            continue
        low, high = column.min(), column.max()
        if low == high:  # normalises to one number: it cannot change the pick, only the totals
            if ranking_only:
                continue
            low = int(low)
            value = normalize_constant(s.normalize, low)
            offset += s.weight * value
            if per_rule is not None:
                per_rule.append(np.full(len(column), value, dtype=matrix.dtype))
            continue
        if (high > _EXACT or low < -_EXACT) and column.dtype != object:
            # normalising multiplies by up to 300: go on in Python ints rather than wrap around
            column, totals = column.astype(object), totals.astype(object)
        normalized = normalize_array(s.normalize, column)
        totals += s.weight * normalized
        if per_rule is not None:
            per_rule.append(normalized)
    if offset:
        totals += offset
    return totals


def select_host(totals: Matrix, rng: random.Random) -> int:
    """Index of the highest total; ties broken uniformly at random, as kube-scheduler's
    selectHost does (it samples a reservoir; one draw among the ties is the same distribution),
    reproducibly for a seeded generator."""
    ties = np.flatnonzero(totals == totals.max())
    return int(ties[0]) if len(ties) == 1 else int(ties[rng.randrange(len(ties))])
