"""How deep a parse tree may be, checked without recursion before anything recurses over it
(lark's transformer, the compiler of expressions, their evaluation all recurse per level)."""

from __future__ import annotations

from lark import Tree

from ppir.diagnostics import PpirError, error
from ppir.ir import Span

MAX_NESTING = 150
"""How deep the parse tree of a file may be: a chain of 150 operators (``1+1+...``), 70 nested
blocks.  Deeper trees are refused before they are transformed, compiled or evaluated, which
all recurse once or more per level."""

_EXPR_RULES = frozenset(
    ("add", "sub", "mul", "floordiv", "mod", "and_", "or_", "cmp", "neg", "not_", "call")
)


def check_nesting(tree, path: str, text: str) -> None:
    """A located ``too-deep`` error when the tree is deeper than :data:`MAX_NESTING`; it points
    at the start of the construct that nests: the outermost expression of a deep expression,
    or the outermost statement of deeply nested blocks."""
    height: dict[int, int] = {}
    stack = [(tree, False)]
    while stack:  # iterative post-order: no recursion, whatever the depth
        node, done = stack.pop()
        kids = [c for c in node.children if isinstance(c, Tree)]
        if done:
            height[id(node)] = 1 + max((height[id(c)] for c in kids), default=0)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in kids)
    if height[id(tree)] <= MAX_NESTING:
        return
    node = tree
    while True:
        kids = [c for c in node.children if isinstance(c, Tree)]
        if not kids or node.data in _EXPR_RULES:
            break
        tallest = max(kids, key=lambda c: height[id(c)])
        if node.data in ("if_stmt", "for_stmt") and tallest.data in ("block", "if_stmt"):
            break
        node = tallest
    meta = node.meta
    line, col = getattr(meta, "line", 1), getattr(meta, "column", 1)
    raise too_deep(Span(path, line, col, line, col + 1, text), blocks=node.data not in _EXPR_RULES)


def too_deep(span: Span, blocks: bool = False) -> PpirError:
    hint = (
        "flatten the nested blocks (e.g. join conditions with 'and')"
        if blocks
        else "split the expression with 'let' or 'def'"
    )
    return error(
        "too-deep", f"this nests deeper than ppir reads ({MAX_NESTING} levels)", span, hints=[hint]
    )
