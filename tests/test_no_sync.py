"""``PipelineRuntime.no_sync``: gradient accumulation with one data-parallel reduction, as
DDP's ``no_sync``.  Steps inside the block neither reduce over the replicas nor sum tied
copies; the first step after it reduces and sums everything accumulated since the last
synchronised step.  Here the reducer runs over a one-process gloo group standing for two
replicas (so a reduction halves what this process holds) and with two copies of a tied
parameter on one rank (their sum needs no message); tests/test_executor_dp.py runs the same
against single-process training on PP=2 x DP=2 processes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
nn = torch.nn


def _reducer(modules, tied=(), dp_size=2):
    from ppir.torch.reduce import GradReducer

    program = [{"op": "reduce", "chunk": c} for c in range(len(modules))]
    return GradReducer(modules, program, dp_group=dist.group.WORLD, dp_size=dp_size, tied=tied)


def _step(reducer, module, x, chunk=0):
    reducer.begin()
    module(x).pow(2).sum().backward()
    reducer.post(chunk)
    posted = len(reducer.pending)
    reducer.finish()
    return posted


def test_steps_inside_no_sync_post_nothing_and_the_next_step_reduces_all(one_rank_group):
    torch.manual_seed(0)
    lin = nn.Linear(3, 2)
    xs = [torch.randn(4, 3) for _ in range(3)]
    local = nn.Linear(3, 2)
    local.load_state_dict(lin.state_dict())
    for x in xs:
        local(x).pow(2).sum().backward()

    reducer = _reducer([lin])
    reducer.sync = False
    assert [_step(reducer, lin, x) for x in xs[:2]] == [0, 0]
    partial = nn.Linear(3, 2)
    partial.load_state_dict(lin.state_dict())
    for x in xs[:2]:
        partial(x).pow(2).sum().backward()
    assert torch.equal(lin.weight.grad, partial.weight.grad)  # local, not halved
    reducer.sync = True
    assert _step(reducer, lin, xs[2]) == 1  # one reduction for the three steps
    assert torch.allclose(lin.weight.grad, local.weight.grad / 2)
    assert torch.allclose(lin.bias.grad, local.bias.grad / 2)


class Tied(nn.Module):
    """Two copies of one tied weight on this rank (an embedding and its head)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.randn(3, 3))
        self.b = nn.Parameter(self.a.detach().clone())

    def forward(self, x):
        return (x @ self.a).tanh() @ self.b


@pytest.mark.parametrize("window", [1, 2, 3])
def test_tied_copies_summed_once_for_a_window_equal_summing_every_step(one_rank_group, window):
    from ppir.torch.tied import TiedCopy

    torch.manual_seed(1)
    xs = [torch.randn(5, 3) for _ in range(window + 1)]
    start = Tied().state_dict()
    carried = torch.randn(3, 3)  # gradients from before: the copies carry equal ones
    runs = {}
    for mode in ("every step", "no_sync"):
        m = Tied()
        m.load_state_dict(start)
        m.a.grad, m.b.grad = carried.clone(), carried.clone()
        # one replica: two stood for by one process would halve the carried gradient in the
        # window's reduction, where real ones, holding it equal, average it back to itself
        reducer = _reducer([m], [TiedCopy("w", [m.a, m.b], [])], dp_size=1)
        for i, x in enumerate(xs):
            reducer.sync = mode == "every step" or i == len(xs) - 1
            _step(reducer, m, x)
        runs[mode] = (m.a.grad, m.b.grad)
    (a, b), (a2, b2) = runs["every step"], runs["no_sync"]
    assert torch.equal(a2, b2)  # the copies stay identical
    assert torch.allclose(a, a2) and torch.allclose(b, b2)


def test_no_sync_restores_the_setting_after_an_error(one_rank_group):
    import ppir
    from ppir.torch import PipelineRuntime

    plan = ppir.compile(ppir.load("1f1b", P=1, M=2))
    rt = PipelineRuntime(plan, [nn.Linear(2, 2)], lambda y, t: (y - t).pow(2).mean())
    assert rt.reducer.sync
    with pytest.raises(KeyError), rt.no_sync():
        assert not rt.reducer.sync
        raise KeyError("inside the user's loop")
    assert rt.reducer.sync
    with rt.no_sync(), rt.no_sync():
        pass
    assert rt.reducer.sync


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_inside_the_window_discards_what_tied_copies_carried(one_rank_group, set_to_none):
    """DDP's semantics: ``zero_grad()`` inside the window discards every gradient accumulated
    so far, those the tied copies carried from a synchronised step before the window too; the
    step after the window then holds only what came after the zeroing (as when every step is
    synchronised)."""
    from ppir.torch.tied import TiedCopy

    torch.manual_seed(2)
    xs = [torch.randn(5, 3) for _ in range(4)]
    start = Tied().state_dict()
    runs = {}
    for mode in ("every step", "no_sync"):
        m = Tied()
        m.load_state_dict(start)
        reducer = _reducer([m], [TiedCopy("w", [m.a, m.b], [])], dp_size=1)
        for i, x in enumerate(xs):  # synchronised, window (zeroed after its first), synchronised
            reducer.sync = mode == "every step" or i in (0, 3)
            _step(reducer, m, x)
            if i == 1:
                for p in m.parameters():
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.zero_()
        runs[mode] = (m.a.grad, m.b.grad)
    (a, b), (a2, b2) = runs["every step"], runs["no_sync"]
    assert torch.equal(a2, b2)
    assert torch.allclose(a, a2) and torch.allclose(b, b2), (a - a2).abs().max()


def test_steps_inside_no_sync_broadcast_no_buffers(one_rank_group):
    """As DDP skips its buffer broadcast after a no_sync forward: a window's steps keep each
    replica's buffers (BatchNorm's statistics) and post no collective at all."""
    import ppir
    from ppir.torch import PipelineRuntime

    plan = ppir.compile(ppir.load("1f1b", P=1, M=2))
    rt = PipelineRuntime(plan, [nn.BatchNorm1d(2)], lambda y, t: (y - t).pow(2).mean())
    calls = []
    rt.reducer.sync_buffers = lambda: calls.append(rt.step_count)
    x, y = torch.randn(4, 2), torch.randn(4, 2)
    with rt.no_sync():
        rt.step(x, y)
        rt.step(x, y)
    rt.step(x, y)
    assert calls == [2]


def test_clipping_refuses_gradients_a_window_has_not_reduced(one_rank_group):
    """Inside the window and after it until the synchronising step, the gradients are each
    replica's own: their norm is not the model's, so clipping raises instead of scaling by
    it; the step that ends the window makes it work again."""
    import ppir
    from ppir.torch import PipelineRuntime

    plan = ppir.compile(ppir.load("1f1b", P=1, M=2))
    rt = PipelineRuntime(plan, [nn.Linear(2, 2)], lambda y, t: (y - t).pow(2).mean())
    x, y = torch.randn(4, 2), torch.randn(4, 2)
    with rt.no_sync():
        rt.step(x, y)
        with pytest.raises(RuntimeError, match=r"inside no_sync\(\).*clip after the first step"):
            rt.clip_grad_norm_(1.0)
    with pytest.raises(RuntimeError, match="not yet reduced"):
        rt.clip_grad_norm_(1.0)
    before = [p.grad.clone() for p in rt.parameters()]
    assert all(torch.equal(a, p.grad) for a, p in zip(before, rt.parameters()))  # untouched
    rt.step(x, y)
    norm = rt.clip_grad_norm_(1e9)
    assert float(norm) == pytest.approx(
        float(torch.cat([p.grad.flatten() for p in rt.parameters()]).norm())
    )
