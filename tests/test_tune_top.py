"""ppir tune --top N ranks the N fastest programs: the search may compile more (while their bound
could still beat the N-th), and lists those as slower, not as ranked rows."""

from __future__ import annotations

import json

import pytest
import tomllib

from ppir.analysis.config import make_config
from ppir.analysis.measured import MeasuredCosts
from ppir.analysis.tune import Space, search
from ppir.schedules import builtin_names

T = (1e-3,) * 4
# posting a group costs half a forward: the bounds (free messages) undershoot, so the search
# compiles programs that turn out slower than the top
MEASURED = MeasuredCosts(4, T, (2e-3,) * 4, T, T, 1e-4, post=5e-4)


@pytest.fixture
def cost_file(tmp_path):
    path = tmp_path / "costs.toml"
    path.write_text(MEASURED.to_toml())
    return str(path)


@pytest.mark.parametrize("top", [1, 3])
def test_the_search_ranks_exactly_the_top(top):
    cfg = make_config(tomllib.loads(MEASURED.to_toml()))
    cands = search(builtin_names(), Space(world=2, global_batch=8, top=top), cfg)
    ranked = [c for c in cands if c.ok]
    slower = [c for c in cands if c.why == "slower"]
    assert len(ranked) == top and slower  # it listed 10 and 12 ranked rows
    assert cands[: top + len(slower)] == ranked + slower
    assert max(c.step_time for c in ranked) <= min(c.step_time for c in slower)
    assert [c.step_time for c in slower] == sorted(c.step_time for c in slower)
    nth = {1: "1st", 3: "3rd"}[top]
    assert all(c.reason == f"compiled, but slower than the {nth} ranked step time" for c in slower)


def test_the_table_shows_top_rows_and_says_what_else_was_compiled(cli, cost_file):
    code, out, err = cli("tune", "-P", "2", "--config", cost_file, "--top", "3", "-q")
    assert code == 0, err
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("#"))
    rows = [line for line in lines[head + 1 :] if line[:1].isdigit()]
    assert [r.split()[0] for r in rows] == ["1", "2", "3"]  # it ranked 16 rows
    slower = next(line for line in lines if line.startswith("slower ("))
    n = int(slower.split("(")[1].split(")")[0])
    assert f"but slower than the 3rd ranked; --top {3 + n} ranks them" in slower
    assert "rejected (" not in out or "slower" not in out.split("rejected (")[1]
    code, out, err = cli(
        "tune", "-P", "2", "--config", cost_file, "--top", "3", "-q", "--format", "json"
    )
    doc = json.loads(out)
    assert len(doc["ranked"]) == 3 and len(doc["slower"]) == n
    assert all(r["rejected"] is None and r["step_time"] for r in doc["slower"])
    assert all(r["rejected"] != "slower" for r in doc["rejected"])


def test_the_help_says_what_top_does(cli, capsys):
    with pytest.raises(SystemExit):
        cli("tune", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "--top N how many of the fastest programs to rank (default 10)" in text


def test_a_tie_at_the_cut_is_not_called_slower(cli, cost_file):
    # with --top 4, zb_h1 ties with the 4th ranked (interleaved_zb v=1: 57.7 ms, 2 A each); it
    # was listed as "compiled, but slower than the 4th ranked step time"
    cfg = make_config(tomllib.loads(MEASURED.to_toml()))
    cands = search(builtin_names(), Space(world=2, global_batch=8, top=4), cfg)
    ranked = [c for c in cands if c.ok]
    slower = [c for c in cands if c.why == "slower"]
    nth = ranked[-1]
    tied = [c for c in slower if f"{c.step_time:.9g}" == f"{nth.step_time:.9g}"]
    assert [(c.schedule, c.v) for c in tied] == [("zb_h1", 1)] and tied[0].peak == nth.peak
    assert tied[0].reason == (
        "compiled, ties with the 4th ranked step time and peak memory (ranked after it by "
        "schedule, pp, v, mbs, recompute, layers)"
    )
    assert nth.schedule < tied[0].schedule  # the order the reason states
    for c in slower[len(tied) :]:
        assert c.step_time > nth.step_time
        assert c.reason == "compiled, but slower than the 4th ranked step time"
    code, out, err = cli("tune", "-P", "2", "--config", cost_file, "--top", "4", "-q")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("not ranked ("))
    assert line == (
        f"not ranked ({len(slower)}): compiled, 1 ties with the 4th ranked at 57.7 ms (equal step "
        "times rank less peak memory first, then by schedule, pp, v, mbs, recompute, layers), "
        f"{len(slower) - 1} slower, from 59.4 ms; --top {4 + len(slower)} ranks them"
    )
    assert "\nslower (" not in out


