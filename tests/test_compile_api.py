"""``ppir.compile``'s contract for what it is given and what a failed compile reports: a
wrong argument is a TypeError naming it and what to pass instead; a program that cannot run
to its end has no step time (the same ppir error as its estimate), while a compile that does
not verify still returns its result."""

from __future__ import annotations

import pytest

import ppir


@pytest.mark.parametrize("given", ["1f1b", None, 3])
def test_compile_names_a_schedule_that_is_not_one(given):
    with pytest.raises(TypeError, match=r"compile takes a Schedule \(ppir.load\('1f1b'"):
        ppir.compile(given)


def test_compile_names_costs_that_are_not_a_cost_config():
    s = ppir.load("1f1b", P=2, M=2)
    with pytest.raises(TypeError, match=r"costs takes a CostConfig \(ppir.make_config.*got dict"):
        ppir.compile(s, costs={"comm": {"latency": 0.25}})
    c = ppir.compile(s, costs=ppir.make_config({"comm": {"latency": "0.25"}}))
    assert c.ok and c.step_time > ppir.compile(s).step_time  # what the message points to works


def test_a_deadlocked_compile_has_no_step_time():
    """step_time and estimate raise what check() raises: the verifier's cycle, both ranks and
    the schedule's line (they said only which ranks wait, and to run 'ppir check')."""
    c = ppir.compile(ppir.load("1f1b", P=3, M=4), lowering="naive")
    assert not c.ok and c.failed == "lower-comms" and not c.timeline.complete
    with pytest.raises(ppir.PpirError) as checked:
        c.check()
    for read in (lambda: c.step_time, lambda: c.estimate, lambda: ppir.estimate(c.program)):
        with pytest.raises(ppir.PpirError) as e:
            read()
        assert e.value.kind == "deadlock" and str(e.value) == str(checked.value)
        assert "ranks 1 and 2 wait for each other" in str(e.value) and "1f1b.pps:17:5" in str(
            e.value
        )
    unverified = ppir.compile(ppir.load("1f1b", P=3, M=4), lowering="naive", verify=False)
    # returned, not raised; without a report, ok still says that its run stops short
    assert unverified.report is None and unverified.failed is None and not unverified.ok
    for read in (lambda: unverified.step_time, lambda: unverified.estimate):
        with pytest.raises(ppir.PpirError) as e:
            read()
        assert e.value.kind == "deadlock" and "ranks 0, 1 and 2 wait forever" in str(e.value)


def test_a_literal_program_that_fails_verification_failed_at_its_input():
    """A program written with its communication runs as written: a failure is the input's (it
    said failed=None, and its repr 'not ok', where a compute-only input said 'input')."""
    s = ppir.load("1f1b", P=3, M=4)
    naive = ppir.compile(s, lowering="naive", verify=False).program  # deadlocks
    c = ppir.compile(naive)
    assert not c.ok and c.failed == "input" and "failed at input" in repr(c)
    assert ppir.compile(ppir.compile(s).program).failed is None  # one that verifies


def test_auto_lowering_still_compares_its_candidates():
    s = ppir.load("zb_h1", P=4, M=8)
    cfg = ppir.make_config({"comm": {"latency": "0.25"}, "costs": {"F": 2, "I": 2, "W": 1}})
    c = ppir.compile(s, costs=cfg)
    assert c.candidates == {"lockstep": 52.75, "eager": 52.0}  # eager kept: the faster
    assert c.step_time == 52 == c.dependency_bound


@pytest.mark.parametrize("fn", ["verify", "estimate", "graph", "analyze", "to_json", "to_pps"])
def test_each_api_function_names_a_program_that_is_not_one(fn):
    with pytest.raises(TypeError, match=rf"^{fn} takes a Schedule \(ppir.load\('1f1b'.*got str"):
        getattr(ppir, fn)("1f1b")
    s = ppir.load("1f1b", P=2, M=2)
    assert getattr(ppir, fn)(s) is not None and getattr(ppir, fn)(ppir.compile(s)) is not None


CYCLIC = """schedule cyc(P = 2, M = 2)
ranks P
microbatches M
program r {
  if r == 0 { F(0) B(0) F(1) B(1) }
  else { F(1) B(1) F(0) B(0) }
}
"""


def test_an_unverified_program_whose_messages_carry_the_wrong_payload_is_not_ok(cli, tmp_path):
    """A cyclic compute order lowers into a program that runs to its end with each channel's
    k-th send meeting a k-th recv that expects another microbatch: unverified, it was ok, timed
    (step 12) and launched, training on the wrong tensors without a word."""
    s = ppir.load_text(CYCLIC, path="cyc.pps")
    c = ppir.compile(s, verify=False)
    assert c.report is None and c.timeline.complete and not c.ok
    assert [d.kind for d in c.mismatched] == ["payload-mismatch"] * 2
    for read in (c.check, lambda: c.step_time, lambda: c.estimate):
        with pytest.raises(ppir.PpirError) as e:
            read()
        assert e.value.kind == "payload-mismatch"
        assert "the 1st message from rank 0 to rank 1 is sent as 0SEND_F0 but received as " \
            "1RECV_F1" in str(e.value)  # fmt: skip
    assert ppir.compile(s).failed == "input"  # verified, the cycle itself
    assert ppir.compile(ppir.load("1f1b", P=2, M=2), verify=False).mismatched == []
    f = tmp_path / "cyc.pps"
    f.write_text(CYCLIC)
    code, out, err = cli("compile", str(f), "--no-verify", "--backend", "cost")
    assert code == 1 and out == "", out
    assert err.startswith(
        "ppir: warning: cyc's messages do not carry what their receivers expect (on 2 "
        "channels a send meets a recv that expects another payload; 'ppir check' says where)"
    ), err
    assert "error: the 1st message from rank 0 to rank 1 is sent as 0SEND_F0" in err
