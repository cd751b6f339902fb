"""The dependency graph is the IR: its construction, its networkx face, and the figures the issue
that introduced it names (the naive 1F1B deadlock as a cycle, the F&B critical path, the
eager lowering with free links)."""

from __future__ import annotations

import re
from pathlib import Path

import networkx as nx
import pytest

import ppir
from ppir.ir.graph import DONE, MESSAGE, NODE_KINDS, POST, ProgramGraph, build_graph
from ppir.schedules import builtin_names

EXTRA = {"interleaved_vshape": {"v": 2}}


def _load(name, P=4, M=8):
    return ppir.load(name, P=P, M=M, **EXTRA.get(name, {}))


def test_the_naive_1f1b_lowering_has_a_cycle_and_verify_reports_it():
    naive = ppir.lower(ppir.load("1f1b", P=3, M=4), "naive")
    g = ppir.graph(naive)
    cycle = nx.find_cycle(g.wait_for())
    kinds = {g.edges[u, v]["kind"] for u, v in cycle}
    ranks = {g.nodes[u]["rank"] for u, _ in cycle if g.nodes[u]["kind"] != "message"}
    assert "rendezvous" in kinds and ranks == {1, 2}
    report = ppir.verify(naive)
    assert [d.kind for d in report.errors] == ["deadlock"]
    assert "ranks 1 and 2 wait for each other" in report.errors[0].message


@pytest.mark.parametrize("name", builtin_names())
@pytest.mark.parametrize("lowering", ["lockstep", "eager"])
@pytest.mark.parametrize("overlap", [False, True])
def test_every_lowering_ppir_emits_gives_an_acyclic_graph(name, lowering, overlap):
    cfg = ppir.make_config({"comm": {"latency": "1/4"}})
    c = ppir.compile(_load(name), lowering=lowering, overlap=overlap, costs=cfg)
    assert c.ok, [d.render() for d in c.report.errors]
    assert nx.is_directed_acyclic_graph(c.graph) and not c.graph.blocked


def test_nodes_and_edges_are_labelled_and_the_graph_is_read_only():
    c = ppir.compile(ppir.load("1f1b", P=2, M=2))
    g = c.graph
    assert isinstance(g, nx.DiGraph) and isinstance(g, ProgramGraph)
    kinds = {d["kind"] for _, d in g.nodes(data=True)}
    assert kinds == {"compute", "post", "done", "wait", "message"}
    edge_kinds = {k for _, _, d in g.edges(data=True) for k in d["kinds"]}
    assert edge_kinds == {"order", "fifo", "data", "rendezvous", "wait"} | (
        {"channel"} & edge_kinds
    )
    assert sum(1 for _, d in g.nodes(data=True) if d["kind"] == "message") == 2 * 2 * 1
    copy = nx.DiGraph(g)  # a plain networkx copy has the same nodes and edges
    assert set(copy.edges) == set(g.edges) and copy.number_of_nodes() == g.number_of_nodes()
    with pytest.raises(nx.NetworkXError):
        g.add_edge(0, 1)
    # every message waits for both groups' posts (and the previous message on its channel, and
    # the previous group's done on either rank: the FIFO of groups); both groups' done nodes
    # wait for it (and the next message on the channel does)
    for m in g.messages:
        pre = [g.kind[u] for u in g.predecessors(m)]
        post = [g.kind[v] for v in g.successors(m)]
        assert pre.count(POST) == 2 and set(pre) <= {POST, MESSAGE, DONE}
        assert post.count(DONE) == 2 and set(post) <= {DONE, MESSAGE}
    assert all(g.kind[m] == MESSAGE for m in g.messages)
    fifo = [(u, v) for u, v, d in g.edges(data=True) if "fifo" in d["kinds"]]
    assert fifo and all(g.kind[u] == DONE and g.kind[v] == MESSAGE for u, v in fifo)


def test_a_deferred_post_is_on_its_rank_s_program_order_and_its_transfers_wait_the_fifo():
    """post[..] is a point of the rank's program (what follows it waits for it, so posting
    time is charged there) and waits only for the previous blocking item; each of its messages
    waits for the done of the previous group of both ranks (fifo)."""
    c = ppir.compile(ppir.load("1f1b", P=2, M=2))  # overlap-comms: deferred groups
    g = c.graph
    for order in g.rank_nodes:
        for i, v in enumerate(order):
            if g.kind[v] != POST or not g.schedule.programs[g.rank[v]][g.item[v]].deferred:
                continue
            preds = list(g.predecessors(v))  # the previous blocking item alone, no fifo
            assert len(preds) <= 1 and all(g[u][v]["kinds"] == ("order",) for u in preds)
            nxt = next(w for w in order[i + 1 :] if g.kind[w] != DONE)
            assert v in set(g.predecessors(nxt))


