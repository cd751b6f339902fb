"""ppir profile runs the model as the runtime does: tuple and dict boundaries (called as
m(*x) and m(**x)) and the runtime's check of the loss."""

from __future__ import annotations

import json
import textwrap

import pytest

torch = pytest.importorskip("torch")

from ppir.analysis.config import load_config_file  # noqa: E402
from ppir.analysis.measured import from_table  # noqa: E402
from ppir.analysis.measured_shared import SharedBytes  # noqa: E402
from ppir.profile.launch import ProfileSpec, profile  # noqa: E402

WIDTH, ROWS, M = 8, 4, 4

BOUNDARY_MODEL = textwrap.dedent(
    f"""
    import torch

    KIND = {{"kind": "tuple"}}

    def configure(kind):
        KIND["kind"] = kind

    class Piece(torch.nn.Module):
        def __init__(self, stage, last):
            super().__init__()
            self.stage, self.last = stage, last
            self.lin = torch.nn.Linear({WIDTH}, {WIDTH})

        def forward(self, *args, **kw):
            if self.stage == 0:
                h = args[0]
                mask = (h[:, 0] > 0).long()
                aux = h.sum(-1)
            elif KIND["kind"] == "dict":
                h, mask, aux = kw["h"], kw["mask"], kw["aux"]
            else:
                h, mask, aux = args
            h = torch.tanh(self.lin(h)) * (1 + mask.unsqueeze(-1))
            if self.last:
                return h + aux.unsqueeze(-1)
            aux = aux + h.mean(-1)
            if KIND["kind"] == "dict":
                return {{"h": h, "mask": mask, "aux": aux}}
            return (h, mask, aux)

    def build_stage(stage, num_stages):
        torch.manual_seed(stage)
        return Piece(stage, stage == num_stages - 1)

    def make_batch(step):
        g = torch.Generator().manual_seed(step)
        return (torch.randn({M * ROWS}, {WIDTH}, generator=g),
                torch.randn({M * ROWS}, {WIDTH}, generator=g))

    def loss_fn(y, t):
        return ((y - t) ** 2).mean()
    """
)

# h (float32), mask (int64), aux (float32): one microbatch of ROWS rows
MESSAGE = ROWS * WIDTH * 4 + ROWS * 8 + ROWS * 4


@pytest.fixture
def boundary_model(tmp_path):
    path = tmp_path / "boundary_model.py"
    path.write_text(BOUNDARY_MODEL)
    return str(path)


@pytest.mark.parametrize("kind", ["tuple", "dict"])
def test_tuple_and_dict_boundaries_are_measured_one_rank(boundary_model, kind):
    """Three pieces chained on one rank: each is called m(*x) / m(**x) and its message is the
    sum of its tensors' bytes (it crashed: 'tuple'/'dict' object has no attribute 'numel')."""
    spec = ProfileSpec(boundary_model, {"kind": kind}, ranks=1, stages=3, microbatches=M, steps=3)
    m = profile(spec)
    assert m.message_bytes == (MESSAGE, MESSAGE)
    assert m.microbatch_size == ROWS  # what 'tune --global-batch' (samples) divides by
    assert all(x > 0 for x in m.F + m.B + m.W + m.FB + m.W_late)
    assert m.I[1] > 0 and m.I[2] > 0  # the gradient reaches the float leaves h and aux
    assert all(a > 0 for a in m.activation_bytes)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_dict_boundary_crosses_ranks(boundary_model):
    """Two ranks: the dict is sent as its three tensors, its gradient as the two float ones."""
    spec = ProfileSpec(boundary_model, {"kind": "dict"}, ranks=2, stages=4, microbatches=M,
                       steps=3, warmup=1)  # fmt: skip
    m = profile(spec)
    assert m.message_bytes == (MESSAGE,) * 3
    assert m.transfer > 0 and all(x > 0 for x in m.I[1:])


def test_a_boundary_that_is_no_tensor_is_one_line(boundary_model, tmp_path, cli):
    """A stage output the runtime cannot send is named as the runtime names it."""
    bad = tmp_path / "str_model.py"
    bad.write_text(BOUNDARY_MODEL.replace("return (h, mask, aux)", 'return "h"'))
    code, _, err = cli("profile", "--module", str(bad), "--ranks", "1", "--stages", "2",
                       "-M", str(M), "--steps", "2")  # fmt: skip
    assert code == 2 and "Traceback" not in err, err
    assert err.strip() == (
        "ppir: error: rank 0: the output of stage 0: the value is str; a value crossing a stage "
        "boundary is a tensor or a tuple, list or dict of tensors"
    )


