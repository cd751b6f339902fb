"""The timeline on shared processors (``costs.processors = C``): the ranks' work -- compute
and message transfers -- runs on C processors shared fairly, as P gloo ranks share CPU cores.

The schedule a shared run returns is checked against the equations that define processor
sharing, from its start and finish times alone (an oracle independent of the event loop):

* every node starts when its last wait-for predecessor finishes (0 for none);
* a node's work (its duration under the costs) equals the integral of ``min(1, C / k(t))``
  over its interval, ``k(t)`` the intervals of nodes with work open at ``t``.

And bounds: the plain run (a processor per rank, links of their own) <= the shared run <= the
plain run with every duration stretched by ``n / C`` (n: the nodes with work); the step is at
least all the work over C.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.programs import compute_orders, lowered_programs

import ppir
from ppir.analysis.config import make_config
from ppir.analysis.costs import Costs
from ppir.analysis.timeline import _in_degrees, _run_shared, durations, run
from ppir.diagnostics import EXIT_USAGE, PpirError
from ppir.ir import OpKind
from ppir.ir.graph import _SHIFT, build_graph

KINDS = (OpKind.F, OpKind.B, OpKind.I, OpKind.W)


@st.composite
def _costs(draw, s):
    op = tuple({k: draw(st.integers(0, 5)) for k in KINDS} for _ in range(s.stages))
    link = draw(st.integers(0, 3))
    return Costs(op, intra=link, inter=link)


def _shared(g, costs, cores):
    return _run_shared(g, costs, durations(g, costs), _in_degrees(g), cores)


def _check_sharing(tl, cores):
    """The defining equations of processor sharing hold for ``tl`` (module docstring)."""
    g, start, finish, dur = tl.graph, tl.start, tl.finish, tl.duration
    for v in range(g.n):
        preds = [finish[e >> _SHIFT] for e in g.before[v]]
        assert start[v] == pytest.approx(max(preds, default=0.0), abs=1e-9)
        if not dur[v]:
            assert finish[v] == start[v]
    work = [v for v in range(g.n) if dur[v]]
    cuts = sorted({t for v in work for t in (start[v], finish[v])})
    done = dict.fromkeys(work, 0.0)
    for a, b in zip(cuts, cuts[1:]):
        open_ = [v for v in work if start[v] <= a and finish[v] >= b]
        rate = min(1.0, cores / len(open_)) if open_ else 0.0
        for v in open_:
            done[v] += rate * (b - a)
    for v in work:
        assert done[v] == pytest.approx(dur[v], rel=1e-6, abs=1e-9)


@settings(max_examples=300, deadline=None)
@given(lowered_programs(broken=False), st.data())
def test_shared_runs_are_processor_sharing(s, data):
    costs = data.draw(_costs(s))
    g = build_graph(s, "fifo")
    plain = run(g, costs)
    cores = data.draw(st.integers(1, s.ranks + 1))
    tl = _shared(g, costs, cores)
    assert tl.complete == plain.complete and tl.count == plain.count
    if not plain.complete:
        return
    _check_sharing(tl, cores)
    # bounds: dedicated processors are faster, and no node slows by more than n / cores
    work = [d for d in tl.duration if d]
    assert tl.makespan >= plain.makespan - 1e-9
    assert tl.makespan >= sum(work) / cores - 1e-9
    slow = max(1, len(work) / cores)
    stretched = replace(
        costs,
        op=tuple({k: d * slow for k, d in r.items()} for r in costs.op),
        intra=costs.intra * slow,
        inter=costs.inter * slow,
    )
    assert tl.makespan <= run(g, stretched).makespan + 1e-9


@settings(max_examples=200, deadline=None)
@given(lowered_programs(broken=False), st.data())
def test_a_processor_per_node_is_the_plain_run(s, data):
    costs = data.draw(_costs(s))
    g = build_graph(s, "fifo")
    plain, tl = run(g, costs), _shared(g, costs, max(1, g.n))
    assert tl.count == plain.count
    assert tl.finish == pytest.approx(plain.finish) and tl.start == pytest.approx(plain.start)


def _step(name, params, processors=None):
    data = {"hardware": {"processors": processors}} if processors else {}
    return ppir.estimate(ppir.load(name, **params), make_config(data))


def test_one_processor_runs_all_compute_one_after_another():
    # 1F1B, P=4, M=8, F=1 B=2 per rank share: 4 ranks x 8 x 3 of work; with free links there
    # is always an op ready once the first forward is done, so one processor never idles
    assert _step("1f1b", {"P": 4, "M": 8}).step_time == 33
    assert _step("1f1b", {"P": 4, "M": 8}, 1).step_time == pytest.approx(96)
    # as many as ranks: with free links no two ops of a processor ever meet
    assert _step("1f1b", {"P": 4, "M": 8}, 4).step_time == pytest.approx(33)


def test_a_chain_never_competes():
    # GPipe with one microbatch: one op at a time across the ranks, so sharing changes nothing
    for cores in (1, 2, 3):
        assert _step("gpipe", {"P": 4, "M": 1}, cores).step_time == pytest.approx(4 * 3)


def test_two_processors_for_four_ranks_slow_the_steady_state():
    step = _step("1f1b", {"P": 4, "M": 8}, 2)
    assert 48 <= step.step_time < 96  # at least the work over two processors
    assert step.critical_path == step.step_time
    busy = sum(r.busy for r in step.per_rank)  # compute intervals, stretched by sharing
    assert busy > 96
    assert "the ranks share 2 processors" in step.config.describe()


def test_processors_setting_is_checked():
    for bad in (-1, "two", True, 1.5):
        with pytest.raises(PpirError) as e:
            make_config({"hardware": {"processors": bad}}, "c.toml")
        assert e.value.exit_code == EXIT_USAGE
        assert "c.toml: hardware.processors must be a whole number" in e.value.render()
    assert make_config({"hardware": {"processors": 0}}).processors is None  # one per rank


def test_a_cpu_profile_shares_its_cores_unless_told_otherwise():
    table = {
        "stages": 4,
        "F": [1e-3] * 4,
        "B": [2e-3] * 4,
        "I": [1e-3] * 4,
        "W": [1e-3] * 4,
        "transfer": 0.0,
        "device": "cpu",
        "processors": 2,
    }
    cfg = make_config({"measured": table})
    assert cfg.processors == 2
    s = ppir.load("1f1b", P=4, M=8)
    shared = ppir.estimate(s, cfg).step_time
    own = make_config({"measured": table, "hardware": {"processors": 4}})
    assert own.processors == 4
    dedicated = ppir.estimate(s, own).step_time
    assert dedicated == pytest.approx(33e-3)
    assert shared > 1.4 * dedicated
    off = make_config({"measured": table, "hardware": {"processors": 0}})  # one per rank
    assert off.processors is None and ppir.estimate(s, off).step_time == pytest.approx(33e-3)
    with pytest.raises(PpirError, match=r"measured.processors must be a whole number"):
        make_config({"measured": {**table, "processors": -2}})


def test_the_processors_flag(cli):
    code, out, err = cli("compile", "1f1b", "-D", "P=4", "-D", "M=8", "--backend", "cost")
    assert code == 0, err
    code, out2, err = cli(
        "compile", "1f1b", "-D", "P=4", "-D", "M=8", "--backend", "cost", "--processors", "1"
    )
    assert code == 0, err
    assert "the ranks share 1 processor" in out2 and "96" in out2
    code, _, err = cli("compile", "1f1b", "-D", "P=4", "--backend", "cost", "--processors", "-1")
    assert code == 2 and "processors must be a whole number, 0 or more" in err


def _assumed_and_step(cli, *argv):
    code, out, err = cli("compile", *argv, "--backend", "cost")
    assert code == 0, err
    lines = out.splitlines()
    return lines[1], next(ln.split()[2] for ln in lines if ln.startswith("step time"))


def test_more_processors_than_ranks_are_not_said_to_be_shared_by_the_ranks(cli):
    args = ("1f1b", "-D", "P=2", "-D", "M=4")
    said, step = _assumed_and_step(cli, *args, "--processors", "4")
    assert "the ranks share" not in said  # was 'the ranks share 4 processors'
    assert (
        "; 4 processors for 2 ranks (nothing slows unless transfers and reductions bring "
        "the work running at once above 4); free communication" in said
    )
    assert step == _assumed_and_step(cli, *args)[1] == "15"  # one each: the plain estimate
    said, _ = _assumed_and_step(cli, *args, "--processors", "1")
    assert "; the ranks share 1 processor;" in said


_TUNE = ("tune", "--world", "8", "--tp", "1", "--model", "llama3-8b,layers=8", "--gpu-memory")
_TUNE += ("80GiB", "--schedules", "1f1b", "--micro-batch", "1", "--recompute", "none")


@pytest.mark.parametrize(
    "n, said",
    [
        (
            4,
            "; 4 processors for each candidate's pipeline ranks (shared where there are more "
            "than 4; elsewhere nothing slows unless transfers and reductions bring the work "
            "running at once above 4);",
        ),
        (
            8,
            "; 8 processors for each candidate's 1 to 8 pipeline ranks (nothing slows unless "
            "transfers and reductions bring the work running at once above 8);",
        ),
    ],
)
def test_tune_says_what_processors_mean_for_candidates_of_several_pipeline_sizes(cli, n, said):
    """tune said 'the ranks share 4 processors' of every candidate, pp=1 and pp=2 included,
    which have a processor per rank; it now says it of each candidate's pipeline ranks."""
    code, out, err = cli(*_TUNE, "--processors", str(n))
    assert code == 0, err
    first = out.splitlines()[0]
    assert said in first and "the ranks share" not in first
    code, out, err = cli(*_TUNE, "--processors", str(n), "--format", "json")
    assert code == 0 and said.strip("; ") in json.loads(out)["assumptions"]


