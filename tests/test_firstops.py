"""The graph's first-op index (:class:`ppir.ir.firstops.FirstOps`) is the dict that
``setdefault`` over the ops in order gives: the same keys, in the same order, the same first
op for each, out-of-range stages and microbatches and duplicates included, with the flat array
and without it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ppir.ir import Action, OpKind
from ppir.ir.firstops import FirstOps

actions = st.builds(Action, st.integers(-2, 5), st.sampled_from(list(OpKind)), st.integers(-2, 6))


def _reference(chunks) -> dict:
    out: dict = {}
    o = 0
    for chunk in chunks:
        for a in chunk:
            out.setdefault((a.stage, a.kind, a.mb), o)
            o += 1
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(actions, max_size=12), max_size=4), st.booleans())
def test_first_ops_is_setdefault_in_op_order(chunks, dense):
    ops = [a for chunk in chunks for a in chunk]
    first = FirstOps(ops, 4, 5, 10**6 if dense else 0)
    assert (first._dense is not None) == dense
    base = 0
    for chunk in chunks:
        first.add(chunk, base)
        base += len(chunk)
    ref = _reference(chunks)
    assert dict(first.items()) == ref and list(first) == list(ref) and len(first) == len(ref)
    for a in ops:
        key = (a.stage, a.kind, a.mb)
        assert first.op(*key) == first[key] == first.get(key) == ref[key]
    missing = (0, OpKind.F, 4)
    if missing not in ref:
        assert first.op(*missing) is None and first.get(missing, -7) == -7
        assert missing not in first


def test_the_flat_array_is_used_only_when_small():
    assert FirstOps([], 128, 512, 391_168)._dense is not None
    assert FirstOps([], 4, 10**6, 10)._dense is None  # a huge M with a handful of ops
