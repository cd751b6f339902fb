"""The verifier's shortcuts between a pass's input and output (``verify(..., previous=...)``)
give the report of the full check, and each still catches the bug of the checks it skips
when the communication differs."""

from __future__ import annotations

import pytest

import ppir
from ppir.ir import Group, Wait
from ppir.passes import OverlapComms
from ppir.schedules import builtin_names
from ppir.verify import same_comm, verify

WITH_V = {"interleaved_1f1b", "interleaved_vshape", "interleaved_zb", "looped_bfs"}


def _load(name: str, P: int = 4, M: int = 8):
    return ppir.load(name, P=P, M=M, **({"v": 2} if name in WITH_V else {}))


def _kinds(report) -> set[str]:
    return {d.kind for d in report.diagnostics}


def _full_and_short(program, previous):
    full = verify(program, compute_known=True)
    short = verify(program, compute_known=True, previous=(previous, verify(previous)))
    return full, short


@pytest.mark.parametrize("name", builtin_names())
@pytest.mark.parametrize("lowering", ["lockstep", "eager"])
def test_shortcut_gives_the_full_report_on_builtins(name, lowering):
    c = ppir.compile(_load(name), lowering=lowering)
    assert c.ok and c.blocking is not c.program
    assert same_comm(c.program, c.blocking)
    full, short = _full_and_short(c.program, c.blocking)
    assert short.diagnostics == full.diagnostics


def test_lone_ops_wrapped_in_groups_are_not_the_same_communication():
    c = ppir.compile(_load("1f1b"), lowering="naive")  # lone SEND/RECV: deadlocks, as known
    over = OverlapComms().apply(c.program)  # wraps each lone op in a group
    assert not same_comm(over, c.program)
    full, short = _full_and_short(over, c.program)
    assert short.diagnostics == full.diagnostics


def _retarget(program, rank: int, old, new):
    """``program`` with action ``old`` replaced by ``new`` in rank ``rank``'s groups and waits."""
    progs = [list(p) for p in program.programs]
    for i, it in enumerate(progs[rank]):
        if isinstance(it, (Group, Wait)) and old in it.actions:
            acts = tuple(new if a == old else a for a in it.actions)
            progs[rank][i] = (
                Group(acts, it.span, it.deferred) if isinstance(it, Group) else Wait(acts)
            )
    return program.replace_programs(tuple(map(tuple, progs)))


def test_changed_messages_are_checked_in_full():
    c = ppir.compile(_load("1f1b", P=2, M=4))
    sends = [a for it in c.program.programs[0] if isinstance(it, Group) for a in it.actions]
    first, second = sends[0], next(a for a in sends if a.kind == sends[0].kind and a != sends[0])
    bad = _retarget(c.program, 0, first, second)  # one value sent twice, another never
    assert not same_comm(bad, c.blocking)
    full, short = _full_and_short(bad, c.blocking)
    assert short.diagnostics == full.diagnostics
    assert {"duplicate-message", "payload-mismatch"} <= _kinds(short)


def test_previous_findings_are_not_taken_as_known():
    c = ppir.compile(_load("1f1b", P=2, M=4), overlap=False)
    progs = [list(p) for p in c.program.programs]
    i = next(i for i, it in enumerate(progs[0]) if isinstance(it, Group) and len(it.actions) > 1)
    g = progs[0][i]
    progs[0][i : i + 1] = [Group((a,), g.span) for a in g.actions]  # rank 1 keeps one group
    split = c.program.replace_programs(tuple(map(tuple, progs)))
    before = verify(split)
    assert before.ok and "asymmetric-group" in _kinds(before)
    over = OverlapComms().apply(split)
    assert same_comm(over, split)
    full, short = _full_and_short(over, split)
    assert short.diagnostics == full.diagnostics and "asymmetric-group" in _kinds(short)
    # the same program verified against a clean report of the same communication skips the
    # lints: the shortcut rests on that report, which the pipeline takes from the pass's input
    lied = verify(over, compute_known=True, previous=(split, ppir.Report([])))
    assert "asymmetric-group" not in _kinds(lied)


def test_pipeline_reports_are_those_of_the_full_check():
    for name in builtin_names():
        c = ppir.compile(_load(name), strict=True)
        full = verify(c.program, strict=True)
        assert c.report.diagnostics == full.diagnostics, name


def test_no_reduce_no_reduce_findings_and_reduces_still_checked():
    s = _load("1f1b", P=2, M=4)
    c = ppir.compile(s, dp=2)
    assert c.ok and any(type(it).__name__ == "Reduce" for p in c.program.programs for it in p)
    progs = [list(p) for p in c.program.programs]
    r = next(i for i, it in enumerate(progs[0]) if type(it).__name__ == "Reduce")
    progs[0].insert(0, progs[0].pop(r))  # before the gradients it reduces
    early = c.program.replace_programs(tuple(map(tuple, progs)))
    assert "early-reduce" in _kinds(verify(early))


def test_a_given_input_timeline_is_used_only_when_it_is_the_one_compile_would_make(monkeypatch):
    import ppir.pipeline as pipeline
    from ppir.analysis.costs import costs_for
    from ppir.analysis.timeline import run
    from ppir.ir.graph import build_graph

    s = _load("interleaved_1f1b")
    cfg = ppir.make_config({"costs": {"B": 3}})
    plain = ppir.compile(s, costs=cfg)
    tl = run(build_graph(s), costs_for(s, cfg))
    built = []
    real = pipeline.build_graph
    monkeypatch.setattr(pipeline, "build_graph", lambda p, *a: built.append(p) or real(p, *a))
    given = ppir.compile(s, costs=cfg, input_timeline=tl)
    assert s not in built  # the input's graph was not built again
    assert given.program.programs == plain.program.programs
    assert given.step_time == plain.step_time and given.report == plain.report
    other = run(build_graph(s))  # untimed: not the run compile makes
    again = ppir.compile(s, costs=cfg, input_timeline=other)
    assert s in built
    assert again.dependency_bound == plain.dependency_bound
    assert again.program.programs == plain.program.programs


@pytest.mark.parametrize("strategy", ["lockstep", "eager"])
def test_lower_comms_reuses_a_run_only_under_its_planning_costs(monkeypatch, strategy):
    """compile hands lower-comms the input's timed run; the pass uses it only when its costs
    are the planning costs (free links, every op positive), else it times the graph itself."""
    import ppir.passes.lower_comms as lc
    from ppir.analysis.costs import costs_for
    from ppir.analysis.timeline import run
    from ppir.ir.graph import build_graph
    from ppir.passes import LowerComms

    s = _load("interleaved_1f1b")
    g = build_graph(s)
    ran = []
    real = lc.run
    monkeypatch.setattr(lc, "run", lambda graph, costs: ran.append(costs) or real(graph, costs))
    for cfg, reused in [
        ({"costs": {"B": 3}}, True),
        ({"costs": {"B": 3}, "comm": {"latency": "1/4"}}, strategy == "eager"),  # lockstep: 0
        ({"costs": {"B": 3, "W": 0, "I": 1}}, False),  # a free op is planned as a sliver
    ]:
        c = costs_for(s, ppir.make_config(cfg))
        tl = real(g, c)
        ran.clear()
        given = LowerComms(strategy, c).apply(s, graph=g, timeline=tl)
        assert (ran == []) == reused, cfg
        fresh = LowerComms(strategy, c).apply(s, graph=g)
        assert given.programs == fresh.programs
        wrong = LowerComms(strategy, c).apply(s, graph=g, timeline=run(g))  # untimed: not it
        assert wrong.programs == fresh.programs
