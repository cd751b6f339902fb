"""overlap-comms: posts early, waits late, never deadlocks, never slower; exact closed forms."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppir.analysis.config import make_config
from ppir.analysis.costs import Costs, costs_for
from ppir.analysis.estimate import estimate
from ppir.analysis.timeline import run
from ppir.frontend.loader import load_schedule, load_text
from ppir.ir import Group, Wait, is_compute_item
from ppir.ir.graph import build_graph
from ppir.ir.printer import format_pps, from_json, to_json
from ppir.passes import LowerComms, OverlapComms
from ppir.pipeline import compile
from ppir.schedules import builtin_names
from ppir.testing import valid_schedules
from ppir.verify import verify


def _groups(s, r):
    return [it.actions for it in s.programs[r] if isinstance(it, Group)]


@settings(max_examples=150)
@given(
    st.one_of(
        [
            valid_schedules(
                P=st.integers(2, 4),
                M=st.integers(1, 5),
                v=st.integers(1, 2),
                placement=how,
                split_backward=None,
            )
            for how in ("looped", "vshape", "random")
        ]
    ),
    st.integers(0, 3),
    st.sampled_from([0, Fraction(1, 4), Fraction(1, 2), 1]),
)
def test_overlap_is_safe_and_never_slower(s, hoist, latency):
    lowered = LowerComms().apply(s)
    out = OverlapComms(hoist=hoist).apply(lowered)
    assert verify(out).ok
    for r in range(s.ranks):
        # same compute items in the same order, same groups in the same posting order
        assert [it for it in out.programs[r] if is_compute_item(it)] == [
            it for it in lowered.programs[r] if is_compute_item(it)
        ]
        assert _groups(out, r) == _groups(lowered, r)
        posted = [it.actions for it in out.programs[r] if isinstance(it, Group)]
        waited = [it.actions for it in out.programs[r] if isinstance(it, Wait)]
        assert sorted(map(str, posted)) == sorted(map(str, waited))
        assert all(it.deferred for it in out.programs[r] if isinstance(it, Group))
    cfg = make_config({"comm": {"latency": float(latency)}})
    assert estimate(out, cfg).step_time <= estimate(lowered, cfg).step_time


@pytest.mark.parametrize(
    "P,M,v",
    [
        (2, 4, 2),
        (2, 8, 4),
        (3, 6, 2),
        (4, 8, 2),
        (4, 16, 4),
        (5, 10, 2),
        (5, 15, 3),
        (8, 16, 2),
        (8, 32, 4),
    ],
)
def test_interleaved_estimate_is_the_closed_form_with_overlap(P, M, v):
    """Under uniform costs and free communication: bubble/ideal = (P-1)/(v*M) exactly, on the
    lowered program that the executor runs (without overlap, P = 2, 5, 8 wait a little)."""
    s = OverlapComms().apply(
        LowerComms().apply(load_schedule("interleaved_1f1b", {"P": P, "M": M, "v": v}))
    )
    e = estimate(s)
    assert e.bubble_fraction_of_ideal == pytest.approx(float(Fraction(P - 1, v * M)), abs=1e-12)
    for rank in e.per_rank:  # (P-1)(F+B)/v with F=1, B=2
        assert rank.idle == pytest.approx(3 * (P - 1) / v, abs=1e-12)


def test_overlapped_ir_prints_reparses_and_round_trips_json(golden):
    s = OverlapComms().apply(LowerComms().apply(load_schedule("1f1b", {"P": 3, "M": 4})))
    text = format_pps(s)
    golden("ir/1f1b_overlap.pps", text)
    assert load_text(text) == s
    assert from_json(to_json(s)) == s
    assert "post[" in text and "wait[" in text


def test_unwaited_and_bad_waits_are_diagnosed():
    s = load_text(
        "ranks 2\nrank 0: 0F0 post[0SEND_F0] [0RECV_B0] 0B0\n"
        "rank 1: [1RECV_F0] 1F0 1B0 [1SEND_B0] wait[1SEND_B0]\n",
        path="<w>",
    )
    kinds = [(d.kind, d.span.line, d.span.col) for d in verify(s).errors]
    assert ("unwaited-group", 2, 13) in kinds and ("bad-wait", 3, 39) in kinds


def test_a_consumer_before_the_wait_misses_its_recv():
    s = load_text(
        "ranks 2\nrank 0: 0F0 post[0SEND_F0] [0RECV_B0] 0B0 wait[0SEND_F0]\n"
        "rank 1: post[1RECV_F0] 1F0 wait[1RECV_F0] 1B0 [1SEND_B0]\n",
        path="<w>",
    )
    assert [d.kind for d in verify(s).errors] == ["missing-recv"]


def test_compile_overlaps_by_default(cli):
    args = [
        "compile",
        "interleaved_1f1b",
        "-D",
        "P=8",
        "-D",
        "M=16",
        "-D",
        "v=2",
        "--backend",
        "cost",
        "--format",
        "json",
    ]
    import json

    code, out, _ = cli(*args)
    code2, out2, _ = cli(*args, "--no-overlap")
    assert code == code2 == 0
    with_overlap, without = json.loads(out), json.loads(out2)
    assert with_overlap["step_time"] == 58.5 and without["step_time"] > 58.5


def _compute(s, r):
    return [it for it in s.programs[r] if is_compute_item(it)]


@st.composite
def _plan_costs(draw, s):
    """Random positive op costs per stage and random transfer times per link (0 allowed)."""
    from ppir.ir import OpKind

    op = tuple(
        {k: draw(st.integers(1, 4)) for k in (OpKind.F, OpKind.B, OpKind.I, OpKind.W)}
        for _ in range(s.stages)
    )
    pairs = tuple(
        ((a, b), draw(st.integers(0, 3))) for a in range(s.ranks) for b in range(s.ranks) if a != b
    )
    return Costs(op, pairs=pairs)


_ANY_SCHEDULE = st.one_of(
    [
        valid_schedules(
            P=st.integers(2, 4),
            M=st.integers(1, 5),
            v=st.integers(1, 2),
            placement=how,
            split_backward=None,
        )
        for how in ("looped", "vshape", "random")
    ]
)


@settings(max_examples=150)
@given(_ANY_SCHEDULE, st.data())
def test_eager_lowering_is_deadlock_free_for_any_plan_costs(s, data):
    """The eager lowering's induction over exchange times holds whatever the planning costs:
    blocking and overlapped, the result verifies and keeps every rank's compute order."""
    costs = data.draw(_plan_costs(s))
    eager = LowerComms("eager", costs=costs).apply(s)
    for out in (eager, OverlapComms(hoist=data.draw(st.integers(0, 2))).apply(eager)):
        assert verify(out).ok
        for r in range(s.ranks):
            assert _compute(out, r) == list(s.compute_items(r))


