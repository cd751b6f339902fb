"""The examples of docs/testing.md do what the page says: its code blocks are taken from the page
and run (with a few hypothesis examples each), the failure it shows is what ppir reports for
examples/bad_schedule.pps, the ``ppir fuzz`` session prints what the page shows with the exit
status it shows, and the messages it quotes are ppir's.  Editing the page or the code behind it
without the other fails here."""

from __future__ import annotations

import shlex
import textwrap
from pathlib import Path

import pytest
from hypothesis import settings

from ppir.diagnostics import PpirError
from ppir.testing import assert_schedule_ok, check_schedule, property, shapes

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "testing.md").read_text()
PROSE = " ".join(DOC.split())  # quoted messages may wrap across lines
EXAMPLE = ROOT / "examples" / "test_my_schedule.py"


def _blocks(lang: str) -> list[str]:
    """The page's ```LANG blocks, dedented (two of them sit in a list item)."""
    found, current, kind = [], None, ""
    for line in DOC.splitlines(keepends=True):
        fence = line.strip()
        if current is None and fence.startswith("```"):
            current, kind = [], fence[3:]
        elif current is not None and fence == "```":
            if kind == lang:
                found.append(textwrap.dedent("".join(current)))
            current = None
        elif current is not None:
            current.append(line)
    return found


def _python(start: str) -> str:
    [block] = [b for b in _blocks("python") if b.lstrip().startswith(start)]
    return block


def _text(start: str) -> str:
    [block] = [b for b in _blocks("") if b.lstrip().startswith(start)]
    return block


RUN = ("from pathlib", "from hypothesis", "import ppir", "def test_defaults")


def test_every_python_block_is_run_here():
    assert sorted(b.lstrip().split("\n", 1)[0] for b in _blocks("python")) == sorted(
        _python(start).lstrip().split("\n", 1)[0] for start in RUN
    )


def test_the_excerpt_is_from_my_schedule_pps():
    lines = (ROOT / "examples" / "my_schedule.pps").read_text().splitlines()
    at = 0
    for line in _text("schedule my_schedule").splitlines():
        if line.strip() != "...":
            at = lines.index(line, at) + 1  # in the file, in this order


def test_the_one_line_property_and_the_spelled_out_test_run(monkeypatch):
    monkeypatch.setitem(property._DEFAULT_EXAMPLES, "n", 5)  # what --ppir-examples 5 sets
    namespace: dict = {"__file__": str(EXAMPLE)}
    exec(compile(_python("from pathlib"), "docs/testing.md (property_test)", "exec"), namespace)  # noqa: S102
    namespace["test_my_schedule"]()
    by_hand = _python("from hypothesis")
    assert "@settings(deadline=None)" in by_hand
    by_hand = by_hand.replace(
        "@settings(deadline=None)", "@settings(deadline=None, max_examples=5)"
    )
    exec(compile(by_hand, "docs/testing.md (by hand)", "exec"), namespace)  # noqa: S102
    namespace["test_my_schedule"]()


def test_the_failure_shown_is_what_the_property_reports():
    shown = _text("bad_schedule(P=2, M=3)").rstrip("\n")
    r = check_schedule(ROOT / "examples" / "bad_schedule.pps", max_peak_activations="P", P=2, M=3)
    assert r.render() == shown
    with pytest.raises(AssertionError) as e:
        assert_schedule_ok(
            ROOT / "examples" / "bad_schedule.pps", max_peak_activations="P", P=2, M=3
        )
    assert str(e.value) == shown


def test_the_fuzz_session_prints_what_the_page_shows(cli, monkeypatch):
    session = _text("$ ppir fuzz").splitlines()
    command, *printed = session[: session.index("$ echo $?")]
    status = int(session[session.index("$ echo $?") + 1])
    monkeypatch.chdir(ROOT)
    code, out, _ = cli(*shlex.split(command.removeprefix("$ ppir ")))
    assert (code, out) == (status, "\n".join(printed).rstrip("\n") + "\n")


def test_the_mutations_example_runs():
    namespace: dict = {}
    exec(compile(_python("import ppir"), "docs/testing.md (mutations)", "exec"), namespace)  # noqa: S102

    class MyExecutorError(Exception):
        pass

    class my_executor:  # refuses what the verifier refuses, as the property asks
        @staticmethod
        def run(schedule):
            if not check_schedule(schedule).ok:
                raise MyExecutorError

    namespace.update(MyExecutorError=MyExecutorError, my_executor=my_executor)
    settings(max_examples=10)(namespace["test_executor_agrees"])()


def test_the_fixture_example_runs(monkeypatch):
    monkeypatch.chdir(ROOT)  # its path is relative to the repository
    namespace: dict = {}
    exec(compile(_python("def test_defaults"), "docs/testing.md (fixture)", "exec"), namespace)  # noqa: S102
    namespace["test_defaults"](assert_schedule_ok)  # the fixture is this function


@pytest.mark.parametrize(
    "value,quoted",
    [
        ("1e3", "'1e3' is not an integer"),
        ("1e3", "hint: write it as 1000"),
        ("٤", "a number must be an integer in ASCII digits, got '٤'"),
    ],
)
def test_quoted_messages_are_what_ppir_prints(value, quoted):
    assert quoted in PROSE
    with pytest.raises(PpirError) as e:
        shapes("examples/my_schedule.pps", P=value, M="P..8P")
    assert quoted in str(e.value) and e.value.kind == "bad-range"
