"""Measured costs ([measured] in a cost file): reading, fitting to a schedule, timing with them."""

from __future__ import annotations

import pytest

import ppir
from ppir import load_schedule, lower
from ppir.analysis.config import load_config_file, make_config
from ppir.analysis.estimate import estimate
from ppir.analysis.measured import MeasuredCosts, from_table
from ppir.diagnostics import EXIT_USAGE, PpirError
from ppir.profile.samples import processor_share

TABLE = {
    "stages": 4,
    "F": [1e-3, 2e-3, 2e-3, 3e-3],
    "B": [2e-3, 4e-3, 4e-3, 6e-3],
    "I": [0.0, 2e-3, 2e-3, 3e-3],
    "W": [2e-3, 2e-3, 2e-3, 3e-3],
    "FB": [3e-3, 6e-3, 6e-3, 9e-3],
    "transfer": 1e-4,
    "message_bytes": [1024, 1024, 2048],
    "activation_bytes": [10, 20, 20, 30],
    "param_bytes": [5, 5, 5, 6],
    "ranks": 2,
    "schedule": "1f1b",
}


def test_round_trip_through_toml_text(tmp_path):
    m = from_table(TABLE, "t")
    text = m.to_toml("a comment\nover two lines")
    assert text.startswith("# a comment\n# over two lines\n[measured]\n")
    path = tmp_path / "costs.toml"
    path.write_text(text)
    assert from_table(load_config_file(str(path))["measured"], "t") == m


def test_fit_sums_consecutive_stages():
    m = from_table(TABLE, "t").fit(2)
    assert m.stages == 2
    assert m.F == pytest.approx((3e-3, 5e-3)) and m.I == pytest.approx((0.0, 5e-3))
    # stage 0's input needs no gradient: its I is empty, its W the whole backward
    assert m.W == pytest.approx((2e-3 + 4e-3, 5e-3))
    assert m.message_bytes == (1024.0,)  # the boundary between measured stages 1 and 2
    assert m.activation_bytes == (30.0, 50.0)
    with pytest.raises(PpirError) as e:
        from_table(TABLE, "t").fit(3)
    text = e.value.render()
    assert "measured costs are for 4 stages; a schedule with 3 stages cannot use them" in text
    assert "schedules with 1, 2, 4 stages can; or profile again with --stages 12" in text
    # one measured stage: said in the singular (was '1 stages' three times)
    one = {**{k: v[:1] for k, v in TABLE.items() if isinstance(v, list)}, "stages": 1}
    with pytest.raises(PpirError) as e:
        from_table({**TABLE, **one, "message_bytes": []}, "t").fit(2)
    text = e.value.render()
    assert "the measured costs are for 1 stage; a schedule with 2 stages cannot" in text
    assert "schedules with 1 stage can;" in text
    cfg = make_config({"measured": {**TABLE, **one, "message_bytes": []}}, "c.toml")
    assert "costs measured on 1 stage (" in cfg.describe()


@pytest.mark.parametrize(
    "change,needle",
    [
        ({"F": [1, 2]}, "measured.F must be a list of 4 non-negative finite numbers, got 2"),
        (
            {"B": [1, 2, -3, 4]},
            "measured.B must be a list of 4 non-negative finite numbers, got -3 at index 2",
        ),
        (
            {"W": [1, 2, float("inf"), 4]},
            "measured.W must be a list of 4 non-negative finite numbers, got inf at index 2",
        ),
        (
            {"I": "fast"},
            "measured.I must be a list of 4 non-negative finite numbers, got str 'fast'",
        ),
        ({"stages": 0}, "measured.stages must be a positive integer"),
        ({"transfer": "fast"}, "measured.transfer must be seconds >= 0"),
        ({"Ff": [1, 2, 3, 4]}, "unknown key 'Ff' in [measured]"),
        ({"message_bytes": [1]}, "message_bytes must be a list of 3"),
    ],
)
def test_bad_tables_name_the_key(change, needle):
    with pytest.raises(PpirError) as e:
        make_config({"measured": {**TABLE, **change}}, "costs.toml")
    assert e.value.exit_code == EXIT_USAGE
    assert needle in e.value.render() and "costs.toml" in e.value.render()


