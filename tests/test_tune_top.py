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
