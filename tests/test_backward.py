"""Split backward without recomputation (:mod:`ppir.torch.backward`): I then W give exactly the
gradients of one whole backward, and those of torch.distributed.pipelining's own split
(``stage_backward_input``/``stage_backward_weight``, torch 2.13, used here as an oracle), on
stages with tuple outputs, an input that needs no gradient, a weight used twice, and a GPT
block; W never runs a node of the input path again."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from torch.autograd.graph import GradientEdge  # noqa: E402

from ppir.torch.backward import backward_full, backward_input, backward_weight  # noqa: E402


class Twice(nn.Module):
    """One Linear used at two depths: its parameters are reached through the input path."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        return self.lin(torch.tanh(self.lin(x)))


class TwoOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(6, 6), nn.Linear(6, 6), nn.Parameter(torch.randn(6))

    def forward(self, x, z):
        return self.a(x) * z, self.b(z) + self.c  # the second output does not depend on x


def gpt_block():
    import gpt_model

    return gpt_model.Block(16, 2)


MODULES = {
    "mlp": (
        lambda: nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(6, 6), nn.GELU())]),
        [(3, 6)],
    ),
    "gpt-block": (gpt_block, [(2, 5, 16)]),
    "twice": (Twice, [(3, 6)]),
    "two-outputs": (TwoOut, [(3, 6), (3, 6)]),
}


def run(mod, xs, grads, split: bool, needs_input_grad=True):
    params = [p for p in mod.parameters()]
    for p in params:
        p.grad = None
    leaves = [x.detach().clone().requires_grad_(needs_input_grad) for x in xs]
    y = mod(*leaves)
    ys = [y] if isinstance(y, torch.Tensor) else list(y)
    if split:
        dx, work = backward_input(ys, grads, leaves, params)
        assert all(p.grad is None for p in params), "I computed weight gradients"
        backward_weight(work)
    else:
        dx = backward_full(ys, grads, leaves)
        work = None
    return dx, [p.grad.clone() for p in params], work


@pytest.mark.parametrize("name", sorted(MODULES))
@pytest.mark.parametrize("needs_input_grad", [True, False])
def test_split_equals_whole_backward(name, needs_input_grad):
    make, shapes = MODULES[name]
    torch.manual_seed(0)
    mod = make()
    xs = [torch.randn(s) for s in shapes]
    with torch.no_grad():
        y = mod(*xs)
    grads = [torch.randn_like(t) for t in ([y] if isinstance(y, torch.Tensor) else y)]
    dx_ref, g_ref, _ = run(mod, xs, grads, split=False, needs_input_grad=needs_input_grad)
    dx, g, work = run(mod, xs, grads, split=True, needs_input_grad=needs_input_grad)
    for a, b in zip(g, g_ref):
        assert torch.equal(a, b)
    for a, b in zip(dx, dx_ref):
        assert (a is None) == (b is None) and (a is None or torch.equal(a, b))
    assert work.recompute == (name == "twice" and needs_input_grad)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_without_an_input_gradient_input_pass_runs_nothing(name):
    """A first stage's I (its input, the data, needs no gradient) runs no autograd node: it
    hands every output to W whole ('ppir profile' times such an I as the call alone)."""
    make, shapes = MODULES[name]
    torch.manual_seed(0)
    mod = make()
    xs = [torch.randn(s) for s in shapes]
    y = mod(*xs)
    ys = [y] if isinstance(y, torch.Tensor) else list(y)
    grads = [torch.randn_like(t) for t in ys]
    ran = []
    hooks = [t.grad_fn.register_prehook(lambda g: ran.append(1)) for t in ys]
    dx, work = backward_input(ys, grads, xs, list(mod.parameters()))
    assert dx == [None] * len(xs) and not ran and not work.starts
    assert len(work.whole) == len(ys) and all(o is y for (o, _), y in zip(work.whole, ys))
    assert not work.recompute
    backward_weight(work)
    assert len(ran) == len(ys)  # W ran them
    for h in hooks:
        h.remove()


@pytest.mark.parametrize("name", ["mlp", "gpt-block"])
def test_split_equals_torch_pipelining_split(name):
    from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight

    make, shapes = MODULES[name]
    torch.manual_seed(1)
    mod = make()
    xs = [torch.randn(s) for s in shapes]
    with torch.no_grad():
        g = torch.randn_like(mod(*xs))
    dx, mine, _ = run(mod, xs, [g], split=True)
    params = list(mod.parameters())
    for p in params:
        p.grad = None
    leaves = [x.detach().clone().requires_grad_(True) for x in xs]
    y = mod(*leaves)
    (tdx,), groups = stage_backward_input([y], [g], leaves, iter(params))
    stage_backward_weight(iter(params), groups)
    assert torch.allclose(dx[0], tdx, atol=1e-6)
    for a, p in zip(mine, params):
        assert torch.allclose(a, p.grad, atol=1e-6)