def test_missing_kind_and_clashing_settings():
    table = {k: v for k, v in TABLE.items() if k != "W"}
    with pytest.raises(PpirError, match=r"lacks W"):
        make_config({"measured": table})
    with pytest.raises(PpirError) as e:
        make_config({"measured": TABLE, "costs": {"B": 3}, "comm": {"latency": 1}})
    assert "costs.B, comm.latency cannot be combined with [measured]" in e.value.render()


def test_estimates_use_the_measured_seconds():
    cfg = make_config({"measured": TABLE})
    assert cfg.time_unit == "s" and "costs measured on 4 stages" in cfg.describe()
    s = lower(load_schedule("1f1b", {"P": 2, "M": 4}))  # lockstep groups, timed as written
    e = estimate(s, cfg, memory=False)
    durations = {(o.action.stage, o.action.kind.value): o.end - o.start for o in e.ops[1]}
    assert durations[(1, "F")] == pytest.approx(5e-3) and durations[(1, "B")] == pytest.approx(1e-2)
    assert all(m.end - m.start == pytest.approx(1e-4) for m in e.messages)
    # 1F1B, P=2: rank 0's first forward, then rank 1's M (F + B) and its six message groups
    # (each waited for: fifo progress), then rank 0's last backward
    assert e.step_time == pytest.approx(3e-3 + 6 * 1e-4 + 4 * 15e-3 + 6e-3, rel=1e-9)
    zb = estimate(load_schedule("zbv", {"P": 2, "M": 4}), cfg, memory=False)
    i_op = next(o for o in zb.ops[0] if o.action.kind.value == "I" and o.action.stage == 0)
    assert i_op.end == i_op.start  # stage 0 needs no input gradient: its I was measured free


def test_a_stage_of_a_second_pipeline_costs_the_model_stage_it_runs():
    """Bidirectional DualPipe's 2P stages are two copies of a P-stage model: with a
    measurement of the model in P pieces, each stage costs the piece it runs (stage j of each
    pipeline), as with the textbook costs of a rank share; not half of it, as if its 2P stages
    split one model."""
    from ppir.pipeline import compile

    piece = {"F": [1.0] * 2, "B": [2.0] * 2, "I": [1.0] * 2, "W": [1.0] * 2, "transfer": 0.0}
    cfg = make_config({"measured": {"stages": 2, **piece}})
    for name in ("dualpipe", "1f1b"):
        s = load_schedule(name, {"P": 2, "M": 8})
        assert compile(s, costs=cfg).step_time == compile(s).step_time  # 1 unit = 1 s here
    dual = load_schedule("dualpipe", {"P": 2, "M": 8})
    with pytest.raises(PpirError) as e:  # 3 pieces do not fit the 2 stages of each pipeline
        compile(dual, costs=make_config({"measured": {"stages": 3, **_three(piece)}}))
    text = e.value.render()
    assert "a schedule with 4 stages (2 pipelines of 2) cannot use them" in text
    assert (
        "schedules whose pipelines have 1, 3 stages can; or profile again with --stages 6" in text
    )


def _three(table: dict) -> dict:
    return {k: v + v[:1] if isinstance(v, list) else v for k, v in table.items()}


def test_overlap_ratio_from_measured_fb():
    table = {**TABLE, "FB": [1.5e-3, 3e-3, 3e-3, 4.5e-3]}  # half of F + B
    s = load_schedule("dualpipev", {"P": 2, "M": 4})
    fast = estimate(s, make_config({"measured": table}), memory=False)
    slow = estimate(s, make_config({"measured": TABLE}), memory=False)
    assert fast.step_time < slow.step_time


def test_cost_file_on_the_command_line(tmp_path, cli):
    path = tmp_path / "costs.toml"
    path.write_text(MeasuredCosts(**_kw()).to_toml("test"))
    cfg = make_config(load_config_file(str(path)), str(path))
    assert cfg.measured.stages == 2
    code, out, err = cli("compile", "1f1b", "-D", "P=2", "--backend", "cost", "--config", str(path))
    assert code == 0, err
    assert "costs measured on 2 stages" in out and " ms" in out
    code, _, err = cli("compile", "1f1b", "-D", "P=4", "--backend", "cost", "--config", str(path))
    assert code == 2 and "measured costs are for 2 stages" in err