def test_one_pipeline_size_and_a_json_estimate_say_it_of_their_ranks(cli):
    """tune -P 2 and compile's JSON said 'the ranks share 4 processors' of 2 ranks."""
    code, out, err = cli("tune", "-P", "2", "--global-batch", "8", "--processors", "4")
    assert code == 0 and "; 4 processors for 2 ranks (nothing slows" in out.splitlines()[0]
    argv = ("compile", "1f1b", "-D", "P=2", "-D", "M=4", "--backend", "cost", "--format", "json")
    code, out, err = cli(*argv, "--processors", "4")
    assert code == 0 and "; 4 processors for 2 ranks (" in json.loads(out)["assumptions"]
    code, out, err = cli(*argv, "--processors", "1")
    assert code == 0 and "; the ranks share 1 processor;" in json.loads(out)["assumptions"]
    wider = ("tune", "--world", "16", *_TUNE[3:], "--pp", "4,8")  # each pp over 2 processors
    code, out, err = cli(*wider, "--processors", "2")
    assert code == 0 and "; each candidate's pipeline ranks share 2 processors;" in out


def test_a_processor_per_rank_still_shares_them_with_transfers(cli):
    # why the estimate keeps modelling sharing with as many processors as ranks: GPipe's
    # transfers (gloo copies them on the same cores) run while both ranks compute
    args = ("gpipe", "-D", "P=2", "-D", "M=8", "--comm-latency", "3")
    steps = [_assumed_and_step(cli, *args, *more)[1] for more in ((), ("--processors", "2"))]
    assert steps == ["54", "59"]
    assert _assumed_and_step(cli, *args, "--processors", "3")[1] == "54"


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_dependency_bound_holds_on_shared_processors(data):
    # processor sharing is not monotone (a delay can shorten a shared run), so the bound is the
    # run with a processor per rank or the compute work over the processors, whichever is more
    s = data.draw(compute_orders())
    cores = data.draw(st.integers(1, s.ranks))
    lat = data.draw(st.sampled_from([0, "1/4", 1]))
    cfg = make_config({"hardware": {"processors": cores}, "comm": {"latency": lat}})
    c = ppir.compile(s, costs=cfg)
    assert c.ok and c.dependency_bound is not None
    assert c.step_time >= c.dependency_bound - 1e-9
    plain = ppir.compile(s, costs=make_config({"comm": {"latency": lat}}))
    assert c.dependency_bound >= plain.dependency_bound  # never below the unshared bound