def test_weight_pass_runs_no_input_path_node_again():
    """Count the backward nodes each part runs: I + W runs each node at most once more than B
    (the frontier nodes, whose weight half W computes), and no GELU backward twice."""
    torch.manual_seed(0)
    mod = nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(6, 6), nn.GELU())])
    x = torch.randn(4, 6, requires_grad=True)
    y = mod(x)
    ran: list[str] = []
    seen = set()
    stack = [y.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        n.register_prehook(lambda g, n=n: ran.append(type(n).__name__))
        stack.extend(c for c, _ in n.next_functions)
    _, work = backward_input([y], [torch.ones_like(y)], [x], list(mod.parameters()))
    in_i = list(ran)
    ran.clear()
    backward_weight(work)
    assert in_i.count("GeluBackward0") == 3 and "GeluBackward0" not in ran
    assert ran.count("AddmmBackward0") == 3  # each Linear's weight half, once


class SharedCast(nn.Module):
    """A node on the parameters' side (``exp``, which saves its result) that two Linears of
    the same depth share, and a weight-only output that shares it too: W must keep it for the
    other W calls that run it."""

    def __init__(self, weight_only: bool):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 6) / 6)
        self.weight_only = weight_only

    def forward(self, x):
        w = self.w.exp()
        a, b = x @ w.T, torch.tanh(x) @ w
        return (a + b, w.sum()) if self.weight_only else a + b


@pytest.mark.parametrize("weight_only", [False, True])
def test_a_node_shared_by_two_weight_calls_is_kept_for_the_second(weight_only):
    torch.manual_seed(0)
    mod = SharedCast(weight_only)
    xs = [torch.randn(3, 6)]
    with torch.no_grad():
        y = mod(*xs)
    grads = [torch.randn_like(t) for t in ([y] if isinstance(y, torch.Tensor) else y)]
    dx_ref, g_ref, _ = run(mod, xs, grads, split=False)
    dx, g, work = run(mod, xs, grads, split=True)
    assert not work.recompute
    for a, b in zip([*dx, *g], [*dx_ref, *g_ref]):
        assert torch.allclose(a, b, atol=1e-6)


def test_weight_pass_frees_what_it_ran():
    """W of an MLP lets each Linear's saved input go (``retain_graph=False`` where no other W
    call needs the nodes): running a frontier node again afterwards fails."""
    torch.manual_seed(0)
    mod = nn.Sequential(*[m for _ in range(2) for m in (nn.Linear(6, 6), nn.GELU())])
    x = torch.randn(4, 6, requires_grad=True)
    y = mod(x)
    _, work = backward_input([y], [torch.ones_like(y)], [x], list(mod.parameters()))
    starts = [(n, g) for n, g, _, free in work.starts]
    assert len(starts) == 2 and all(free for *_, free in work.starts)
    backward_weight(work)
    assert work.starts == [] and work.whole == []
    node, g = starts[0]
    with pytest.raises(RuntimeError, match="second time"):
        torch.autograd.grad([GradientEdge(node, 0)], list(mod.parameters())[:1], list(g))


def test_weight_pass_accumulates_through_autograd():
    """W adds into ``param.grad`` as a whole backward does: in place over an existing
    gradient, and the parameters' post-accumulate hooks run (in W, not in I)."""
    torch.manual_seed(0)
    mod = nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.Linear(6, 6))
    params = list(mod.parameters())
    fired = []
    for p in params:
        p.register_post_accumulate_grad_hook(lambda p: fired.append(p))
    x = torch.randn(4, 6, requires_grad=True)
    for p in params:
        p.grad = torch.ones_like(p)
    before = [p.grad for p in params]
    ref = [
        torch.ones_like(p) + g for p, g in zip(params, torch.autograd.grad(mod(x).sum(), params))
    ]
    fired.clear()
    y = mod(x)
    _, work = backward_input([y], [torch.ones_like(y)], [x], params)
    assert fired == []
    backward_weight(work)
    assert len(fired) == len(params)
    for p, b, r in zip(params, before, ref):
        assert p.grad is b and torch.allclose(p.grad, r, atol=1e-6)


