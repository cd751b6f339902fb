"""One flag vocabulary: every command's parser is built, and each option string must mean the
same thing wherever it appears (the same kind, destination, type, metavar and units), every
numeric option must say its unit in its help, and deprecated spellings still parse with one
warning.  (Tests may read argparse's action lists; product code may not, see
test_cost_options.)"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

import pytest

from ppir.cli.argtypes import integer, number, positive_int
from ppir.cli.deprecation import Renamed, old_spellings
from ppir.cli.main import build_parser

# Justified exceptions to "one option string, one meaning", each for the commands named.  An
# entry that no longer differs fails the test: remove it then.
SAME_WORD_ALLOWED = {
    # The same meaning, "a parameter and its values": sweep takes one parameter's list or
    # constant range, fuzz ranges of several (repeatable, bounds over earlier ones), a superset.
    "--over": {"fuzz"},
    # "processes to run" in both; profile calls them --ranks (dest ranks), launch --nproc.
    "-n": {"launch"},
    # The same meaning, recomputation: tune takes a list of modes to try.
    "--recompute": {"tune"},
}

# Numeric options whose help need not name a unit: their values are no quantity of anything.
UNITLESS_ALLOWED = {
    "--seed": "an identifier for the random stream",
    "--lr": "a learning rate is a pure number (launch and ppir.run, the runtime's options)",
    "--tolerance": "a difference in the loss's and gradients' own units (launch, ppir.run)",
}

# A metavar that stands for a number, or a list of numbers (not names: S1,S2,... are schedules).
_NUMERIC_METAVAR = re.compile(
    r"^([A-Z]|(P1,P2|B1,B2|V1,V2|W0,W1|R0,R1),\.\.\.|US|SECONDS|FRACTION|SIZE(\|PCT)?|GB/s|EXPR"
    r"|K=X,\.\.\.)$"
)
# Units of time, size and cost: an option string keeps the same ones in every command.
_MEASURE = re.compile(
    r"(?i:\b(microseconds?|seconds?|ms|GiB|bytes?|forwards?|fractions?|factors?|multipliers?"
    r"|percentage)\b|GB/s|%)|\bin A\b"
)
# The things a count counts (also a unit: "GPUs in all", "training steps").
_COUNTED = re.compile(
    r"(?i:\b(count|number of|index|ranks?|GPUs|processes|nodes|replicas|steps|ops|iterations"
    r"|layers|microbatches|sequences|choices|stages|chunks|threads)\b)"
)


def _parsers() -> dict[str, argparse.ArgumentParser]:
    root = build_parser()
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    out = dict(sub.choices)
    from ppir.torch.run import build_parser as run_parser

    out["python -m ppir.run"] = run_parser()
    return out


def _numeric(a: argparse.Action) -> bool:
    return a.type in (integer, positive_int, number) or bool(
        _NUMERIC_METAVAR.match(a.metavar or "")
    )


def _units(a: argparse.Action, patterns=(_MEASURE, _COUNTED)) -> frozenset[str]:
    text = f"{a.help or ''} {a.metavar or ''}"
    return frozenset(m.group(0).lower() for p in patterns for m in p.finditer(text))


def _meaning(a: argparse.Action) -> tuple:
    """What an option means, as far as a program can tell: how it takes its value, where it
    goes (``cost_``/``tune_`` prefixes keep commands' namespaces apart and do not count), its
    type, its explicit metavar and, for a number, the units its help names."""
    kind = "flag" if a.nargs == 0 else "append" if _appends(a) else "value"
    dest = re.sub(r"^(cost|tune)_", "", a.dest)
    units = _units(a, (_MEASURE,)) if _numeric(a) else frozenset()
    return kind, dest, getattr(a.type, "__name__", a.type), a.metavar, units


def _appends(a: argparse.Action) -> bool:
    return isinstance(a, argparse._AppendAction) or getattr(a, "append", False)


def _uses():
    """(command, option string, action) for every option string that is not deprecated."""
    for name, p in _parsers().items():
        for a in p._actions:
            for o in a.option_strings:
                if o not in old_spellings(a) and o not in ("-h", "--help"):
                    yield name, o, a


def test_every_option_string_has_one_meaning_across_commands():
    meanings: dict[str, dict[tuple, list[str]]] = defaultdict(lambda: defaultdict(list))
    for cmd, opt, a in _uses():
        if cmd not in SAME_WORD_ALLOWED.get(opt, ()):
            meanings[opt][_meaning(a)].append(cmd)
    clashes = {o: dict(m) for o, m in meanings.items() if len(m) > 1}
    assert not clashes, f"one flag, several meanings: {clashes}"


def test_each_allowed_exception_still_differs():
    seen: dict[str, dict[str, tuple]] = defaultdict(dict)
    for cmd, opt, a in _uses():
        seen[opt][cmd] = _meaning(a)
    for opt, cmds in SAME_WORD_ALLOWED.items():
        others = {m for c, m in seen[opt].items() if c not in cmds}
        mine = {m for c, m in seen[opt].items() if c in cmds}
        assert mine and others and mine - others, f"{opt}: the exception is obsolete"


def test_every_numeric_option_states_its_unit():
    missing = []
    for cmd, opt, a in _uses():
        if not _numeric(a) or opt in UNITLESS_ALLOWED or not opt.startswith("--"):
            continue
        if not _units(a):
            missing.append(f"{cmd} {opt}: {a.help!r}")
    assert not missing, "numeric options without a unit in their help:\n" + "\n".join(missing)


def test_the_numeric_check_can_fail():
    p = argparse.ArgumentParser()
    a = p.add_argument("--wait", type=number, help="how long to wait")
    assert _numeric(a) and not _units(a)
    b = p.add_argument("--delay", metavar="T", help="delay in seconds")
    assert _NUMERIC_METAVAR.match(b.metavar) and _units(b) == {"seconds"}


def test_every_number_option_reads_ascii_digits_only(capsys):
    """``type=int`` took ``-P ٤`` for 4 (int() and float() read any Unicode digit) where
    ``-D P=٤`` is refused: every option of a number is read by a ppir.cli.argtypes type, with
    -D's words; a new ``type=int`` or ``type=float`` fails here (the walk, and the source, for
    parsers the walk does not build: the pytest plugin's)."""
    plain = [f"{cmd} {opt}" for cmd, opt, a in _uses() if a.type in (int, float)]
    assert not plain, f"options read with int() or float(): {plain}"
    typed = {a.type for _, _, a in _uses() if a.type is not None and _numeric(a)}
    assert {integer, positive_int, number} <= typed
    for t in typed:
        with pytest.raises(argparse.ArgumentTypeError, match=r"in ASCII digits, got '٤'"):
            t("٤")
    src = Path(__file__).resolve().parent.parent / "ppir"
    found = [
        f"{f.relative_to(src)}:{i}"
        for f in sorted(src.rglob("*.py"))
        for i, line in enumerate(f.read_text().splitlines(), 1)
        if re.search(r"type\s*=\s*(int|float)\b", line) and "``" not in line
    ]
    assert not found, f"type=int or type=float in {found}"
    with pytest.raises(SystemExit) as e:  # the same words as -D's refusal
        build_parser().parse_args(["fuzz", "1f1b", "--over", "P=2..4", "--examples", "٣"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "ppir fuzz: error: argument --examples: must be an integer in ASCII digits, got '٣'"
    )


def test_no_flag_is_taken_twice_on_any_parser():
    """argparse raises on a clash; building every parser is the check (and no silent skip is
    left in the cost options)."""
    assert len(_parsers()) >= 15


# ------------------------------------------------------------------ deprecated spellings
@pytest.mark.parametrize(
    "argv, dest, value",
    [
        (["check", "1f1b", "--progress", "relaxed"], "progress_model", "relaxed"),
        (["tune", "--ranks", "4"], "pp", "4"),
        (["profile", "--model", "m.py"], "module", "m.py"),
        (["profile", "--module", "m.py", "--model-opt", "a=1", "--model-opt", "b=2"], "module_opt",
         ["a=1", "b=2"]),
        (["launch", "-n", "2", "1f1b", "--model", "m.py"], "module", "m.py"),
        (["launch", "-n", "2", "1f1b", "--module", "m.py", "--model-opt", "a=1"], "module_opt",
         ["a=1"]),
    ],
)  # fmt: skip
def test_old_spellings_parse_as_the_new_ones_with_one_warning(argv, dest, value, capsys):
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    err = capsys.readouterr().err.splitlines()
    old = [a for a in argv if a.startswith("--") and a not in ("--module",)]
    assert len(err) == len(old) and all("is deprecated: use --" in line for line in err)


def test_new_spellings_warn_about_nothing(capsys):
    build_parser().parse_args(["check", "1f1b", "--progress-model", "relaxed"])
    build_parser().parse_args(["tune", "--pp", "4"])
    build_parser().parse_args(["profile", "--module", "m.py", "--module-opt", "a=1"])
    build_parser().parse_args(
        ["launch", "-n", "2", "1f1b", "--module", "m.py", "--module-opt", "a=1"]
    )
    assert capsys.readouterr().err == ""


def test_renamed_flags_help_names_the_old_spelling():
    p = argparse.ArgumentParser()
    p.add_argument("--new", "--old", action=Renamed, old="--old", help="the thing")
    p.add_argument("--on", "--yes", action=Renamed, old="--yes", flag=True, help="switch")
    text = p.format_help()
    assert "the thing (old spelling --old: deprecated)" in text
    assert p.parse_args(["--yes"]).on is True and p.parse_args([]).on is False


def test_renamed_refuses_a_bad_declaration():
    p = argparse.ArgumentParser()
    with pytest.raises(ValueError, match="old spellings"):
        p.add_argument("--old", action=Renamed, old="--old")
    with pytest.raises(ValueError, match="old spellings"):
        p.add_argument("--a", "--b", action=Renamed, old="--c")


def test_a_required_renamed_option_is_met_by_either_spelling(capsys):
    p = argparse.ArgumentParser()
    p.add_argument("--module", "--model", action=Renamed, old="--model", required=True)
    assert p.parse_args(["--model", "x"]).module == "x"
    assert p.parse_args(["--module", "y"]).module == "y"
    with pytest.raises(SystemExit):
        p.parse_args([])
    assert "the following arguments are required: --module/--model" in capsys.readouterr().err


def test_both_spellings_of_one_option_are_refused_as_ambiguous(capsys):
    """'ppir launch ... --module examples/gpt_model.py --model llama3-8b' (a user thinking of
    compile's transformer shape) ran with --module llama3-8b: the old spelling overwrote the
    new one and the run failed on a module that is not there."""
    argv = ["launch", "-n", "2", "1f1b", "--module", "m.py", "--model", "llama3-8b"]
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert "error: --module and --model are one option under its new and old spellings; " in err
    assert "comes in a --config file's [model] table" in err
    # either spelling alone, or one spelling twice, still parses (the last one given wins)
    for again in (["--module", "a.py", "--module", "b.py"], ["--model", "a.py", "--model", "b.py"]):
        assert build_parser().parse_args([*argv[:4], *again]).module == "b.py"
    # an appending option takes both spellings' values
    argv = ["profile", "--module", "m.py", "--module-opt", "a=1", "--model-opt", "b=2"]
    assert build_parser().parse_args(argv).module_opt == ["a=1", "b=2"]


def test_three_spellings_given_together_are_listed_once(capsys):
    """'ppir tune -P 4 --ranks 8' said '-P and --pp and --ranks are one option ...'."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune", "-P", "4", "--ranks", "8"])
    err = capsys.readouterr().err
    assert "error: -P, --pp and --ranks are one option under its new and old spellings" in err
