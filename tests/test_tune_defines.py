"""``ppir tune -D NAME=VALUE``: a parameter of the searched schedules other than P, M and v
(which tune searches) is fixed for each schedule that declares it, reaches each row's
parameters and command, and a name no schedule declares (or one tune searches) is a usage
error.  examples/eager_1f1b.pps declares K, extra warm-up forwards (K = 0 is 1F1B)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EAGER = "examples/eager_1f1b.pps"
ARGV = ("-P", "4", "--global-batch", "16", "--comm-latency", "0.5", "-q")


def _rows(cli, *argv) -> dict:
    code, out, err = cli("tune", *ARGV, "--schedules", f"{EAGER},1f1b", *argv, "--format", "json")
    assert code == 0, err
    return {r["schedule"]: r for r in json.loads(out)["ranked"]}


def test_a_define_fixes_the_parameter_of_the_schedules_that_declare_it(cli, monkeypatch):
    monkeypatch.chdir(ROOT)
    default = _rows(cli)  # the file's default K = 1
    for k in (0, 2):
        rows = _rows(cli, "-D", f"K={k}")
        assert rows[EAGER]["params"] == {"P": 4, "M": 16, "K": k}
        assert f"-D K={k}" in rows[EAGER]["command"]
        same = lambda r: {k: v for k, v in r.items() if k != "rank"}  # noqa: E731
        assert same(rows["1f1b"]) == same(default["1f1b"])  # 1f1b declares no K
    assert default[EAGER]["params"]["K"] == 1
    k0, k2 = _rows(cli, "-D", "K=0")[EAGER], _rows(cli, "-D", "K=2")[EAGER]
    assert k0["step_time"] == default["1f1b"]["step_time"]  # K = 0 is 1F1B
    assert k2["step_time"] < k0["step_time"] and k2["peak_memory"] > k0["peak_memory"]


@pytest.mark.parametrize(
    "define, message",
    [
        ("M=4", "-D M=4: tune searches the microbatches each choice's step runs"),
        ("P=2", "-D P=2: tune searches the pipeline sizes"),
        ("v=2", "-D v=2: tune searches the stages per rank (--v)"),
        ("k=2", "-D k=2: no schedule of --schedules declares a parameter 'k'"),
        ("K", "-D K: expected NAME=VALUE"),
    ],
)
def test_a_define_tune_cannot_apply_is_a_usage_error(cli, monkeypatch, define, message):
    monkeypatch.chdir(ROOT)
    code, out, err = cli("tune", *ARGV, "--schedules", f"{EAGER},1f1b", "-D", define)
    assert code == 2 and message in err and "Traceback" not in err, err
    if define == "k=2":
        assert "did you mean 'K'?" in err


def test_a_define_no_built_in_declares_names_the_built_ins(cli):
    code, out, err = cli("tune", *ARGV, "-D", "K=2")
    assert code == 2 and "no schedule of the built-ins declares a parameter 'K'" in err, err


def test_the_text_header_says_the_fixed_values(cli, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, err = cli("tune", *ARGV, "--schedules", f"{EAGER},1f1b", "-D", "K=2")
    assert code == 0, err
    assert out.startswith("P=4, global batch 16, no memory budget, schedules at -D K=2; "), out
