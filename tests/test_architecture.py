"""The shape of the code: backends are leaves, dependency rules live in one module, modules
stay small, and a third-party backend plugs in through the entry-point group."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 400
DEPS = ROOT / "ppir" / "ir" / "deps.py"


def _py(*folders: str):
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_nothing_in_ppir_imports_a_backend():
    offenders = {
        str(p.relative_to(ROOT)): sorted(m for m in _imports(p) if m.startswith("ppir.backends"))
        for p in _py("ppir")
    }
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, offenders


def test_no_module_is_over_400_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in _py("ppir", "backends")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


def _code_only(path: Path) -> str:
    """The source with strings and comments blanked out (prose may name F(s-1, m))."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type in (tokenize.STRING, tokenize.COMMENT):
            continue
        out.append(tok.string)
    return " ".join(out)


# dependency rules written by hand (on the code, strings and comments blanked): they belong to
# ppir/ir/deps.py
_RULE = re.compile(
    r"(\.\s*stage|\bstage|\bst|\bs|\bps|\bb)\s*[+-]\s*1\b"  # the stage before / after; b's maker
    r"|\b(s|st|stage)\s*%\s*span\b|\bspan\s*-\s*1\b|\bstage\s*-\s*span\b"  # pipeline ends: bounds
    r"|\bstages\s*//\s*(copies|pipelines|pipes)\b"  # pipeline_length
    r"|\bkey\s*\[\s*:\s*:\s*2\s*\]"  # "the same (stage, mb)": what an op consumes, inputs
    r"|\(\s*(OpKind\s*\.\s*)?B\s*,\s*(OpKind\s*\.\s*)?I\s*\)"  # the backward kinds: BACKWARD
    # deps' stage-offset tables: read elsewhere they mean an offset applied by hand; hot loops
    # take deps.input_table, crossing_table or peer_table, the offsets resolved per program
    r"|\b(INPUTS|CROSSES_IN|CROSSES_OUT|PEER_DELTA)\b"
)
# what a module other than deps.py may write, each once, blanks dropped: types.py's
# BACKWARD_KINDS, the tuple deps.BACKWARD is (deps imports types)
_RULE_ALLOWED = {"ppir/ir/types.py": ("(OpKind.B,OpKind.I)",)}


def _rules(path: Path) -> list[str]:
    """The hand-written rules of ``path`` beyond what it may write (:data:`_RULE_ALLOWED`)."""
    left = list(_RULE_ALLOWED.get(str(path.relative_to(ROOT)), ()))
    out = []
    for m in _RULE.finditer(_code_only(path)):
        hit = re.sub(r"\s", "", m.group(0))
        if hit in left:
            left.remove(hit)
        else:
            out.append(hit)
    return out


def test_no_dependency_rule_outside_the_semantics_module():
    hits = {str(p.relative_to(ROOT)): _rules(p) for p in _py("ppir", "backends") if p != DEPS}
    hits = {k: v for k, v in hits.items() if v}
    assert not hits, hits
    assert _RULE.search(_code_only(DEPS))  # the rules are there


# "2 stage(s)": ppir.diagnostics.count writes a message's plural ("1 stage", "2 stages");
# "time (s)", a unit after a word and a space, is seconds and stays
_PLURAL_HEDGE = re.compile(r"\((?:s|es)\)")
_UNIT_LABEL = re.compile(r"\w \(s\)")


def _message_strings(path: Path):
    """(line, text) of each string literal (f-string parts too) that is not a docstring."""
    tree = ast.parse(path.read_text(), str(path))
    docs = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


def test_no_message_hedges_its_plural_with_s_in_parentheses():
    hits = [
        f"{p.relative_to(ROOT)}:{line}: {text!r}"
        for p in _py("ppir", "backends")
        for line, text in _message_strings(p)
        if _PLURAL_HEDGE.search(_UNIT_LABEL.sub("", text))
    ]
    assert not hits, "write the plural with ppir.diagnostics.count:\n" + "\n".join(hits)


def test_a_third_party_backend_is_found_and_runs(tmp_path, monkeypatch, cli, capsys):
    pkg = tmp_path / "mybackend.py"
    pkg.write_text(
        "class Backend:\n"
        "    name = 'mine'\n"
        "    help = 'counts the messages of the compiled program'\n"
        "    def add_arguments(self, group):\n"
        "        group.add_argument('--mine-tag', default='x')\n"
        "    def run(self, compiled, args):\n"
        "        print('mine', args.mine_tag, len(compiled.graph.messages))\n"
        "        return 0\n"
        "BACKEND = Backend()\n"
    )
    dist = tmp_path / "mybackend-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mybackend\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[ppir.backends]\nmine = mybackend:BACKEND\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from ppir import plugins

    plugins._registry.cache_clear()
    try:
        assert "mine" in plugins.available_backends()
        assert {"cost", "cuda", "torch-csv"} <= set(plugins.available_backends())
        code, out, err = cli(
            "compile", "1f1b", "-D", "P=2", "-D", "M=2", "--backend", "mine", "--mine-tag", "t"
        )
        assert code == 0, err
        assert out.split() == ["mine", "t", "4"]
        # 'ppir compile --help' lists what is installed, each with its own help line (was:
        # cost and cuda, written into the description, while --backend named three)
        with pytest.raises(SystemExit):
            cli("compile", "--help")
        text = capsys.readouterr().out
        described = text[text.index("installed here:") : text.index("examples:")].splitlines()
        assert [line.split()[0] for line in described[1:] if line] == sorted(
            plugins.available_backends()
        )
        assert "  mine       counts the messages of the compiled program" in described
        assert "  torch-csv  write a torch.distributed.pipelining schedule CSV" in text
    finally:
        sys.modules.pop("mybackend", None)
        plugins._registry.cache_clear()


def test_an_unknown_backend_is_a_usage_error_naming_the_installed_ones(cli):
    code, _, err = cli("compile", "1f1b", "--backend", "cots")
    assert code == 2 and "did you mean 'cost'?" in err and "Traceback" not in err


@pytest.mark.parametrize("module", ["ppir", "ppir.cli.main", "ppir.pipeline", "ppir.verify"])
def test_the_compiler_imports_without_torch(module):
    import subprocess

    code = (  # ppir's public names import on first use: each of them, too
        "import sys, importlib; sys.modules['torch'] = None; "
        f"m = importlib.import_module({module!r}); "
        "[getattr(m, name) for name in getattr(m, '__all__', ())]; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
