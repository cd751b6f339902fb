"""Starting the ``ppir`` command: its entry points import nothing heavy before :func:`main`
installs its Ctrl-C handler, and ``import ppir`` reaches the public API lazily (PEP 562)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent

# What the compiler's first import pulls in; none of it may precede main()'s handler.
HEAVY = ("lark", "networkx", "ppir.diagnostics", "ppir.pipeline", "ppir.frontend", "ppir.ir")


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def _console_script() -> tuple[str, str]:
    """The module and function pyproject.toml's ``ppir`` console script calls."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["ppir"].split(":")
    return module, function


def test_the_console_script_imports_nothing_heavy_before_main():
    module, function = _console_script()
    out = _python(
        f"import sys; from {module} import {function}; "
        f"print(' '.join(m for m in sys.modules if m.startswith({HEAVY!r})))"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [], f"imported before main(): {out.stdout}"


# A Ctrl-C arriving while the compiler's modules import: raised by the first import of any of
# them, wherever the entry point makes it.
INTERRUPT = f"""
import sys

class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name.startswith({HEAVY!r}):
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv = ["ppir", "list"]
"""


@pytest.mark.parametrize("entry", ["console script", "python -m ppir", "python -m ppir.cli"])
def test_ctrl_c_at_the_first_heavy_import_is_one_line_and_130(entry):
    if entry == "console script":  # what the generated 'ppir' script does
        module, function = _console_script()
        start = f"from {module} import {function}\nsys.exit({function}())"
    else:
        start = f"import runpy\nrunpy.run_module({entry.split()[-1]!r}, run_name='__main__')"
    out = _python(INTERRUPT + start)
    assert (out.returncode, out.stderr, out.stdout) == (130, "ppir: interrupted\n", "")


# A real SIGINT, sent where a KeyboardInterrupt stops being one: from a descriptor's
# __set_name__ as a class is made (as a dataclass's fields are), where Python wraps the
# exception in a RuntimeError with its traceback.  Sent at the import of a command's module,
# after main() has started.
SIGNAL_IN_SET_NAME = """
class Field:
    def __set_name__(self, owner, name):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass

class Made:
    x = Field()
"""


def test_a_real_ctrl_c_while_the_commands_import_is_one_line_and_130():
    module, function = _console_script()
    sent = textwrap.indent(SIGNAL_IN_SET_NAME, " " * 12)
    code = f"""
import os, signal, sys

class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "ppir.cli.check":
            sys.meta_path.remove(self)
{sent}
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv = ["ppir", "list"]
from {module} import {function}
sys.exit({function}())
"""
    out = _python(code)
    assert (out.returncode, out.stderr, out.stdout) == (130, "ppir: interrupted\n", "")


def test_the_command_itself_runs_with_pythons_own_ctrl_c(cli, monkeypatch):
    """The startup's handler is gone once the command runs (its KeyboardInterrupt is main's,
    or its own handler's: launch)."""
    import signal

    from ppir.cli import list as list_command

    seen = []
    monkeypatch.setattr(
        list_command, "run", lambda args: seen.append(signal.getsignal(signal.SIGINT)) or 0
    )
    assert cli("list")[0] == 0 and seen == [signal.default_int_handler]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_import_ppir_alone_imports_no_compiler_and_each_name_on_use():
    out = _python(
        "import sys, ppir; before = [m for m in sys.modules if m.startswith(('lark', "
        "'networkx', 'ppir.'))]; s = ppir.load('1f1b', P=2, M=2); "
        "print(before, ppir.compile(s).ok, 'ppir.pipeline' in sys.modules)"
    )
    assert out.stdout.split() == ["[]", "True", "True"], out.stderr


def test_every_public_name_resolves_and_is_listed():
    import ppir

    for name in ppir.__all__:
        assert getattr(ppir, name) is not None, name
    assert set(ppir.__all__) <= set(dir(ppir))
    assert callable(ppir.compile) and ppir.Schedule.__name__ == "Schedule"
    from ppir import PpirError, load

    assert load is ppir.load and issubclass(PpirError, Exception)
    with pytest.raises(AttributeError, match="module 'ppir' has no attribute 'lod'"):
        ppir.lod  # noqa: B018


def test_ppir_verify_stays_the_function_when_the_package_is_imported_first():
    out = _python(
        "import ppir, ppir.verify.lints, ppir.verify as v; "
        "import sys; print(callable(ppir.verify), ppir.verify is v, "
        "sys.modules['ppir.verify'].__name__)"
    )
    assert out.stdout.split() == ["True", "True", "ppir.verify"], out.stderr


def test_the_type_checkers_imports_name_what_the_lazy_table_loads():
    """ppir/__init__.py says each name's module twice: to the lazy loader (``_LAZY``) and to
    type checkers (the ``if TYPE_CHECKING:`` imports); they and ``__all__`` agree."""
    import ppir

    tree = ast.parse((ROOT / "ppir" / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.dump(n))
    typed = {a.name: n.module for n in block.body for a in n.names}
    assert typed == ppir._LAZY
    assert set(ppir.__all__) - {"__version__"} <= set(ppir._LAZY)