def test_a_compute_only_graph_has_compute_nodes_order_and_data_edges():
    g = build_graph(ppir.load("gpipe", P=2, M=2))
    assert {d["kind"] for _, d in g.nodes(data=True)} == {"compute"}
    assert {k for _, _, d in g.edges(data=True) for k in d["kinds"]} == {"order", "data"}
    assert nx.is_directed_acyclic_graph(g)
    longest = nx.dag_longest_path_length(g)  # edges, not weights: 2 ranks x (F, B) per mb
    assert longest >= 4


def test_zb_h1_with_free_links_and_uneven_costs_is_timed_at_49():
    cfg = ppir.make_config({"costs": {"F": 2, "I": 2, "W": 1}})
    assert ppir.estimate(ppir.load("zb_h1", P=4, M=8), cfg).step_time == 49
    # the same figure with a vanishing latency: the estimate is continuous
    tiny = ppir.make_config({"costs": {"F": 2, "I": 2, "W": 1}, "comm": {"latency": "1/1000000"}})
    assert ppir.estimate(ppir.load("zb_h1", P=4, M=8), tiny).step_time == pytest.approx(49, 1e-4)


def test_the_critical_path_of_dualpipev_counts_both_halves_of_an_overlapped_step():
    e = ppir.estimate(ppir.load("dualpipev", P=4, M=12), progress="relaxed")
    assert e.critical_path == e.step_time == 39
    assert e.dependency_bound == 39


def test_library_and_cli_agree_on_the_overlapped_interleaved_step(cli):
    import json

    code, out, _ = cli(
        "compile",
        "interleaved_1f1b",
        "-D",
        "P=4",
        "-D",
        "M=8",
        "-D",
        "v=2",
        "--comm-latency",
        "0.25",
        "--format",
        "json",
    )
    assert code == 0 and json.loads(out)["step_time"] == 32
    cfg = ppir.make_config({"comm": {"latency": "0.25"}})
    assert ppir.estimate(ppir.load("interleaved_1f1b", P=4, M=8, v=2), cfg).step_time == 32


def test_the_pass_driver_reads_a_pipeline_and_verifies_after_each_pass(cli):
    s = ppir.load("1f1b", P=4, M=8)
    c = ppir.compile(s, passes="lower-comms{strategy=eager},overlap-comms")
    assert c.ok and c.pipeline == "lower-comms{strategy=eager},overlap-comms"
    bad = ppir.compile(s, passes="lower-comms{strategy=naive},overlap-comms")
    assert not bad.ok and bad.failed == "lower-comms"  # stopped after the failing pass
    assert [d.kind for d in bad.report.errors] == ["deadlock"]
    code, _, err = cli("check", "1f1b", "-p", "lower-comms{strategy=lockstep}")
    assert code == 0, err
    code, _, err = cli("check", "1f1b", "-p", "lower-coms")
    assert code == 2 and "did you mean 'lower-comms'" in err
    code, _, err = cli("check", "1f1b", "-p", "lower-comms{hoist=2}")
    assert code == 2 and "unknown option 'hoist'" in err


def test_check_verifies_the_program_launch_runs(cli, monkeypatch):
    """Both commands compile through the same function with the same options."""
    import ppir.pipeline as pipeline

    seen = []
    real = pipeline.compile

    def spy(schedule, **kw):
        c = real(schedule, **kw)
        seen.append(ppir.to_json(c))
        return c

    monkeypatch.setattr("ppir.cli.common.compile", spy)
    code, _, _ = cli("check", "interleaved_1f1b", "-D", "P=4", "-D", "M=8", "--comm-latency", "1")
    assert code == 0
    from ppir.cli.common import compile_from_args
    from ppir.cli.main import build_parser

    args = build_parser().parse_args(
        [
            "launch",
            "-n",
            "4",
            "interleaved_1f1b",
            "-D",
            "M=8",
            "--model",
            "m.py",
            "--comm-latency",
            "1",
        ]
    )
    compile_from_args(args)
    assert len(seen) == 2 and seen[0] == seen[1]


@pytest.mark.parametrize("P", range(2, 9))
def test_dualpipev_reaches_its_dependency_ideal_when_fb_is_cheaper_than_f_plus_b(P):
    """An overlapped F&B step costing less than F + B (FB = B: perfect overlap; FB = 2.5):
    the default lowering (planned with the same costs) leaves no idle time beyond what the
    compute order forces."""
    for fb in ("2", "5/2"):
        for M in (2 * P, 4 * P):
            cfg = ppir.make_config({"costs": {"FB": fb}})
            c = ppir.compile(ppir.load("dualpipev", P=P, M=M), costs=cfg)
            assert c.ok and c.step_time == c.dependency_bound, (fb, M, c.candidates)