def test_a_tie_with_more_memory_says_so():
    from ppir.analysis.tune import _slower
    from ppir.analysis.tune_space import Candidate

    def compiled(name, t, peak):
        return Candidate(name, 2, 1, 1, 1, 8, step_time=t, peak=peak)

    nth = compiled("zb_h1", 0.0577, 2.0)
    more = _slower(compiled("1f1b", 0.0577 + 1e-12, 3.0), 2, nth)  # equal to 9 digits
    assert more.reason == (
        "compiled, ties with the 2nd ranked step time but needs more memory (equal step times "
        "rank less peak memory first)"
    )
    slow = _slower(compiled("1f1b", 0.0578, 2.0), 2, nth)
    assert slow.reason == "compiled, but slower than the 2nd ranked step time"


def test_a_choice_whose_bound_ties_with_the_cut_is_compiled_and_ranked_by_memory():
    # at P=1 both take 12: looped_bfs (4 A, first by name among equal bounds) was ranked 1st
    # with --top 1 and zb_h1 (1 A) pruned, though --top 2 ranked zb_h1 first
    def first(top):
        space = Space(world=1, global_batch=4, vs=(1,), top=top)
        cands = search(["looped_bfs", "zb_h1"], space, make_config({}))
        return [(c.schedule, c.peak) for c in cands if c.ok][0]

    assert first(1) == first(2) == ("zb_h1", 1)


def test_the_search_shows_no_total_it_cannot_know_and_counts_the_ranked(cli, monkeypatch):
    """was: the search pass's bar counted up to every choice, most of which are pruned without
    a step, so a long search stood at 30 % with a growing ETA ('372/1230 [00:07<01:12]') and
    then ended; its status named only the last choice.  Now the expansion has its total, the
    search an open count, and the status says how many of --top are ranked."""
    from contextlib import contextmanager

    phases, statuses = [], []

    class Bar:
        def restart(self, desc, total=None):
            phases.append((desc, total))

        def update(self, n=1, status=None):
            statuses.append(status)

    @contextmanager
    def fake(total, desc, **kw):
        yield Bar()

    monkeypatch.setattr("ppir.cli.tune.progress", fake)
    code, out, err = cli("tune", "-P", "4", "--memory-budget", "6A", "--top", "2")
    assert code == 0, err
    assert [desc for desc, _ in phases] == ["tune: expanding", "tune: searching"]
    assert isinstance(phases[0][1], int) and phases[0][1] > 0 and phases[1][1] is None
    assert any(s and s.startswith("2/2 ranked; compiled ") for s in statuses), statuses


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--world", "8", "--model", "llama3-8b"],
         ", no memory budget (--gpu-memory SIZE holds each choice to one); assuming"),
        (["-P", "4"], ", no memory budget; assuming"),
        (["-P", "4", "--memory-budget", "6A"], ", budget 6 A; assuming"),
        (["--world", "8", "--model", "llama3-8b", "--gpu-memory", "80GiB"],
         ", budget 72.00 GiB per GPU; assuming"),
    ],
)  # fmt: skip
def test_the_header_says_the_budget_or_that_there_is_none(cli, argv, said):
    """was: without --gpu-memory the header said nothing of memory, and the table ranked
    choices of 300 GiB a GPU as if they fitted; with --memory-budget 6A it said ', 6 A'."""
    code, out, err = cli("tune", *argv, "--top", "1", "-q")
    assert code == 0, err
    assert said in out.splitlines()[0]