@settings(max_examples=100)
@given(
    _ANY_SCHEDULE,
    st.sampled_from([0, Fraction(1, 4), Fraction(1, 2), 1]),
    st.sampled_from(["F=1,B=2,I=1,W=1", "F=1,B=1,I=1,W=1", "F=2,B=3,I=2,W=1"]),
)
def test_auto_overlap_is_never_slower_than_blocking_lockstep(s, latency, costs):
    """What 'ppir compile' runs by default (--lowering auto --overlap) is valid, keeps the
    compute order, and is never slower in the estimator than --no-overlap."""
    kinds = dict(part.split("=") for part in costs.split(","))
    cfg = make_config({"comm": {"latency": float(latency)}, "costs": kinds})
    lockstep = LowerComms().apply(s)
    c = compile(s, costs=cfg)
    assert c.ok and verify(c.program).ok
    for r in range(s.ranks):
        assert _compute(c.program, r) == _compute(lockstep, r)
    assert c.step_time <= estimate(lockstep, cfg).step_time
    assert c.step_time >= c.dependency_bound


@pytest.mark.parametrize(
    "name,params",
    [
        ("1f1b", {"P": 4, "M": 8}),
        ("interleaved_1f1b", {"P": 4, "M": 8, "v": 2}),
        ("interleaved_1f1b", {"P": 4, "M": 8, "v": 4}),
        ("interleaved_1f1b", {"P": 8, "M": 16, "v": 2}),
        ("gpipe", {"P": 4, "M": 8}),
        ("zb_h1", {"P": 4, "M": 8}),
    ],
)
@pytest.mark.parametrize("share", [Fraction(1, 4), Fraction(1, 2)])
def test_default_overlap_reaches_the_critical_path(name, params, share):
    """With transfers of 25 % / 50 % of a chunk's forward, the default lowering hides every
    transfer that the compute order does not force onto a dependency chain: the step equals
    the comm-weighted critical path (a lower bound for any lowering of this compute order),
    where blocking lockstep groups are slower."""
    s = load_schedule(name, params)
    cfg = make_config({"comm": {"latency": share * s.ranks / s.stages}})
    lockstep = LowerComms().apply(s)
    best = estimate(s, cfg)  # compiled as 'ppir compile' runs it
    assert best.step_time == best.critical_path == best.dependency_bound
    assert estimate(lockstep, cfg).step_time > best.step_time