def test_a_step_of_other_microbatches_than_the_profiles_says_what_batch_it_times(tmp_path, cli):
    """The costs are the profiled microbatch's (4 samples): -D M=8 times a batch of 32 samples,
    not the profile's 16 split 8 ways as 'ppir launch -D M=8' runs the same module (a new
    user's trial: predicted 106.5 ms, launched 72.6, and nothing said why)."""
    path = tmp_path / "costs.toml"
    info = {"ranks": 2, "microbatches": 4, "microbatch_size": 4, "device": "cpu"}
    path.write_text(MeasuredCosts(**_kw(), info=tuple(info.items())).to_toml("test"))

    def note(M):
        code, out, err = cli(
            "compile", "1f1b", "-D", "P=2", "-D", f"M={M}", "--backend", "cost", "--config",
            str(path),
        )  # fmt: skip
        assert code == 0, err
        return [line for line in out.splitlines() if line.startswith("note: the measured")]

    assert note(8) == [
        "note: the measured costs time the profile's microbatch of 4 samples: a step of 8 is 32 "
        "samples, where the profile's batch was 16 in 4; for 8 microbatches of that batch, "
        "profile again with --microbatches 8"
    ]
    assert note(6)[0].endswith("a step of 6 is 24 samples, where the profile's batch was 16 in 4")
    assert note(4) == []  # the profile's own count: its batch


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--cost", "F=1,B=2"], "--cost"),
        (["--comm-latency", "0.5", "--hardware", "A100"], "--hardware, --comm-latency"),
        (["--stage-weights", "1,2"], "--stage-weights"),
        (["--comm-latency-us", "5"], "--comm-latency-us"),  # not 'microseconds need a model'
    ],
)
def test_flags_that_give_times_name_themselves_not_the_cost_file(tmp_path, cli, flags, named):
    path = tmp_path / "costs.toml"
    path.write_text(MeasuredCosts(**_kw()).to_toml("test"))
    argv = ["compile", "1f1b", "-D", "P=2", "--backend", "cost", "--config", str(path), *flags]
    code, _, err = cli(*argv)
    assert code == 2 and err.splitlines()[0] == (
        f"ppir: error: {named} cannot be combined with --config {path}: its [measured] table "
        "gives every op and message time"
    ), err
    code, _, err = cli(*argv[:8], "--free-comm")  # free links are no time: still accepted
    assert code == 0, err


def test_the_assumptions_line_gives_seconds_in_ms_and_us(tmp_path):
    info = (("ranks", 2), ("transfer_isolated", 0.00075596))
    path = tmp_path / "costs.toml"
    path.write_text(MeasuredCosts(**_kw(), info=info).to_toml("test"))
    line = make_config(load_config_file(str(path)), str(path)).describe()
    assert "ranks 2, transfer_isolated 756 us)" in line, line
    assert "; a message between ranks 200 us (measured in the run)" in line, line  # 2e-4 s
    assert "e-0" not in line  # no float in seconds, as it was (3.0952e-05)


def _kw():
    return dict(
        stages=2, F=(1e-3, 1e-3), B=(2e-3, 2e-3), I=(0.0, 1e-3), W=(2e-3, 1e-3), transfer=2e-4
    )


POSTED = """ranks 2
stages 2
microbatches 1
rank 0: 0F0 post[0SEND_F0] wait[0SEND_F0] [0RECV_B0] 0B0
rank 1: [1RECV_F0] 1F0 1B0 [1SEND_B0]
"""
TWO = {"stages": 2, "F": [1e-3, 1e-3], "B": [2e-3, 2e-3], "I": [0, 0], "W": [0, 0]}


