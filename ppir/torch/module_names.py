"""The names a model file binds at its top level, read from its source without running it, so
that ``ppir launch`` says that a model file lacks ``build_stage``, ``make_batch`` or
``loss_fn`` before it starts any process (the ranks, which import the file, said it only
once torch and the file had loaded on each: about 5 s on this project's CI machine).

Only what is certain is reported: a file that binds names in ways a reading cannot follow
(``from x import *``, a module ``__getattr__``, ``globals()``, ``locals()``, ``exec``,
``sys.modules``, ``__dict__``, ``match``) or that does not parse is left to the ranks, which
import it and say what they find; a name declared ``global`` in a function counts as bound."""

from __future__ import annotations

import ast
from pathlib import Path

from ppir.diagnostics import error
from ppir.torch.signatures import REQUIRED, lacks_message

_OPAQUE_CALLS = frozenset({"globals", "locals", "exec", "eval", "setattr", "vars", "__import__"})
# attributes through which a module's names are set from outside its statements
# (sys.modules[__name__].x = f, module.__dict__[n] = f)
_OPAQUE_ATTRS = frozenset({"modules", "__dict__"})


def check_model_file(path: str) -> None:
    """A ppir error (exit 2), as the ranks would raise it once they had imported the file,
    when the model file's source binds some required function's name nowhere at its top
    level."""
    names = top_level_names(path)
    if names is None:
        return
    bound, defined = names
    missing = [n for n in REQUIRED if n not in bound]
    if missing:
        own = sorted(n for n in defined if not n.startswith("_"))
        raise error("bad-usage", lacks_message(path, missing, own))


def top_level_names(path: str | Path) -> tuple[set[str], set[str]] | None:
    """(every name the module at ``path`` binds at its top level, the functions and classes
    it defines there itself), or None when its source does not say for certain."""
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None  # the ranks report it, with the user's traceback
    bound: set[str] = set()
    functions: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, ast.Match):
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in _OPAQUE_CALLS:
                return None
        if isinstance(node, ast.Attribute) and node.attr in _OPAQUE_ATTRS:
            return None
        if isinstance(node, ast.Global):  # a function binds it at the top level when called
            bound.update(node.names)
    for stmt in _top_level(tree.body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(stmt.name)
            functions.add(stmt.name)
        elif isinstance(stmt, ast.ExceptHandler):
            bound.update([stmt.name] if stmt.name else [])
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        else:
            bound.update(_stored_names(stmt))
    if "__getattr__" in bound:
        return None
    return bound, functions


def _top_level(body: list):
    """The statements that run at the module's top level, those in if/try/with/for/while
    bodies included (a function's or class's body is not), and each ``except`` clause."""
    for stmt in body:
        yield stmt
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and not isinstance(
                stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            ):
                yield from _top_level(inner)
        for handler in getattr(stmt, "handlers", ()):  # try: each except clause
            yield handler
            yield from _top_level(handler.body)


def _stored_names(stmt: ast.stmt):
    """Names a top-level statement stores (assignment and loop targets, ``with ... as``, a
    walrus in its expressions), not those inside functions or classes it holds."""
    roots: list[ast.AST] = []
    if isinstance(stmt, ast.Assign):
        roots = [*stmt.targets, stmt.value] if stmt.value is not None else stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        roots = [stmt.target, stmt.value] if stmt.value is not None else [stmt.target]
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        roots = [stmt.target, stmt.iter]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        roots = [x for item in stmt.items for x in (item.context_expr, item.optional_vars) if x]
    elif isinstance(stmt, (ast.Expr, ast.If, ast.While)):
        roots = [stmt.value if isinstance(stmt, ast.Expr) else stmt.test]
    for root in roots:
        for node in ast.walk(root):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                yield node.id
