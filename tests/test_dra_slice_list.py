"""The slices as a list for each pod's allocator, kept in the store's memo
(rulesched.semantics.dra_pod._slice_list): the same list while no slice changes, a new one with
the change as soon as one does, whether the store changed its slices in place or copied them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rulesched.semantics.dra_pod import _slice_list
from rulesched.simulate.load import load_cluster
from tests.helpers.dra_files import GPU_CLASS, gpus, node, write


def test_the_list_follows_the_slices(tmp_path: Path) -> None:
    items = [node("n1"), node("n2"), GPU_CLASS, gpus("n1", 2), gpus("n2", 2)]
    store = load_cluster([write(tmp_path, items)]).store()
    dra = store.dra

    def listed() -> list[object]:
        return _slice_list(dra.memo, dra.pools, dra.state.slices)

    first = listed()
    assert first == list(dra.state.slices.values())
    assert listed() is first  # (kept: no slice changed)
    for held in (False, True):  # (in place, then with a snapshot holding the slices: copied)
        snapshot = store.snapshot() if held else None
        key = sorted(dra.state.slices)[0]
        changed = dataclasses.replace(dra.state.slices[key], generation=dra.state.slices[key].generation + 1)
        dra.put("slices", key, changed)
        now = listed()
        assert changed in now and now == list(dra.state.slices.values())
        assert listed() is now
        del snapshot
    dra.put("slices", key, None)
    assert listed() == list(dra.state.slices.values()) and len(listed()) == 1


def test_without_the_store_a_list_is_made() -> None:
    slices = {"a": object()}
    assert _slice_list(None, None, slices) == [slices["a"]]  # type: ignore[arg-type]
    assert _slice_list({}, None, slices) is not _slice_list({}, None, slices)  # type: ignore[arg-type]
