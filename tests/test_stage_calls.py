"""How stages are called: the first step's shape inference leaves no trace (a traced forward
puts the module's buffers, such as BatchNorm's running statistics, and the random generator
back, so a pipelined run updates its buffers exactly as single-process training on the same
microbatches does), and split_layers calls ``last`` as the runtime calls a stage."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import ppir  # noqa: E402
from ppir.torch import PipelineRuntime  # noqa: E402
from ppir.torch.shapes import trace_stage  # noqa: E402


def stage(seed: int):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(6, 6), torch.nn.BatchNorm1d(6), torch.nn.Dropout(0.3), torch.nn.Tanh()
    )


def test_a_traced_forward_restores_buffers_and_the_generator():
    m = stage(0)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    x = torch.randn(4, 6) + 5.0
    rng = torch.get_rng_state()
    spec = trace_stage(m, x, 0, 0)
    assert spec == ["t", "float32", [4, 6]]
    assert torch.equal(torch.get_rng_state(), rng)
    for k, v in m.state_dict().items():
        assert torch.equal(v, before[k]), k  # running_mean, running_var, num_batches_tracked


def test_a_pipelined_step_updates_batchnorm_like_one_process():
    s = ppir.load("looped_bfs", P=1, M=4, v=3)  # stages 1 and 2 are traced on rank 0
    stages = [stage(i) for i in range(s.stages)]
    for m in stages:  # the reference does not draw dropout masks in the pipeline's order
        m[2].p = 0.0
    rt = PipelineRuntime(ppir.compile(s).program, stages, lambda y, t: ((y - t) ** 2).mean())
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 6, generator=g) + 3.0, torch.randn(8, 6, generator=g)
    rt.step(x, y)
    ref = [stage(i) for i in range(s.stages)]
    for m in ref:
        m[2].p = 0.0
    for xm in x.chunk(4):
        h = xm
        for m in ref:
            h = m(h)
    for mine, theirs in zip(stages, ref):
        assert int(mine[1].num_batches_tracked) == int(theirs[1].num_batches_tracked) == 4
        assert torch.allclose(mine[1].running_mean, theirs[1].running_mean, atol=1e-6)
        assert torch.allclose(mine[1].running_var, theirs[1].running_var, atol=1e-6)


def test_split_layers_calls_last_as_it_calls_a_layer():
    from ppir.torch import split_layers

    class Pair(torch.nn.Module):
        def forward(self, h, scale):
            return {"h": h * scale, "scale": scale}

    class Head(torch.nn.Module):
        def forward(self, h, scale):  # a dict value arrives as keywords, like at a layer
            return h.sum() + scale.sum()

    (one,) = split_layers([Pair(), Pair()], 1, last=Head())
    out = one(torch.ones(2), torch.full((2,), 2.0))
    assert out.item() == 2 * 4 + 2 * 2  # h = 4 after two layers, scale = 2


def test_a_none_in_a_boundary_value_says_how_to_drop_it():
    from ppir.torch import values as V

    with pytest.raises(TypeError) as e:
        V.flatten((torch.ones(2), None), "the output of stage 0")
    msg = str(e.value)
    assert msg.startswith("the output of stage 0: the value[1] is NoneType; a value crossing")
    assert "call=lambda layer, x: layer(x)[0]" in msg
    with pytest.raises(TypeError) as e:
        V.flatten(3.0, "the output of stage 0")
    assert "call=" not in str(e.value)


def test_a_none_in_a_dict_boundary_says_to_leave_the_key_out():
    """An HF causal mask is None under sdpa without padding; a user passing it between stages
    in a dict was told about layers returning (hidden, None), which was not the case."""
    from ppir.torch import values as V

    with pytest.raises(TypeError) as e:
        V.flatten({"hidden_states": torch.ones(2), "attention_mask": None}, "the output of stage 0")
    msg = str(e.value)
    assert msg.startswith("the output of stage 0: the value['attention_mask'] is NoneType; a ")
    assert "(leave the key out of the dict, and the next stage, called as m(**x), gets" in msg
    assert "layer(x)[0]" not in msg