def test_posting_a_group_takes_the_measured_post_time(tmp_path):
    """A post lasts ``post``: the rank goes on, and the group's transfers start, once it is
    done.  By hand: rank 0's F (1 ms) and post (0.5), the transfer (0.1), rank 1's F and B
    (1 + 2), its post (0.5), the transfer back (0.1), rank 0's B (2): 7.2 ms; 6.2 without."""
    path = tmp_path / "posted.pps"
    path.write_text(POSTED)
    s = load_schedule(str(path))
    posted = make_config({"measured": {**TWO, "transfer": 1e-4, "post": 5e-4}})
    assert "posting a group 0.5 ms" in posted.describe()
    assert estimate(s, posted, memory=False).step_time == pytest.approx(7.2e-3, rel=1e-12)
    free = make_config({"measured": {**TWO, "transfer": 1e-4}})
    assert estimate(s, free, memory=False).step_time == pytest.approx(6.2e-3, rel=1e-12)
    # free communication frees the posts too
    both_free = make_config(
        {"measured": {**TWO, "transfer": 1e-4, "post": 5e-4}, "comm": {"free": True}}
    )
    assert estimate(s, both_free, memory=False).step_time == pytest.approx(6.0e-3, rel=1e-12)
    # the relaxed model times per-peer parts of groups: posting is not charged there
    relaxed = estimate(s, posted, memory=False, progress="relaxed")
    assert relaxed.step_time == pytest.approx(6.2e-3, rel=1e-12)


def test_a_measured_transfer_of_zero_keeps_the_measured_posts(tmp_path):
    """A profile whose messages completed while their posts ran measures ``transfer = 0``;
    its posts still cost what was measured (7.2 ms less the two transfers of 0.1): the
    estimate charged them only while the transfer was positive, and printed "free
    communication" for this file (tune then ranked interleaved 1F1B, whose steps post the
    most groups, ahead of 1F1B on a model where it ran 3x slower)."""
    path = tmp_path / "posted.pps"
    path.write_text(POSTED)
    s = load_schedule(str(path))
    zero = make_config({"measured": {**TWO, "transfer": 0.0, "post": 5e-4}})
    assert "posting a group 0.5 ms" in zero.describe()
    assert "free communication" not in zero.describe()
    assert estimate(s, zero, memory=False).step_time == pytest.approx(7.0e-3, rel=1e-12)
    free = make_config({"measured": {**TWO, "transfer": 0.0, "post": 5e-4}, "comm": {"free": True}})
    assert "free communication" in free.describe() and "posting" not in free.describe()
    assert estimate(s, free, memory=False).step_time == pytest.approx(6.0e-3, rel=1e-12)


def test_a_post_costs_its_wall_time_with_or_without_a_processor_per_rank(tmp_path):
    """With the posts' wall time measured (0.8 ms against 0.5 of processor time), a rank
    loses the wall time: 7.2 ms of the test above + 2 x 0.3, on a processor of its own or two
    shared.  On fewer processors than ranks the wall time is charged too, as work: the step
    is that of a table whose processor time is 0.8 ms (it was that of the processor time,
    0.5 ms, which came out 10-23 % short of the accuracy bench's steps at 4 ranks on 2 cores,
    docs/cost-model.md)."""
    path = tmp_path / "posted.pps"
    path.write_text(POSTED)
    s = load_schedule(str(path))
    table = {**TWO, "transfer": 1e-4, "post": 5e-4, "post_wall": 8e-4}
    for hw in ({}, {"processors": 2}):
        cfg = make_config({"measured": table, "hardware": hw})
        assert estimate(s, cfg, memory=False).step_time == pytest.approx(7.8e-3, rel=1e-12), hw
    one = {"processors": 1}
    shared = estimate(s, make_config({"measured": table, "hardware": one}), memory=False)
    as_cpu = {**{k: v for k, v in table.items() if k != "post_wall"}, "post": 8e-4}
    cpu_only = {k: v for k, v in table.items() if k != "post_wall"}
    wall = estimate(s, make_config({"measured": as_cpu, "hardware": one}), memory=False)
    cpu = estimate(s, make_config({"measured": cpu_only, "hardware": one}), memory=False)
    assert shared.step_time == wall.step_time > cpu.step_time > 7.2e-3
    m = make_config({"measured": table}).measured
    assert m.post_time() == 8e-4
    assert "posting a group 0.8 ms (its wall time; 0.5 ms of processor time)" in (
        make_config({"measured": table}).describe()
    )
    no_wall = make_config({"measured": {**TWO, "post": 5e-4}})
    assert no_wall.measured.post_time() == 5e-4  # not measured: the processor time
    assert "posting a group 0.5 ms;" in no_wall.describe() + ";"
    assert "wall time" not in no_wall.describe()