def test_input_pass_frees_what_only_it_needs():
    """I lets the saved tensors of the input path's own nodes go as each runs (each GELU's
    input), keeps those W needs (the Linears'), and leaves a graph whose input has a history
    of its own whole."""
    torch.manual_seed(0)
    mod = nn.Sequential(*[m for _ in range(2) for m in (nn.Linear(6, 6), nn.GELU())])
    params = list(mod.parameters())
    for leaf in (True, False):
        x0 = torch.randn(4, 6, requires_grad=True)
        x = x0 if leaf else x0 * 2
        y = mod(x)
        gelus = [y.grad_fn, y.grad_fn.next_functions[0][0].next_functions[1][0]]
        assert all(type(n).__name__ == "GeluBackward0" for n in gelus)
        _, work = backward_input([y], [torch.ones_like(y)], [x], params)
        for n in gelus:
            if leaf:
                with pytest.raises(RuntimeError, match="freed by backward_input"):
                    _ = n._saved_self
            else:
                assert n._saved_self is not None
        assert all(n._saved_mat1 is not None for n, *_ in work.starts)
        backward_weight(work)


def _storages(tensors, skip) -> dict:
    from torch.multiprocessing.reductions import StorageWeakRef

    out = {}
    for t in tensors:
        st = t.untyped_storage()
        if st.nbytes() and st.data_ptr() not in skip:
            out[st.data_ptr()] = (StorageWeakRef(st), st.nbytes())
    return out


def _saved(outputs) -> list:
    seen, stack, found = set(), [o.grad_fn for o in outputs], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in dir(node):
            if name.startswith("_saved_"):
                v = getattr(node, name)
                found += [
                    t for t in (v if isinstance(v, (tuple, list)) else (v,)) if torch.is_tensor(t)
                ]
        stack.extend(c for c, _ in node.next_functions)
    return found


def test_memory_model_split_is_what_the_input_pass_keeps():
    """ppir's memory model (:func:`ppir.analysis.memory.split_fractions`) against this module:
    on GPT blocks, F's saved tensors are the model's per-layer bytes, and after I what is left
    of them plus the gradients I keeps for W is ``1 - i_fraction`` of that (within 2 %)."""
    from ppir.analysis.memory import split_fractions
    from ppir.analysis.models import make_model

    h, heads, seq, b, layers = 64, 4, 32, 2, 2
    torch.manual_seed(0)
    import gpt_model

    mod = nn.Sequential(*[gpt_model.Block(h, heads) for _ in range(layers)])
    params = list(mod.parameters())
    skip = {p.untyped_storage().data_ptr() for p in params}
    x = torch.randn(b, seq, h, requires_grad=True)
    y = mod(x)
    saved = _storages(_saved([y]), skip)
    f_bytes = sum(n for _, n in saved.values())
    shape = make_model(
        layers=layers,
        hidden=h,
        heads=heads,
        seq=seq,
        mbs=b,
        dtype="fp32",
        vocab=64,
        tied=0,
        dropout=0,
        flash=1,
    )
    assert abs(f_bytes - layers * shape.activation_bytes_per_layer()) / f_bytes < 0.02
    _, work = backward_input([y], [torch.ones_like(y)], [x], params)
    grads = [g for _, gs, _, _ in work.starts for g in gs if g is not None]
    grads += [g for _, g in work.whole if g is not None]
    alive = {p for p, (ref, _) in saved.items() if not ref.expired()}
    kept = _storages(grads, skip | alive)  # a freed saved tensor's memory may hold a gradient
    left = sum(n for p, (_, n) in saved.items() if p in alive) + sum(n for _, n in kept.values())
    measured = 1 - left / f_bytes
    assert abs(measured - float(split_fractions(shape))) < 0.02, (measured, split_fractions(shape))
    backward_weight(work)


@pytest.mark.parametrize("act,kept", [("gelu_new", 4), ("gelu_pytorch_tanh", 1)])
def test_hf_activation_keeps_the_tensors_the_memory_model_counts(act, kept):
    """``ModelShape.act_tensors``: HF GPT-2's ``gelu_new`` (elementwise ops) keeps four tensors
    of the FFN width for backward, the fused ``gelu_pytorch_tanh`` one (its input)."""
    acts = pytest.importorskip("transformers.activations")
    h = torch.randn(4, 256, requires_grad=True)  # the activation's input (fc1's output)
    y = acts.ACT2FN[act](h)
    sizes = [n for _, n in _storages(_saved([y]), set()).values()]
    full = h.untyped_storage().nbytes()
    assert sizes.count(full) == kept and all(n == full or n <= 8 for n in sizes)  # + scalars
