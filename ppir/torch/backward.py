"""The backward of one stage for one microbatch: whole (B), or split into the input part (I)
and the weight part (W) without computing anything twice.

Split backward (zero-bubble schedules).  Let X be the autograd nodes from which the stage's
input is reachable: the nodes I must run to get the input gradient.  A node ``u`` in X whose
next edges also lead, outside X, to parameters is a *frontier* node (e.g. the ``addmm`` of a
Linear: its edges go to the input path and to the weight and bias).  Contract:

* :func:`backward_input` runs ``autograd.grad(outputs, inputs)`` once, with pre-hooks on the
  frontier nodes that keep the gradients at their outputs.  The engine computes a node's
  outputs only along edges it needs, so no weight gradient is computed here.
* :func:`backward_weight` starts at each frontier node with the kept gradient and asks only for
  the parameters its edges outside X reach: the engine runs the weight half of that node and
  the parameter-only nodes behind it (``TBackward``, casts, ...), never a node of X again.
  Backward functions are linear in their incoming gradient, so parameters reached from several
  frontier nodes get the sum of the parts, as a whole backward gives.
* Stage outputs that do not depend on the input (and every output of a stage whose input needs
  no gradient, e.g. stage 0) are weight-only: W backpropagates them whole.
* If a frontier node's parameters are also reachable through its X edges (one weight used at
  two depths of the stage), a per-node start would count a path twice; then W falls back to
  one backward from the outputs to the parameters (correct, but it repeats I's work), and
  :attr:`WeightWork.recompute` says so.

Memory, as a whole backward frees it: I runs with ``retain_graph=True`` (W needs the frontier
nodes' saved tensors), but each node of X that W never runs (a GELU's saved input, ...) lets
its saved tensors go as soon as it has run (a post-hook registers a pack hook that drops them;
unpacking one after that raises), unless an input has a history of its own (X may then reach
into another graph).  W frees what it runs (``retain_graph=False``: each Linear's saved input
goes as its weight gradient comes) except the nodes that two of its calls run (a weight cast
shared by two Linears, ...), which it keeps for the other call.  Holding all of it to the end
of W instead cost I + W 1.2-1.3 x B on CPU (8 x (Linear(512) + GELU), batch 256), in the page
faults of memory a whole backward reuses.  Gradients reach ``param.grad`` through
autograd's own accumulation (``torch.autograd.backward(..., inputs=params)``), as in a whole
backward: created when ``None``, added in place otherwise, the parameters' hooks run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.autograd.graph import GradientEdge, get_gradient_edge


@dataclass
class WeightWork:
    """What W needs, kept by I: frontier starts and weight-only outputs."""

    # (node, grads at its outputs, params it reaches, whether W may free what it runs)
    starts: list = field(default_factory=list)
    whole: list = field(default_factory=list)  # (output tensor, its gradient): weight-only roots
    params: list = field(default_factory=list)
    recompute: bool = False
    free_whole: bool = True  # whether W may free what the backward of ``whole`` runs


def backward_full(outputs: list, grads: list, inputs: list) -> list:
    """B: backpropagate ``outputs`` (with ``grads``; ``None`` for a scalar loss) into the
    parameters; returns the gradient of each input (``None`` where it has none)."""
    if outputs:
        torch.autograd.backward(outputs, grad_tensors=grads)
    return [x.grad if x.requires_grad else None for x in inputs]


def _node(t: torch.Tensor):
    return t.grad_fn if t.grad_fn is not None else get_gradient_edge(t).node


def _postorder(roots: list) -> tuple[list, dict]:
    """Every node reachable from ``roots``, children before parents, and each node's children
    (``next_functions`` builds a new tuple at every access: read it once)."""
    order, kids_of = [], {}
    stack = [(r, False) for r in roots]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if n in kids_of:
            continue
        kids = [c for c, _ in n.next_functions if c is not None]
        kids_of[n] = kids
        stack.append((n, True))
        stack.extend((c, False) for c in kids if c not in kids_of)
    return order, kids_of


def _plan(outputs: list, inputs: list, params: list):
    """(frontier [(node, params reached outside X, private)], weight-only outputs, whole
    private, the other nodes of X (which W never runs), entangled).  Parameter sets are int
    bitmasks (no per-node set objects: this runs at every I).  A W call is *private* when no
    node it runs (other than parameter leaves) is run by another W call: it may then free the
    graph behind it (``retain_graph=False``)."""
    input_nodes = {_node(x) for x in inputs if x.requires_grad}
    leaf_bit, param_bit = {}, {}  # leaf parameters by id (its AccumulateGrad's .variable)
    for i, p in enumerate(params):
        if p.grad_fn is None:
            leaf_bit[id(p)] = leaf_bit.get(id(p), 0) | 1 << i
        else:
            param_bit[p.grad_fn] = param_bit.get(p.grad_fn, 0) | 1 << i
    roots = [o.grad_fn for o in outputs]
    order, kids_of = _postorder([r for r in roots if r is not None])
    in_x: dict = {}
    reach: dict = {}  # node -> bitmask of the parameters reachable from it
    leaves = set()
    for n in order:
        kids = kids_of[n]
        x = n in input_nodes
        mask = param_bit.get(n, 0)
        if kids:
            for c in kids:
                x = x or in_x[c]
                mask |= reach[c]
        elif leaf := leaf_bit.get(id(getattr(n, "variable", None)), 0):
            mask |= leaf
            leaves.add(n)
        in_x[n] = x
        reach[n] = mask
    frontier, entangled, runs, x_only = [], False, [], []
    for n, x_node in in_x.items():
        if not x_node or n in input_nodes:
            continue
        outside = through_x = 0
        heads = []
        for c in kids_of[n]:
            if in_x[c]:
                through_x |= reach[c]
            elif reach[c]:
                outside |= reach[c]
                heads.append(c)
        if outside:
            frontier.append((n, [i for i in range(len(params)) if outside >> i & 1]))
            runs.append(heads)
            entangled = entangled or bool(outside & through_x)
        else:
            x_only.append(n)
    whole = [i for i, r in enumerate(roots) if r is not None and not in_x[r] and reach[r]]
    runs.append([roots[i] for i in whole])
    # Which W call runs each node outside X: the nodes leading to parameters from a start's
    # edges outside X (from the weight-only outputs for the last call).
    ran: list = []
    users: dict = {}
    for heads in runs:
        mine, stack = set(), list(heads)
        while stack:
            m = stack.pop()
            if m in mine or m in leaves:
                continue
            mine.add(m)
            users[m] = users.get(m, 0) + 1
            stack.extend(c for c in kids_of[m] if reach[c])
        ran.append(mine)
    private = [all(users[m] == 1 for m in mine) for mine in ran]
    frontier = [(n, ps, private[k]) for k, (n, ps) in enumerate(frontier)]
    if any(x.requires_grad and x.grad_fn is not None for x in inputs):
        x_only = []  # X may reach into the graph that made the inputs: leave it whole
    return frontier, whole, private[-1], x_only, entangled


def backward_input(outputs: list, grads: list, inputs: list, params: list):
    """I: the gradient of each input (``None`` where it has none) and the :class:`WeightWork`
    that W completes.  ``outputs`` are the stage's output tensors that require grad, ``grads``
    their gradients (``None`` for a scalar loss)."""
    work = WeightWork(params=params)
    if not outputs:
        return [None] * len(inputs), work
    needs = [x for x in inputs if x.requires_grad]
    if not needs:  # no input gradient (a first stage): W backpropagates every output whole
        work.whole = list(zip(outputs, grads))
        return [None] * len(inputs), work
    frontier, whole, free_whole, x_only, entangled = _plan(outputs, inputs, params)
    if entangled:
        work.recompute = True
        work.whole = list(zip(outputs, grads))
    else:
        work.whole = [(outputs[i], grads[i]) for i in whole]
        work.free_whole = free_whole
    kept: dict = {}
    hooks = []
    if not entangled:
        for n, _, _ in frontier:
            hooks.append(n.register_prehook(lambda g, n=n: kept.__setitem__(n, g)))
        for n in x_only:
            hooks.append(n.register_hook(lambda gi, go, n=n: _drop_saved(n)))
    connected = [i for i, o in enumerate(outputs) if i not in set(whole)]
    try:
        if needs and connected:
            got = torch.autograd.grad(
                [outputs[i] for i in connected],
                needs,
                grad_outputs=[grads[i] for i in connected] if grads[0] is not None else None,
                retain_graph=True,
                allow_unused=True,
            )
        else:
            got = [None] * len(needs)
    finally:
        for h in hooks:
            h.remove()
    if not entangled:
        plan = {n: (ps, free) for n, ps, free in frontier}
        # In the order I reached them (nearest the outputs first, as a whole backward runs
        # them): W takes the starts back in that order (see backward_weight).
        work.starts = [(n, g, [params[i] for i in plan[n][0]], plan[n][1]) for n, g in kept.items()]
        work.starts.reverse()
    it = iter(got)
    return [next(it) if x.requires_grad else None for x in inputs], work


def _saved_gone(_):
    raise RuntimeError(
        "ppir: this node's saved tensors were freed by backward_input (only the input "
        "gradient needed them): backward through a stage's input path once"
    )


_SAVED_NAMES: dict = {}


def _drop_saved(node) -> None:
    """Free the tensors ``node`` saved for its backward, once it has run in I and nothing
    will run it again (what ``retain_graph=False`` does, node by node): the pack hook drops
    the tensor, the unpack hook says why it is gone."""
    names = _SAVED_NAMES.get(type(node))
    if names is None:
        names = _SAVED_NAMES[type(node)] = [a for a in dir(node) if a.startswith("_raw_saved_")]
    for name in names:
        saved = getattr(node, name)
        for st in saved if isinstance(saved, (list, tuple)) else (saved,):
            try:
                st.register_hooks(_drop, _saved_gone)
            except RuntimeError:  # None, already freed, or hooks of its own: leave it
                pass


def _drop(_):
    return None


def backward_weight(work: WeightWork) -> None:
    """W: add the weight gradients into ``param.grad`` (see the module docstring).

    ``work`` is used up: each kept gradient is let go as soon as its start has run, and each
    start frees the saved tensors of what it ran where no other start needs them, so the next
    weight gradient takes their memory."""
    starts, work.starts = work.starts, []
    while starts:
        node, grads, ps, free = starts.pop()
        edges = [GradientEdge(node, k) for k, g in enumerate(grads) if g is not None]
        gs = [g for g in grads if g is not None]
        del grads
        if edges:
            torch.autograd.backward(edges, gs, retain_graph=not free, inputs=ps)
        del gs
    whole, work.whole = work.whole, []
    if whole and work.params:
        outs = [o for o, _ in whole]
        gs = [g for _, g in whole]
        del whole
        torch.autograd.backward(
            outs,
            gs if gs[0] is not None else None,
            retain_graph=not work.free_whole,
            inputs=work.params,
        )