@pytest.mark.parametrize("name", ["1f1b", "interleaved_1f1b", "zb_h1", "zbv", "dualpipev"])
def test_post_time_lengthens_a_step_by_at_most_the_posts_on_it(name):
    """Max-plus is monotone: a post time p makes no node earlier, and no later than p times
    the posts before it; every post lasts p and what follows it on its rank starts after."""
    import ppir
    from ppir.ir.graph import POST

    s = ppir.load(name, P=2, M=4)
    measured = {k: (v[: s.stages] if isinstance(v, list) else v) for k, v in TABLE.items()}
    measured = {**measured, "stages": s.stages, "message_bytes": [1024] * (s.stages - 1)}
    base = ppir.compile(s, costs=make_config({"measured": measured}))
    p = 3e-4  # the same program timed with posts (a lowered program is taken as written)
    c = ppir.compile(base.program, costs=make_config({"measured": {**measured, "post": p}}))
    g, tl, tl0 = c.graph, c.timeline, base.timeline
    posts = [v for v in range(g.n) if g.kind[v] == POST]
    assert posts and g.n == base.graph.n
    for v in range(g.n):
        assert tl0.finish[v] <= tl.finish[v] <= tl0.finish[v] + p * len(posts) + 1e-12
    for v in posts:
        assert tl.finish[v] - tl.start[v] == pytest.approx(p)
        assert all(tl.start[w] >= tl.finish[v] for w in g.successors(v))
    assert c.step_time > base.step_time


# -- ops on shared processors: a CPU profile keeps, per piece, the share of its ops' wall time its
# thread had a processor, and ranks that share processors are timed with the processor time
SHARED = {
    **TABLE,
    "W_late": [2e-3, 3e-3, 3e-3, 4e-3],
    "processor_share": [0.5, 0.25, 1.0, 0.5],
}
SCALED = ("F", "B", "I", "W", "W_late", "FB")


def test_shared_processors_take_the_processor_time_of_each_op():
    m = from_table(SHARED, "t")
    work = m.op_times(4, 2)  # four ranks on two processors: the processor time
    for k in SCALED:
        want = [x * f for x, f in zip(SHARED[k], SHARED["processor_share"])]
        assert getattr(work, k) == pytest.approx(want), k
    assert work.processor_share == () and work.transfer == m.transfer
    # a processor per rank, or no processor count: the measured wall times
    assert m.op_times(2, 2) is m and m.op_times(4, None) is m
    # not measured: the wall times whatever the processors
    plain = from_table({k: v for k, v in SHARED.items() if k != "processor_share"}, "t")
    assert plain.op_times(4, 2) is plain


def test_shared_processors_take_the_processor_time_of_a_post_and_the_oversubscription():
    """A post's wall time holds its waits for a processor, which the timeline's sharing models
    itself: charged, it put interleaved 1F1B (twice 1F1B's posts) behind ZB-H1 at 4 ranks on 2
    cores where the measured rounds put it ahead (docs/cost-model.md)."""
    table = {**SHARED, "post": 1e-4, "post_wall": 3e-4, "oversubscription": 1.25}
    m = from_table(table, "t")
    assert m.post_time() == 3e-4  # a processor per rank: the wall time
    work = m.op_times(4, 2)
    assert work.post_time() == pytest.approx(1.25e-4) and work.post_wall == 0.0
    for k in SCALED:
        want = [1.25 * x * f for x, f in zip(SHARED[k], SHARED["processor_share"])]
        assert getattr(work, k) == pytest.approx(want), k
    assert m.op_times(2, 2) is m  # each rank has a processor: nothing is scaled
    assert m.fit(2).oversubscription == 1.25  # merged stages keep it
    assert "oversubscription = 1.25" in m.to_toml()
    assert from_table(table | {"oversubscription": 1}, "t").oversubscription == 1.0
    for bad in (-1, True, "x"):
        with pytest.raises(
            PpirError, match=r"measured.oversubscription must be a factor \(0: none\)"
        ):
            from_table({**table, "oversubscription": bad}, "c.toml")