MEAN = " (the microbatch mean)"
LOSSES = {
    "a vector": (
        "(y - t) ** 2",
        f"returned ({ROWS}, {WIDTH}); it must return a scalar tensor" + MEAN,
    ),
    "a float": (
        "((y - t) ** 2).mean().item()",
        "returned float; it must return a scalar tensor" + MEAN,
    ),
    "a tuple": (
        "((y - t) ** 2).mean(), {}",
        "returned tuple; it must return a scalar tensor" + MEAN,
    ),
    "a detached tensor": (
        "((y - t) ** 2).mean().detach()",
        "returned a tensor that does not require grad: it must be computed from the stage's "
        "output by autograd (not a constant, not under torch.no_grad(), not detached)",
    ),
}


def _bad_loss_model(tmp_path, body: str) -> str:
    path = tmp_path / "bad_loss_model.py"
    path.write_text(BOUNDARY_MODEL.replace("return ((y - t) ** 2).mean()", f"return {body}"))
    return str(path)


@pytest.mark.parametrize("what", list(LOSSES))
def test_a_loss_that_is_not_a_scalar_is_the_runtimes_one_line_error(tmp_path, cli, what):
    """As 'ppir launch' says it (torch's 'grad can be implicitly created only for scalar
    outputs' and the like came out as tracebacks)."""
    body, message = LOSSES[what]
    path = _bad_loss_model(tmp_path, body)
    code, _, err = cli("profile", "--module", path, "--ranks", "1", "--stages", "2",
                       "-M", str(M), "--steps", "2")  # fmt: skip
    assert code == 2 and "Traceback" not in err, err
    assert err.strip() == f"ppir: error: rank 0: loss_fn on stage 1, microbatch 0 {message}"


NONFINITE = {  # loss_fn, and the error: the runtime's message, then why the profile stops
    "nan": (
        "def loss_fn(y, t):\n    return ((y - t) ** 2).mean() * float('nan')\n",
        "the loss is nan at profile step 0, microbatch 0 (stage 1)",
    ),
    "inf at the third call": (
        "CALLS = [0]\n\ndef loss_fn(y, t):\n    CALLS[0] += 1\n"
        "    return ((y - t) ** 2).mean() * (float('inf') if CALLS[0] == 3 else 1.0)\n",
        "the loss is inf at profile step 0, microbatch 2 (stage 1)",
    ),
}
STOPS = "; a loss that is not finite cannot be profiled: stopping, no cost file written"


def _nonfinite_model(tmp_path, what: str) -> str:
    path = tmp_path / "nonfinite_model.py"
    loss = "def loss_fn(y, t):\n    return ((y - t) ** 2).mean()\n"
    assert loss in BOUNDARY_MODEL
    path.write_text(BOUNDARY_MODEL.replace(loss, NONFINITE[what][0]))
    return str(path)


@pytest.mark.parametrize("what", list(NONFINITE))
def test_a_loss_that_is_not_finite_stops_the_profile_in_one_line(tmp_path, cli, what):
    """It went on and wrote a cost file timed on NaN losses; now the runtime's message."""
    out = tmp_path / "costs.toml"
    code, _, err = cli("profile", "--module", _nonfinite_model(tmp_path, what), "--ranks", "1",
                       "--stages", "2", "-M", str(M), "--steps", "2", "-o", str(out))  # fmt: skip
    assert code == 2 and "Traceback" not in err, err
    assert err.strip() == f"ppir: error: rank 0: {NONFINITE[what][1]}{STOPS}"
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_loss_that_is_not_finite_on_the_last_rank_is_named_once(tmp_path):
    from ppir.profile.launch import ProfileError

    path = _nonfinite_model(tmp_path, "nan")
    with pytest.raises(ProfileError) as e:
        profile(ProfileSpec(path, ranks=2, stages=4, microbatches=M, steps=2, warmup=1))
    assert str(e.value) == (
        "rank 1: the loss is nan at profile step 0, microbatch 0 (stage 3)" + STOPS
    )


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_bad_loss_on_the_last_rank_is_named_once(tmp_path):
    from ppir.profile.launch import ProfileError

    path = _bad_loss_model(tmp_path, LOSSES["a vector"][0])
    with pytest.raises(ProfileError) as e:
        profile(ProfileSpec(path, ranks=2, stages=4, microbatches=M, steps=2, warmup=1))
    assert str(e.value) == f"rank 1: loss_fn on stage 3, microbatch 0 {LOSSES['a vector'][1]}"


