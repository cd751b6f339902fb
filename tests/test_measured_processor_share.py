"""Measured op times on shared processors: a CPU profile records, per piece, the share of its
ops' wall time its thread had a processor, and a schedule whose ranks share processors is
timed with the processor time (the timeline's sharing stretches it itself)."""

from __future__ import annotations

import pytest

import ppir
from ppir.analysis.config import load_config_file, make_config
from ppir.analysis.measured import from_table
from ppir.diagnostics import EXIT_USAGE, PpirError
from ppir.profile.samples import processor_share

TABLE = {
    "stages": 4,
    "F": [1e-3, 2e-3, 2e-3, 3e-3],
    "B": [2e-3, 4e-3, 4e-3, 6e-3],
    "I": [0.0, 2e-3, 2e-3, 3e-3],
    "W": [2e-3, 2e-3, 2e-3, 3e-3],
    "W_late": [2e-3, 3e-3, 3e-3, 4e-3],
    "FB": [3e-3, 6e-3, 6e-3, 9e-3],
    "transfer": 1e-4,
    "processor_share": [0.5, 0.25, 1.0, 0.5],
}
SCALED = ("F", "B", "I", "W", "W_late", "FB")


def test_shared_processors_take_the_processor_time_of_each_op():
    m = from_table(TABLE, "t")
    work = m.op_times(4, 2)  # four ranks on two processors: the processor time
    for k in SCALED:
        want = [x * f for x, f in zip(TABLE[k], TABLE["processor_share"])]
        assert getattr(work, k) == pytest.approx(want), k
    assert work.processor_share == () and work.transfer == m.transfer
    # a processor per rank, or no processor count: the measured wall times
    assert m.op_times(2, 2) is m and m.op_times(4, None) is m
    # not measured: the wall times whatever the processors
    plain = from_table({k: v for k, v in TABLE.items() if k != "processor_share"}, "t")
    assert plain.op_times(4, 2) is plain


def test_merged_stages_weigh_their_pieces_shares_by_their_time():
    m = from_table(TABLE, "t").fit(2)
    # stage 0: pieces 0 (F + B = 3 ms, share 0.5) and 1 (6 ms, 0.25); stage 1: 6 ms at 1.0
    # and 9 ms at 0.5
    assert m.processor_share == pytest.approx(((1.5 + 1.5) / 9, (6 + 4.5) / 15))
    assert from_table(TABLE, "t").fit(4).processor_share == tuple(TABLE["processor_share"])


def test_the_share_round_trips_and_is_checked(tmp_path):
    m = from_table(TABLE, "t")
    path = tmp_path / "c.toml"
    path.write_text(m.to_toml())
    assert "processor_share = [0.5, 0.25, 1.0, 0.5]" in path.read_text()
    assert from_table(load_config_file(str(path))["measured"], "t") == m
    for bad, shown in ((0, "0 at index 1"), (1.5, "1.5 at index 1")):
        table = {**TABLE, "processor_share": [0.5, bad, 1.0, 0.5]}
        with pytest.raises(PpirError) as e:
            make_config({"measured": table}, "c.toml")
        assert e.value.exit_code == EXIT_USAGE
        assert f"c.toml: measured.processor_share must be fractions in (0, 1], got {shown}" in (
            e.value.render()
        )


def test_a_schedule_on_shared_processors_is_timed_with_the_processor_time():
    """1F1B on four ranks and two processors: the step with the shares equals the step of the
    table whose times are already the processor times; with four processors, the wall times."""
    s = ppir.load("1f1b", P=4, M=8)
    plain = {k: v for k, v in TABLE.items() if k != "processor_share"}
    work = {
        **plain,
        **{k: [x * f for x, f in zip(TABLE[k], TABLE["processor_share"])] for k in SCALED},
    }

    def step(table, processors):
        cfg = make_config({"measured": table, "hardware": {"processors": processors}})
        return ppir.compile(s, costs=cfg).step_time

    assert step(TABLE, 2) == pytest.approx(step(work, 2), rel=1e-12)
    assert step(TABLE, 2) < step(plain, 2)
    assert step(TABLE, 4) == step(plain, 4)


def test_processor_share_of_a_piece():
    assert processor_share({"cpu": 0.3, "wall": 0.6}) == pytest.approx(0.5)
    assert processor_share({"cpu": 0.7, "wall": 0.6}) == 1.0  # clock granularity: at most 1
    assert processor_share({"cpu": 0.0, "wall": 0.0}) == 1.0  # nothing timed


def test_the_assumptions_line_says_so_where_ranks_share_processors():
    cfg = make_config({"measured": {**TABLE, "processors": 2}}, "c.toml")
    said = "ops where ranks share processors: their processor time, 25-100 % of their measured time"
    assert said in cfg.describe(ranks=4) and said in cfg.describe()  # no size: it may apply
    assert said in cfg.describe(ranks={2, 4})  # a search with a candidate of 4 ranks
    assert "ops where" not in cfg.describe(ranks=2)  # a processor per rank: the wall times
    plain = {k: v for k, v in TABLE.items() if k != "processor_share"}
    assert "ops where" not in make_config({"measured": {**plain, "processors": 2}}).describe()