def test_merged_stages_weigh_their_pieces_shares_by_their_time():
    m = from_table(SHARED, "t").fit(2)
    # stage 0: pieces 0 (F + B = 3 ms, share 0.5) and 1 (6 ms, 0.25); stage 1: 6 ms at 1.0
    # and 9 ms at 0.5
    assert m.processor_share == pytest.approx(((1.5 + 1.5) / 9, (6 + 4.5) / 15))
    assert from_table(SHARED, "t").fit(4).processor_share == tuple(SHARED["processor_share"])


def test_the_share_round_trips_and_is_checked(tmp_path):
    m = from_table(SHARED, "t")
    path = tmp_path / "c.toml"
    path.write_text(m.to_toml())
    assert "processor_share = [0.5, 0.25, 1.0, 0.5]" in path.read_text()
    assert from_table(load_config_file(str(path))["measured"], "t") == m
    for bad, shown in ((0, "0 at index 1"), (1.5, "1.5 at index 1")):
        table = {**SHARED, "processor_share": [0.5, bad, 1.0, 0.5]}
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
    plain = {k: v for k, v in SHARED.items() if k != "processor_share"}
    work = {
        **plain,
        **{k: [x * f for x, f in zip(SHARED[k], SHARED["processor_share"])] for k in SCALED},
    }

    def step(table, processors):
        cfg = make_config({"measured": table, "hardware": {"processors": processors}})
        return ppir.compile(s, costs=cfg).step_time

    assert step(SHARED, 2) == pytest.approx(step(work, 2), rel=1e-12)
    assert step(SHARED, 2) < step(plain, 2)
    assert step(SHARED, 4) == step(plain, 4)


def test_processor_share_of_a_piece():
    assert processor_share({"cpu": 0.3, "wall": 0.6}) == pytest.approx(0.5)
    assert processor_share({"cpu": 0.7, "wall": 0.6}) == 1.0  # clock granularity: at most 1
    assert processor_share({"cpu": 0.0, "wall": 0.0}) == 1.0  # nothing timed


def test_the_assumptions_line_says_so_where_ranks_share_processors():
    cfg = make_config({"measured": {**SHARED, "processors": 2}}, "c.toml")
    said = (
        "ops and posts where ranks share processors: their processor time (ops 25-100 % of "
        "their measured time)"
    )
    assert said in cfg.describe(ranks=4) and said in cfg.describe()  # no size: it may apply
    assert said in cfg.describe(ranks={2, 4})  # a search with a candidate of 4 ranks
    assert "ops and posts where" not in cfg.describe(ranks=2)  # a processor per rank
    plain = {k: v for k, v in SHARED.items() if k != "processor_share"}
    assert "ops and" not in make_config({"measured": {**plain, "processors": 2}}).describe()
    over = make_config({"measured": {**SHARED, "processors": 2, "oversubscription": 1.2}})
    assert f"{said} x 1.2, what running more ranks than processors cost the profile beyond " in (
        over.describe(ranks=4)
    )


def test_a_measured_link_is_one_message_time_not_eight_ranks_per_node():
    """A cost file's messages all take the time measured in the profile's run; the assumptions
    line said 'comm 8 ranks/node, intra latency 200 us, inter latency 200 us', a node size
    nothing had measured.  It says the one figure, unless ranks_per_node is set."""
    cfg = make_config({"measured": {**_table_kw(), "transfer": 2e-4}})
    text = cfg.describe()
    assert "; a message between ranks 200 us (measured in the run)" in text
    assert "ranks/node" not in text and "intra" not in text
    per_node = make_config(
        {"measured": {**_table_kw(), "transfer": 2e-4}, "hardware": {"ranks_per_node": 2}}
    )
    assert "comm 2 ranks/node, intra latency 200 us, inter latency 200 us" in per_node.describe()


def _table_kw():
    return {"stages": 2, "F": [1e-3, 1e-3], "B": [2e-3, 2e-3], "I": [0, 1e-3], "W": [2e-3, 1e-3]}


def test_posts_measured_by_their_wall_time_alone_are_not_free_communication():
    """A table with post_wall and no processor time charges every post its wall time; with a
    transfer of 0 the assumptions line said 'free communication' all the same."""
    cfg = make_config({"measured": {**_table_kw(), "transfer": 0.0, "post_wall": 3e-4}})
    assert cfg.measured.post_time() == 3e-4
    assert "posting a group 0.3 ms" in cfg.describe()
    assert "free communication" not in cfg.describe()