def test_compile_plans_overlap_with_the_comm_latency(cli):
    import json

    args = [
        "compile",
        "1f1b",
        "-D",
        "P=4",
        "-D",
        "M=8",
        "--comm-latency",
        "0.25",
        "--format",
        "json",
    ]
    runs = {}
    for extra in ([], ["--lowering", "lockstep"], ["--no-overlap"]):
        code, out, err = cli(*args, *extra)
        assert code == 0, err
        runs[" ".join(extra)] = json.loads(out)
    assert runs[""]["step_time"] == runs[""]["critical_path"]["length"] == 37
    assert runs["--lowering lockstep"]["step_time"] == 37.5
    assert runs["--no-overlap"]["step_time"] == 38


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_overlaps_safely_with_transfer_costs(name):
    """Eager lowering verifies for every built-in (zero-bubble W queues, DualPipeV's
    overlapped F&B steps, V placements), and the default is never slower than blocking."""
    s = load_schedule(name, {"P": 4, "M": 8} | ({"v": 2} if name == "interleaved_vshape" else {}))
    lockstep = LowerComms().apply(s)
    for latency in (Fraction(1, 8), Fraction(1, 2), 1):
        cfg = make_config({"comm": {"latency": latency}})
        assert verify(LowerComms("eager", costs=costs_for(s, cfg)).apply(s)).ok
        c = compile(s, costs=cfg)
        assert c.ok and verify(c.program).ok
        assert c.step_time <= estimate(lockstep, cfg).step_time


def test_overlapped_steps_send_their_outputs_after_the_whole_step():
    """A consumer of an overlapped step's first part is planned after the step's end (both
    lowerings send after the whole step): 2 ranks, placement (0, 1, 1, 0)."""
    from ppir.ir import Action, OpKind, Overlap, Schedule

    F, B = OpKind.F, OpKind.B
    r0 = (
        Action(0, F, 0),
        Action(3, F, 0),
        Overlap((Action(0, F, 1), Action(3, B, 0))),
        Action(3, F, 1),
        Action(3, B, 1),
        Action(0, B, 0),
        Action(0, B, 1),
    )
    r1 = (
        Action(1, F, 0),
        Action(2, F, 0),
        Action(1, F, 1),
        Action(2, B, 0),
        Action(2, F, 1),
        Action(1, B, 0),
        Action(2, B, 1),
        Action(1, B, 1),
    )
    s = Schedule("ovl", (), 2, 4, 2, (0, 1, 1, 0), (r0, r1))
    heavy = Costs(
        tuple({F: 1, B: 100 if st == 3 else 2, OpKind.I: 1, OpKind.W: 1} for st in range(4))
    )
    for strategy in ("lockstep", "eager"):
        for costs in (None, heavy):
            assert verify(LowerComms(strategy, costs=costs).apply(s)).ok, (strategy, costs)