def test_fb_is_accepted_on_the_command_line(cli):
    import json

    code, out, err = cli(
        "compile", "dualpipev", "-D", "P=4", "-D", "M=8", "--cost", "FB=2", "--format", "json"
    )
    assert code == 0, err
    d = json.loads(out)
    assert d["step_time"] == d["dependency_bound"] and "FB=2" in d["assumptions"]
    code, _, err = cli("compile", "dualpipev", "--cost", "FD=2")
    assert code == 2 and "unknown op kind 'FD'" in err and "FB (an overlapped F&B step)" in err


def test_the_latency_comm_model_times_messages_on_the_dependency_edge(cli):
    import json

    s = ppir.load("zb_h1", P=4, M=8)
    slow = {"comm": {"latency": "1/2"}}
    rendezvous = ppir.compile(s, costs=ppir.make_config(slow))
    latency = ppir.compile(
        s, costs=ppir.make_config({"comm": {"latency": "1/2", "model": "latency"}})
    )
    assert latency.step_time == latency.dependency_bound == rendezvous.dependency_bound
    assert rendezvous.step_time >= latency.step_time
    e = latency.estimate
    assert e.message_count == rendezvous.estimate.message_count  # the same values cross ranks
    assert all(m.end - m.start == 0.5 for m in e.messages)
    code, out, _ = cli(
        "compile",
        "zb_h1",
        "-D",
        "P=4",
        "-D",
        "M=8",
        "--comm-latency",
        "0.5",
        "--comm-model",
        "latency",
        "--format",
        "json",
    )
    assert code == 0 and json.loads(out)["step_time"] == latency.step_time
    with pytest.raises(ppir.PpirError, match="comm.model must be one of"):
        ppir.make_config({"comm": {"model": "eager"}})


def test_compute_checks_are_skipped_only_for_the_very_compute_items_that_verified():
    from ppir.pipeline import _same_compute

    s = ppir.load("1f1b", P=2, M=2)
    c = ppir.compile(s)
    assert _same_compute(c.program, s) and _same_compute(c.blocking, s)
    progs = [list(p) for p in c.program.programs]
    first = next(i for i, it in enumerate(progs[0]) if isinstance(it, ppir.Action))
    progs[0][first] = progs[0][first].with_span(None)  # equal, but another object
    assert not _same_compute(c.program.replace_programs(tuple(map(tuple, progs))), s)
    progs = [list(p) for p in c.program.programs]
    progs[0].insert(first, progs[0][first])  # a pass that duplicates an op is checked fully
    broken = c.program.replace_programs(tuple(map(tuple, progs)))
    assert not _same_compute(broken, s)
    assert "duplicate-op" in {d.kind for d in ppir.verify(broken).errors}


# Two programs a review found (broken on purpose: the deadlock is what is checked).
BEHIND_OWN_FIFO = """ranks 3
stages 3
microbatches 3
placement [0, 1, 2]
rank 0: post[0RECV_B0] post[0SEND_F2] wait[0SEND_F2] wait[0RECV_B0]
rank 1: post[1RECV_F2] post[1RECV_B0] wait[1RECV_B0] post[1SEND_B0] wait[1RECV_F2] wait[1SEND_B0]
rank 2: post[2SEND_B0] wait[2SEND_B0]
"""
NOTHING_MATCHED = """ranks 2
stages 2
microbatches 2
rank 0: 0F0 0F1 post[0SEND_F0] post[0SEND_F1] wait[0SEND_F1] [0RECV_B0] wait[0SEND_F0] 0B0
rank 1: [1SEND_B0] [1RECV_F0] 1F0 1B0
"""


def _deadlock(tmp_path, text):
    path = tmp_path / "t.pps"
    path.write_text(text)
    report = ppir.verify(ppir.load(str(path)))
    return report, [d for d in report.diagnostics if d.kind == "deadlock"]


def test_a_group_behind_its_own_rank_s_fifo_is_not_a_hop_of_the_witness(tmp_path):
    """Rank 1's post[1RECV_B0] is posted and waits behind its rank's earlier group: that is
    not a partner that is "not posted yet" (rank 2 posted 2SEND_B0 at step 0)."""
    _, found = _deadlock(tmp_path, BEHIND_OWN_FIFO)
    assert len(found) == 1 and "ranks 0 and 1 wait for each other" in found[0].message
    notes = [n.message for n in found[0].notes]
    assert notes == [
        "rank 0 is blocked at step 0 on 0RECV_B0 (receives from rank 1); its partner 1SEND_B0 "
        "is step 3 of rank 1, behind step 0 where rank 1 is blocked",
        "rank 1 is blocked at step 0 on 1RECV_F2 (receives from rank 0); its partner 0SEND_F2 "
        "is step 1 of rank 0, behind step 0 where rank 0 is blocked",
    ]


