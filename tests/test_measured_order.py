"""An op's cost by where its input was made (ppir.analysis.measured_order): the profile's
positions (ppir.profile.samples.position, ppir.profile.summary.by_position), the cost file's
F_near .. I_far lists, how merged stages add them up, and which a schedule's stage takes."""

from __future__ import annotations

from dataclasses import replace

import pytest
import tomllib

from ppir.analysis.config import make_config
from ppir.analysis.costs import costs_for
from ppir.analysis.measured import MeasuredCosts, from_table
from ppir.analysis.measured_order import ORDER_KEYS, fit_order
from ppir.diagnostics import PpirError
from ppir.frontend.loader import load_schedule
from ppir.profile.samples import position
from ppir.profile.summary import by_position

# 4 pieces; near and far differ per piece so that every sum below names its terms
ORDER = {
    "F_near": (1.0, 2.0, 3.0, 4.0),
    "F_far": (10.0, 20.0, 30.0, 40.0),
    "B_near": (100.0, 200.0, 300.0, 400.0),
    "B_far": (1000.0, 2000.0, 3000.0, 4000.0),
    "I_near": (5.0, 6.0, 7.0, 8.0),
    "I_far": (50.0, 60.0, 70.0, 80.0),
}


def _measured(order=ORDER, stages=4) -> MeasuredCosts:
    t = (1e-3,) * stages
    return MeasuredCosts(stages, t, (2e-3,) * stages, t, t, 0.0, order=tuple(order.items()))


def test_the_position_of_an_op_is_where_its_input_was_made():
    # F: the first piece on a rank receives its input from another rank (or the data)
    assert [position("F", j, 3) for j in range(3)] == ["far", "near", "near"]
    # B and I: the last piece on a rank receives its gradient (or starts from the loss)
    assert [position("B", j, 3) for j in range(3)] == ["near", "near", "far"]
    assert [position("I", j, 3) for j in range(3)] == ["near", "near", "far"]
    assert position("W", 0, 3) is None


def test_the_profile_pools_positions_from_its_orders():
    """1F1B's chain gave near F of piece 1 and far F of piece 0; a further order adds far F
    of piece 1; the first F and last B and I have no near position (their far times)."""
    pieces = [{k: [] for k in ORDER_KEYS} for _ in range(2)]
    pieces[0].update(F_far=[1.0, 1.0], B_near=[2.0], I_near=[3.0])
    pieces[1].update(F_near=[4.0], B_far=[5.0], I_far=[6.0])
    assert by_position(pieces, []) == ()  # piece 1's far F and piece 0's far B, I: not timed
    shifted = [(1, {"F_far": [7.0, 9.0]}), (0, {"B_far": [8.0], "I_far": [9.0]})]
    got = dict(by_position(pieces, shifted))
    assert got["F_near"] == (1.0, 4.0) and got["F_far"] == (1.0, 8.0)
    assert got["B_near"] == (2.0, 5.0) and got["B_far"] == (8.0, 5.0)
    assert got["I_near"] == (3.0, 6.0) and got["I_far"] == (9.0, 6.0)


def test_merged_stages_add_their_inner_pieces_near_times():
    got = dict(fit_order(tuple(ORDER.items()), 2, 2))
    # F enters a stage at its first piece; the second runs right after it
    assert got["F_far"] == (10.0 + 2.0, 30.0 + 4.0) and got["F_near"] == (1.0 + 2.0, 3.0 + 4.0)
    # B enters at the last piece; the first runs right after it
    assert got["B_far"] == (2000.0 + 100.0, 4000.0 + 300.0)
    assert got["B_near"] == (200.0 + 100.0, 400.0 + 300.0)
    # stage 0's input needs no gradient: its I is piece 0's (MeasuredCosts.fit)
    assert got["I_far"] == (50.0, 80.0 + 7.0) and got["I_near"] == (5.0, 8.0 + 7.0)
    assert dict(_measured().fit(2).order) == got


def test_the_lists_round_trip_and_come_all_six_or_none():
    m = _measured()
    table = tomllib.loads(m.to_toml())["measured"]
    assert from_table(table, "c.toml").order == m.order
    del table["I_far"], table["B_near"]
    with pytest.raises(PpirError, match="c.toml: .* lacks B_near, I_far"):
        from_table(table, "c.toml")


def _table(m: MeasuredCosts) -> dict:
    return {"measured": tomllib.loads(m.to_toml())["measured"]}


@pytest.mark.parametrize(
    "name, params, far",
    [
        # every stage on its own rank: far everywhere (the first F and last B, I: no input)
        ("1f1b", {"P": 2}, [{"F", "B", "I"}, {"F", "B", "I"}]),
        # the looped placement: every boundary crosses ranks
        ("interleaved_1f1b", {"P": 2, "v": 2}, [{"F", "B", "I"}] * 4),
        # a V: stages 1 and 2 share rank 1, so F of 2 and B, I of 1 are near
        ("zbv", {"P": 2}, [{"F", "B", "I"}, {"F"}, {"B", "I"}, {"F", "B", "I"}]),
        # one rank holds both stages
        ("interleaved_1f1b", {"P": 1, "v": 2}, [{"F"}, {"B", "I"}]),
    ],
)
def test_a_stage_costs_the_near_time_where_its_input_is_made_on_its_rank(name, params, far):
    from ppir.ir import OpKind

    s = load_schedule(name, {"M": 4, **params})
    m = _measured({k: tuple(v[: s.stages]) for k, v in ORDER.items()}, s.stages)
    costs = costs_for(s, make_config(_table(m)))
    t = dict(m.order)
    for st, row in enumerate(costs.op):
        for kind in ("F", "B", "I"):
            where = "far" if kind in far[st] else "near"
            assert row[OpKind(kind)] == t[f"{kind}_{where}"][st], (st, kind)
        assert row[OpKind.W] == m.W[st]  # W: as profiled