def test_planning_costs_are_positive_and_keep_the_ratios():
    """The eager lowering's proof needs positive durations: an op that costs nothing is planned
    as half a tick, every other cost doubles (the same times, in finer ticks)."""
    from ppir.ir import OpKind

    c = Costs(
        ({OpKind.F: 0, OpKind.B: 2, OpKind.I: 1, OpKind.W: 1},), intra=3, pairs=(((0, 1), 5),)
    )
    p = c.for_planning()
    assert p.op[0] == {OpKind.F: 1, OpKind.B: 4, OpKind.I: 2, OpKind.W: 2}
    assert (p.intra, p.link(0, 1), p.link(1, 0), p.tick) == (6, 10, 6, Fraction(1, 2))
    assert c.link(0, 0) == 0 and c.for_planning().for_planning() == p


def test_zero_cost_ops_are_planned_and_the_eager_result_verifies(cli):
    """--cost F=0 (free forwards) must not break the eager lowering's strict time order."""
    import json

    for lowering in ("eager", "auto"):
        code, out, err = cli(
            "compile",
            "zb_h1",
            "-D",
            "P=4",
            "-D",
            "M=8",
            "--cost",
            "F=0",
            "--comm-latency",
            "0.25",
            "--lowering",
            lowering,
            "--format",
            "json",
        )
        assert code == 0, err
        assert json.loads(out)["step_time"] <= 21.5


def test_check_and_dump_plan_with_the_cost_options(cli):
    code, out, err = cli(
        "dump", "1f1b", "-D", "P=4", "-D", "M=8", "--overlap", "--comm-latency", "0.25"
    )
    code2, out2, _ = cli("dump", "1f1b", "-D", "P=4", "-D", "M=8", "--overlap")
    assert code == code2 == 0, err
    assert "post[" in out and out != out2  # the eager plan differs from the lockstep one
    code, out, err = cli(
        "check", "1f1b", "-D", "P=4", "-D", "M=8", "--overlap", "--comm-latency", "0.25"
    )
    assert code == 0 and out.startswith("ok:"), err


@st.composite
def _with_overlapped_steps(draw):
    """A random valid schedule in which some adjacent forward-then-backward pairs of a rank are
    fused into overlapped F&B steps (kept only when the compute order stays acyclic)."""
    from hypothesis import assume

    from ppir.ir import Action, OpKind, Overlap

    s = draw(_ANY_SCHEDULE)
    programs = []
    for r in range(s.ranks):
        items, out, i = list(s.compute_items(r)), [], 0
        while i < len(items):
            a = items[i]
            b = items[i + 1] if i + 1 < len(items) else None
            if (
                isinstance(a, Action)
                and isinstance(b, Action)
                and a.kind is OpKind.F
                and b.kind is OpKind.B
                and draw(st.booleans())
            ):
                out.append(Overlap((a, b)))
                i += 2
            else:
                out.append(a)
                i += 1
        programs.append(tuple(out))
    fused = s.replace_programs(tuple(programs))
    assume(run(build_graph(fused)).complete)  # the fused compute order stays acyclic
    return fused


@settings(max_examples=100)
@given(_with_overlapped_steps(), st.data())
def test_eager_lowering_handles_overlapped_steps_for_any_plan_costs(s, data):
    costs = data.draw(_plan_costs(s))
    for strategy in ("lockstep", "eager"):
        out = LowerComms(strategy, costs=costs).apply(s)
        assert verify(out).ok, strategy
        assert verify(OverlapComms().apply(out)).ok, strategy