def test_a_cycle_through_a_group_without_any_partner_is_still_a_deadlock(tmp_path):
    """Rank 0's post[0SEND_F1] has no partner (rank 1 never receives F1), so no message
    carries its FIFO wait: its done does, and the cycle through it is reported."""
    report, found = _deadlock(tmp_path, NOTHING_MATCHED)
    kinds = {d.kind for d in report.diagnostics}
    assert "unmatched-send" in kinds and len(found) == 1
    assert "ranks 0 and 1 wait for each other" in found[0].message


@pytest.mark.parametrize(
    "pipeline, said",
    [
        (
            "lower-comms{strategy=bogus}",
            "lower-comms: unknown lowering strategy 'bogus' (strategies: lockstep, eager, naive)",
        ),
        ("lower-comms,overlap-comms{hoist=-3}", "overlap-comms: hoist is a count of compute"),
    ],
)
def test_a_pass_option_value_the_pass_refuses_is_a_usage_error(cli, pipeline, said):
    code, out, err = cli("compile", "1f1b", "-p", pipeline)
    assert code == 2 and said in err and "Traceback" not in err


def test_overlap_comms_given_twice_keeps_the_split_program(cli):
    """The second overlap-comms sees post[...]/wait[...] only: it was a ValueError traceback
    ('overlap-comms expects blocking groups; this program is already split')."""
    s = ppir.load("1f1b", P=4, M=8)
    once = ppir.compile(s, passes="lower-comms,overlap-comms")
    twice = ppir.compile(s, passes="lower-comms,overlap-comms,overlap-comms")
    assert twice.ok and twice.program.programs == once.program.programs
    code, out, err = cli("check", "1f1b", "-p", "lower-comms,overlap-comms,overlap-comms")
    assert code == 0 and out.startswith("ok: 1f1b(P=4, M=8)") and "Traceback" not in err


def _node_table() -> dict[str, list[str]]:
    """docs/verification.md's table of node attributes: kind -> its cells (the kind, rank,
    item, ops, label)."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "verification.md").read_text()
    rows = text[text.index("| node kind |") :].split("\n\n")[0].splitlines()[2:]
    out = {}
    for row in rows:
        first, *cells = [c.strip() for c in row.strip("|").split("|")]
        for kind in re.findall(r"`(\w+)`", first.split("(")[0]):
            out[kind] = [first, *cells]
    return out


@pytest.mark.parametrize(
    "name,params,progress",
    [
        ("1f1b", {"P": 3, "M": 4}, "fifo"),
        ("1f1b", {"P": 3, "M": 4}, "relaxed"),
        ("dualpipev", {"P": 2, "M": 4}, "fifo"),
        ("dualpipev", {"P": 2, "M": 4}, "relaxed"),
        ("interleaved_1f1b", {"P": 2, "M": 4, "v": 2}, "fifo"),  # stage != rank
    ],
)
def test_the_node_attributes_are_what_verification_md_says(name, params, progress):
    """was: neither doc said what a message node carries (a trial found rank = the sender and
    item = -1); the table covers every node kind, and each row holds for the graph."""
    table = _node_table()
    assert set(table) == set(NODE_KINDS)
    assert "sender" in table["message"][1] and table["message"][2].startswith("`-1`")
    assert table["wait"][3] == table["reduce"][3] == "`()`"
    assert "none under `relaxed` progress" in table["wait"][0]
    c = ppir.compile(ppir.load(name, **params), dp=2)
    g = ppir.graph(c, progress)
    s = c.program
    seen = set()
    for v, d in g.nodes(data=True):
        kind, rank, item, ops = d["kind"], d["rank"], d["item"], d["ops"]
        seen.add(kind)
        if kind == "message":
            send, recv = ops
            assert "SEND" in send and "RECV" in recv and item == -1
            assert d["label"] == f"msg {send}->{recv}"
            [sender] = [u for u in g.pred[v] if send in g.nodes[u]["ops"]]
            assert g.nodes[sender]["kind"] == "post" and rank == g.nodes[sender]["rank"]
            continue
        it = s.programs[rank][item]
        assert d["label"].startswith(f"r{rank}:")
        if kind in ("wait", "reduce"):
            assert ops == () and d["label"] == f"r{rank}:{it}"
        else:  # the item's actions (a relaxed unit: some of them), in its order
            actions = [str(a) for a in getattr(it, "actions", None) or (it,)]
            assert ops and [a for a in actions if a in ops] == list(ops)
    assert seen == set(NODE_KINDS) - ({"wait"} if progress == "relaxed" else set())