def test_a_step_is_timed_with_the_times_its_stages_take():
    """The same measurement with near times a tenth of the far ones: interleaved 1F1B (every
    input from another rank) does not change, a V (its fold on one rank) gets faster."""
    from ppir.analysis.estimate import estimate

    def step(name, cut):
        s = load_schedule(name, {"P": 2, "M": 4})
        order = {k: tuple(x * (cut if "near" in k else 1) for x in v) for k, v in ORDER.items()}
        return estimate(s, make_config(_table(_measured(order))), memory=False).step_time

    assert step("interleaved_1f1b", 0.1) == step("interleaved_1f1b", 1)
    assert step("zbv", 0.1) < step("zbv", 1)


def test_the_profile_summary_prints_both_positions():
    from ppir.cli.profile import summary

    out = summary(_measured())
    head, row0 = out.splitlines()[-5:-3]
    assert head.split() == [
        "stage", "F", "near", "ms", "F", "far", "ms", "B", "near", "ms", "B", "far", "ms",
        "I", "near", "ms", "I", "far", "ms",
    ]  # fmt: skip
    # seconds in the file, milliseconds printed: piece 0's near and far F, B, I
    assert row0.split() == ["0", "1000.000", "10000.000", "100000.000", "1000000.000",
                            "5000.000", "50000.000"]  # fmt: skip
    assert "by where the input is made" in out
    assert "near" not in summary(_measured({}))


def test_where_ranks_share_processors_each_position_takes_its_own_share():
    """The further orders ran their ranks unlike 1F1B, so their ops had a processor for other
    parts of their time: each position's times count its own share, W and 1F1B's its piece's."""
    shares = {"near_share": (0.5, 0.5, 0.5, 0.5), "far_share": (0.25, 0.25, 0.25, 0.25)}
    m = _measured({**ORDER, **shares})
    m = replace(m, processor_share=(1.0, 0.8, 0.8, 0.8))
    got = m.op_times(4, 2)  # 4 ranks on 2 processors
    t = dict(got.order)
    assert t["F_near"] == (0.5, 1.0, 1.5, 2.0) and t["F_far"] == (2.5, 5.0, 7.5, 10.0)
    assert got.W == (1e-3, 8e-4, 8e-4, 8e-4) and "near_share" not in t
    assert m.op_times(2, 2) is m  # a processor per rank: the wall times
    # without position shares, the piece's
    plain = dict(replace(_measured(), processor_share=(0.5,) * 4).op_times(4, 2).order)
    assert plain["B_far"] == (500.0, 1000.0, 1500.0, 2000.0)
    # the file keeps them, and checks them
    table = tomllib.loads(_measured({**ORDER, **shares}).to_toml())["measured"]
    assert dict(from_table(table, "c.toml").order)["far_share"] == (0.25,) * 4
    table["far_share"] = [0.25, 0.25, 1.5, 0.25]
    with pytest.raises(
        PpirError, match="far_share must be fractions in .0, 1., got 1.5 at index 2"
    ):
        from_table(table, "c.toml")


def test_the_profile_pools_processor_time_by_position():
    pieces = [{k: [1.0] for k in ORDER_KEYS} for _ in range(2)]
    pieces[0].update(near_cpu=1.0, near_wall=2.0, far_cpu=3.0, far_wall=4.0)
    orders = [(0, {"near_cpu": 1.0, "near_wall": 2.0}), (1, {"far_cpu": 1.0, "far_wall": 1.0})]
    got = dict(by_position(pieces, orders, shares=True))
    assert got["near_share"] == (0.5, 1.0) and got["far_share"] == (0.75, 1.0)
    assert "near_share" not in dict(by_position(pieces, orders))


def test_the_profile_runs_its_further_orders_where_they_can_run():
    from ppir.profile.orders import ORDERS, cuts, orders

    assert orders(2, 4, 4) == ORDERS
    assert orders(1, 4, 4) == () and orders(2, 2, 4) == ()  # one rank; one piece per rank
    assert orders(2, 4, 3) == ()  # interleaved 1F1B refuses M=3 on 2 ranks (Megatron's rule)
    assert cuts("looped", 2, 4) == [0, 1, 2, 3, 4]  # every piece a stage (round-robin)
    assert cuts("shifted", 3, 6) == [0, 1, 3, 6]  # 1F1B's cuts [0, 2, 4, 6] a piece earlier


def test_the_assumptions_line_says_the_ops_are_timed_by_where_their_input_is_made():
    said = "F, B and I at their times with the input made on the rank or received"
    assert said in make_config(_table(_measured())).describe(ranks=2)
    assert said not in make_config(_table(_measured({}))).describe(ranks=2)
