"""Every JSON format ppir writes is listed, with its versioning rule, in docs/cli-output.md:
the list is checked against the format strings in the source, so that a new format, or a
version bumped in the code only, cannot leave the document behind."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "cli-output.md"
_NAME = re.compile(r"ppir\.[a-z_]+/[0-9]+")


def _format_string(node) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if _NAME.fullmatch(node.value):
            return node.value
    return None


def formats_in(tree: ast.AST) -> set[str]:
    """The ``ppir.NAME/N`` strings a module writes as a format: the value of a ``*FORMAT``
    constant, or of a ``"format"`` key in a dict literal (a message that only names an old
    format, ``not a ppir.plan/2 plan (... 'ppir.plan/1')``, is neither)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = any(isinstance(t, ast.Name) and t.id.endswith("FORMAT") for t in targets)
            if named and (found := _format_string(node.value)):
                out.add(found)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if (
                    _format_string(value)
                    and isinstance(key, ast.Constant)
                    and key.value == "format"
                ):
                    out.add(value.value)
    return out


def written_formats() -> dict[str, list[str]]:
    """Each format the package writes, with the modules that write it (``ppir/`` and the
    backends, which install as ``ppir.backends``)."""
    found: dict[str, list[str]] = {}
    for folder in ("ppir", "backends"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "backends" in path.relative_to(ROOT).parts[1:2]:  # a link to backends/ in ppir/
                continue
            for name in formats_in(ast.parse(path.read_text(), str(path))):
                found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def documented_formats() -> list[str]:
    """The first column of the table in the doc's "JSON output and its versions" section."""
    text = DOC.read_text()
    section = text.split("## JSON output and its versions", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| `(ppir\.[^`]+)` \|", section, re.M)]


def test_the_doc_lists_every_json_format_ppir_writes_and_no_other():
    written = written_formats()
    listed = documented_formats()
    assert len(listed) == len(set(listed)), listed
    assert {name: written.get(name) for name in set(written) - set(listed)} == {}, (
        f"written but not listed in {DOC.name}"
    )
    assert sorted(set(listed) - set(written)) == [], f"listed in {DOC.name} but not written"
    # the collector sees the formats each kind of source writes them in
    assert {"ppir.viz/2", "ppir.tune/2", "ppir.trace/1", "ppir.estimate/2"} <= set(written)


def test_the_collector_tells_a_written_format_from_one_a_message_names():
    tree = ast.parse(
        "PLAN_FORMAT = 'ppir.plan/2'\n"
        "doc = {'format': 'ppir.tune/2', 'note': 'ppir.old/1'}\n"
        "raise ValueError('not a ppir.plan/2 plan (format = \\'ppir.plan/1\\')')\n"
        "nested = {'otherData': {'format': 'ppir.trace/1'}}\n"
    )
    assert formats_in(tree) == {"ppir.plan/2", "ppir.tune/2", "ppir.trace/1"}