TIED_MODEL = textwrap.dedent(
    f"""
    import torch
    from ppir.torch import split_layers

    VOCAB, D = 16, {WIDTH}
    _CACHE = {{}}

    class Head(torch.nn.Module):
        def __init__(self, emb):
            super().__init__()
            self.emb = emb  # tied

        def forward(self, h):
            return h @ self.emb.weight.t()

    def build_stage(stage, num_stages):
        if num_stages not in _CACHE:
            torch.manual_seed(0)
            emb = torch.nn.Embedding(VOCAB, D)
            layers = [torch.nn.Linear(D, D) for _ in range(num_stages)]
            _CACHE[num_stages] = split_layers(layers, num_stages, first=emb, last=Head(emb))
        return _CACHE[num_stages][stage]

    def make_batch(step):
        g = torch.Generator().manual_seed(step)
        x = torch.randint(0, VOCAB, ({M * ROWS},), generator=g)
        return x, (x + 1) % VOCAB

    def loss_fn(y, t):
        return torch.nn.functional.cross_entropy(y, t)

    def make_optimizer(params):
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)
    """
)


def test_the_profile_records_which_stages_share_a_weight(tmp_path, cli):
    """The tied embedding/head (split_layers declares it) is in stage 0's and stage 3's sizes
    and in 'shared'; ZB-V then counts it once on rank 0, which holds both."""
    path = tmp_path / "tied_model.py"
    path.write_text(TIED_MODEL)
    out = tmp_path / "tied.toml"
    code, said, err = cli("profile", "--module", str(path), "--ranks", "1", "--stages", "4",
                          "-M", str(M), "--steps", "2", "-o", str(out))  # fmt: skip
    assert code == 0, err
    assert "shared: stages 0, 3 hold one 0.5 KiB parameter (in each one's params" in said
    m = from_table(load_config_file(str(out))["measured"], str(out))
    emb, lin = 16 * WIDTH * 4, (WIDTH * WIDTH + WIDTH) * 4
    assert m.param_bytes == (emb + lin, lin, lin, lin + emb)
    assert m.optimizer_bytes == m.param_bytes  # SGD momentum: one buffer per parameter
    assert m.shared == (SharedBytes((0, 3), emb, 0.0, emb),)
    code, text, err = cli("compile", "zbv", "-D", "P=2", "-D", "M=4", "--backend", "cost",
                          "--config", str(out), "--format", "json")  # fmt: skip
    assert code == 0, err
    rank0 = json.loads(text)["per_rank"][0]["memory"]
    assert rank0["params"] == rank0["grads"] == rank0["optimizer"] == emb + 2 * lin


def test_a_gradient_message_of_no_tensors_posts_nothing():
    """A boundary of integer tensors alone (token ids, a mask) has a gradient message of no
    tensors.  The profile posted its group as an empty batch_isend_irecv, which torch refuses
    (IndexError in _check_p2p_op_list: every rank failed with that traceback) where the
    runtime posts nothing, and 'ppir launch' trained the same model."""
    from ppir.ir import Group
    from ppir.profile.orders import program
    from ppir.profile.worker import Runner

    schedule, prog = program("1f1b", {"P": 2, "M": 1}, 0)
    run = Runner(0, 2, [torch.nn.Identity()], None, prog, schedule, 1, torch.device("cpu"))
    recv = next(x for x in prog if isinstance(x, Group) and "RECV_B0" in str(x))
    run.meta = {1: ["t", "int64", [ROWS]]}  # boundary 1 carries no floating-point tensor
    _, _, works, received, names = run._post(recv, {})
    assert works == [] and [ts for _, ts in received] == [[]]
    assert names == [("g1.0", True)]
