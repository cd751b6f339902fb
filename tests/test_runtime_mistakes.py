"""Mistakes a user embedding ``PipelineRuntime`` in their own loop makes, and the one-line
errors naming the rank that answer them, raised before anything is posted.  In one process (a
one-rank plan: no process group); fast, needs torch."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

import ppir  # noqa: E402
from ppir.plan import build_plan  # noqa: E402
from ppir.torch import PipelineRuntime, RuntimeFailure  # noqa: E402


def runtime(M: int = 4, width: int = 8):
    plan = build_plan(ppir.lower(ppir.load_schedule("1f1b", {"P": 1, "M": M})))
    torch.manual_seed(0)
    stage = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh())
    return PipelineRuntime(plan, [stage], torch.nn.functional.mse_loss)


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
@pytest.mark.parametrize("call", ["step", "step_microbatches"])
def test_a_step_under_no_grad_is_refused_before_anything_runs(mode, call):
    rt = runtime()
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    args = (x, y) if call == "step" else (list(x.chunk(4)), list(y.chunk(4)))
    with mode(), pytest.raises(RuntimeFailure) as e:
        getattr(rt, call)(*args)
    assert str(e.value).startswith("rank 0: step() trains: it needs autograd enabled; ")
    assert "evaluate() runs a forward-only pass" in str(e.value)
    assert rt.executor is None and rt.step_count == 0  # nothing ran, nothing was posted
    assert rt.step(x, y) is not None  # and the runtime still works afterwards


def test_a_batch_that_does_not_split_names_the_rank():
    rt = runtime()
    x, y = torch.randn(12, 8), torch.randn(12, 8)
    with pytest.raises(ValueError) as e:
        rt.step(x[:10], y[:10])
    assert str(e.value) == (
        "rank 0: the inputs have shape (10, 8): dim 0 must split into 4 equal microbatches "
        "(10 splits into 1, 2, 5 or 10 equal parts)"
    )


@pytest.mark.parametrize(
    "loss_fn, said",
    [
        (
            torch.nn.MSELoss,
            "rank 0: loss_fn is the class MSELoss: called as loss_fn(output, target) it makes a "
            "MSELoss instead of a loss; give an instance, MSELoss()",
        ),
        (
            None,
            "rank 0: loss_fn is NoneType, not a function (the rank holding the last stage "
            "calls it)",
        ),
    ],
)
def test_a_loss_fn_that_is_a_class_or_nothing_is_refused_when_the_runtime_is_built(loss_fn, said):
    """Was, at the first step, torch's 'Boolean value of Tensor with more than one value is
    ambiguous' from inside MSELoss's constructor (given the output and target as its
    size_average and reduce), or 'NoneType' object is not callable."""
    plan = build_plan(ppir.lower(ppir.load_schedule("1f1b", {"P": 1, "M": 4})))
    with pytest.raises(RuntimeFailure) as e:
        PipelineRuntime(plan, [torch.nn.Linear(8, 8)], loss_fn)
    assert str(e.value) == said


def test_a_rank_without_the_last_stage_may_give_no_loss_fn():
    """It never calls it: ``loss_fn if rt_holds_last else None`` is not refused (a class is)."""
    from ppir.torch.errors import ModelError
    from ppir.torch.signatures import check_loss_fn

    check_loss_fn(None, "rank 0", needed=False)
    with pytest.raises(ModelError, match="rank 0: loss_fn is the class MSELoss"):
        check_loss_fn(torch.nn.MSELoss, "rank 0", needed=False)


def test_init_outside_torchrun_names_the_user_s_own_script(monkeypatch):
    """Was '... start the ranks through 'ppir launch' or torchrun ('torchrun --nproc-per-node
    N -m ppir.run PLAN --module MODULE')': neither starts a training script of one's own."""
    import ppir.torch

    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr("sys.argv", ["train.py", "--steps", "3"])
    with pytest.raises(RuntimeFailure) as e:
        ppir.torch.init(timeout_s=5)
    assert str(e.value) == (
        "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set: ppir.torch.init() joins the "
        "processes torchrun starts: run 'torchrun --nproc-per-node N train.py' (or initialise "
        "torch.distributed yourself, without ppir.torch.init)"
    )


def test_init_names_its_own_arguments_not_the_command_line_s_flags(monkeypatch):
    """Was '--device cuda: ...; leave --device out to run on the CPU' and '--dist-backend nccl
    needs CUDA devices', to a script that called ppir.torch.init(device="cuda")."""
    import ppir.torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    env = {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)  # launched, as far as init can tell: it fails on the device
    with pytest.raises(RuntimeFailure) as e:
        ppir.torch.init(device="cuda", timeout_s=5)
    assert str(e.value) == (
        "device='cuda': this machine has no CUDA device (torch.cuda.is_available() is False); "
        "pass device=None or 'cpu' to run on the CPU"
    )
    with pytest.raises(RuntimeFailure) as e:
        ppir.torch.init(device="tpu", timeout_s=5)
    assert str(e.value) == "device='tpu': expected auto, cpu, cuda or cuda:N"
    with pytest.raises(RuntimeFailure) as e:
        ppir.torch.init(backend="nccl", timeout_s=5)
    assert str(e.value).startswith("backend='nccl' needs CUDA devices, and the ranks run on cpu")


def test_a_smaller_last_batch_of_a_data_loader_is_told_in_the_loop_s_words():
    """Was '... a make_batch whose shapes change from step to step must pad them to one': a
    function of ppir launch's model modules, which a loop of one's own does not have."""
    rt = runtime()
    rt.step(torch.randn(16, 8), torch.randn(16, 8))
    with pytest.raises(RuntimeFailure) as e:
        rt.step(torch.randn(8, 8), torch.randn(8, 8))  # a DataLoader's last, without drop_last
    assert str(e.value) == (
        "rank 0, instruction #0 (0F0): microbatch 0 of the inputs has shape (2, 8) float32 but "
        "the plan's metadata for boundary 0 says (4, 8) float32 (at step 1: a boundary's shapes "
        "are fixed for the whole run, the plan's or those the first step inferred; pad a batch "
        "of another size to the first one's, or drop it: a data loader's smaller last batch "
        "(drop_last=True), a make_batch whose shapes change from step to step)"
    )


@pytest.mark.parametrize(
    "inputs,targets,needle",
    [
        (None, None, "rank 0: this rank holds stage 0, so step() needs its inputs (got None)"),
        ("x", None, "rank 0: this rank holds stage 0, so step() needs its targets (got None)"),
        ("x", "not a tensor", "rank 0: the targets: the value is str; a value crossing"),
    ],
)
def test_missing_or_unusable_batches_name_the_rank_and_what_it_needs(inputs, targets, needle):
    rt = runtime()
    x = torch.randn(8, 8)
    with pytest.raises(ValueError) as e:
        rt.step(x if inputs == "x" else inputs, targets)
    assert str(e.value).startswith(needle), str(e.value)
    assert rt.executor is None


def test_one_microbatch_is_singular():
    rt = runtime(M=1)
    with pytest.raises(ValueError) as e:
        rt.step_microbatches([], [])
    assert str(e.value) == (
        "rank 0: the inputs must be a list of 1 microbatch on the rank holding stage 0"
    )
    with pytest.raises(ValueError, match=r"dim 0 must split into 1 equal microbatch$"):
        rt.step(torch.tensor(1.0), torch.tensor(1.0))


@pytest.mark.parametrize("batch,got", [((1, 2, 3), "a tuple of 3"), ([1], "a list of 1")])
def test_make_batch_returning_other_than_a_pair_says_how_many(batch, got):
    import types

    from ppir.torch.errors import ModelError
    from ppir.torch.model import global_batch

    model = types.SimpleNamespace(make_batch=lambda step: batch)
    with pytest.raises(ModelError) as e:
        global_batch(model, 0, torch.device("cpu"), 1)
    assert str(e.value) == f"rank 1: make_batch(0) must return (inputs, targets), got {got}"


@pytest.mark.parametrize(
    "batch,said",
    [
        (
            (torch.zeros(4, 2), None),
            "rank 1: make_batch(0) targets: the value is NoneType; each of make_batch's inputs "
            "and targets is a tensor or a tuple, list or dict of tensors (a loss_fn that needs "
            "no targets still gets its microbatch's slice of them: return a placeholder whose "
            "dim 0 is the batch's, e.g. torch.zeros(batch_size))",
        ),
        (
            (None, torch.zeros(4)),
            "rank 1: make_batch(0) inputs: the value is NoneType; each of make_batch's inputs "
            "and targets is a tensor or a tuple, list or dict of tensors",
        ),
        (
            ({"x": torch.zeros(4, 2), "n": 3}, torch.zeros(4)),
            "rank 1: make_batch(0) inputs: the value['n'] is int; each of make_batch's inputs "
            "and targets is a tensor or a tuple, list or dict of tensors",
        ),
    ],
)
def test_make_batch_values_that_are_no_tensors_name_inputs_or_targets(batch, said):
    """Was 'rank 1: make_batch(0): the value: the value is NoneType; a value crossing a stage
    boundary is ...', which neither named the inputs or the targets nor was about a boundary."""
    import types

    from ppir.profile.errors import ProfileError
    from ppir.profile.launch import check_batch
    from ppir.torch.errors import ModelError
    from ppir.torch.model import global_batch

    model = types.SimpleNamespace(make_batch=lambda step: batch)
    with pytest.raises(ModelError) as e:
        global_batch(model, 0, torch.device("cpu"), 1)
    assert str(e.value) == said
    with pytest.raises(ProfileError) as e:  # ppir profile says the same
        check_batch(batch, 2)
    assert str(e.value) == said.removeprefix("rank 1: ")


def test_a_folder_given_as_the_model_says_so(tmp_path, monkeypatch):
    from ppir.torch.errors import ModelError
    from ppir.torch.model import load_model

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "model.py").write_text("def build_stage(s, n): pass\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelError, match="mine is a folder: give the .py file that defines them"):
        load_model("mine")


def test_a_dotted_model_missing_one_of_its_imports_keeps_the_traceback(tmp_path, monkeypatch):
    """Only a model that is not there is 'cannot import model': one that is there but imports
    a missing package raises that error as a model file does, traceback and all."""
    from ppir.torch.errors import ModelError
    from ppir.torch.model import load_model

    (tmp_path / "needs_pkg_model.py").write_text("import no_such_pkg_for_ppir\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModuleNotFoundError) as e:
        load_model("needs_pkg_model")
    assert not isinstance(e.value, ModelError) and e.value.name == "no_such_pkg_for_ppir"
    assert any(str(f.path).endswith("needs_pkg_model.py") for f in e.traceback)
    with pytest.raises(ModelError, match="cannot import model 'no_such_model_pkg.sub'"):
        load_model("no_such_model_pkg.sub")


def test_clipping_counts_a_parameter_tied_on_one_rank_once():
    # a user-declared sharing of two distinct parameters of one stage: one weight, two copies
    plan = build_plan(ppir.lower(ppir.load_schedule("1f1b", {"P": 1, "M": 2})))
    stage = torch.nn.Sequential(
        torch.nn.Linear(4, 4, bias=False), torch.nn.Linear(4, 4, bias=False)
    )
    shared = [{"name": "w", "holders": [[0, "0.weight"], [0, "1.weight"]]}]
    rt = PipelineRuntime(plan, [stage], torch.nn.functional.mse_loss, shared=shared)
    assert [len(t.local) for t in rt.reducer.tied] == [2]
    for p in stage.parameters():
        p.grad = torch.full_like(p, 3.0)  # the copies' gradients, equal as the sum leaves them
    norm = rt.clip_grad_norm_(1.0)
    assert float(norm) == pytest.approx(3.0 * 4)  # sqrt(16 * 9): one copy, not two (12 * sqrt 2)
    assert all(torch.allclose(p.grad, torch.full_like(p, 3.0 / 12)) for p in stage.parameters())


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0, float("inf")])
def test_clip_grad_norm_takes_torch_s_arguments_and_returns_its_tensor(norm_type):
    """was: rt.clip_grad_norm_(max_norm) took no norm_type and returned a float, so a loop that
    called torch.nn.utils.clip_grad_norm_(params, 1.0, norm_type=...) and logged norm.item()
    failed on the switch.  Same gradients, same norm and same clipped gradients as torch's."""
    plan = build_plan(ppir.lower(ppir.load_schedule("1f1b", {"P": 1, "M": 2})))
    torch.manual_seed(0)
    stage = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    ref = copy.deepcopy(stage)
    rt = PipelineRuntime(plan, [stage], torch.nn.functional.mse_loss)
    for p, q in zip(stage.parameters(), ref.parameters()):
        p.grad = torch.randn_like(p) * 5
        q.grad = p.grad.clone()
    norm = rt.clip_grad_norm_(0.5, norm_type=norm_type)
    expected = torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5, norm_type=norm_type)
    assert isinstance(norm, torch.Tensor) and norm.dim() == 0 and norm.dtype == expected.dtype
    assert norm.item() == pytest.approx(expected.item(), rel=1e-6)
    for p, q in zip(stage.parameters(), ref.parameters()):
        assert torch.allclose(p.grad, q.grad, rtol=1e-5)
    for p in stage.parameters():
        p.grad = torch.full_like(p, float("nan"))
    with pytest.raises(RuntimeError, match="error_if_nonfinite"):
        rt.clip_grad_norm_(1.0, norm_type=norm_type, error_if_nonfinite=True)
    with pytest.raises(ValueError, match="norm_type must be positive"):
        rt.clip_grad_norm_(1.0, norm_type=0)


@pytest.mark.parametrize("command", ["launch", "profile"])
def test_a_folder_given_as_the_module_is_refused_before_any_rank_starts(
    cli, tmp_path, monkeypatch, command
):
    """was: 'ppir launch --module /some/folder' said 'no such file'; a folder named as a dotted
    module passed the early check and each rank then failed in load_model.  The early check
    says what load_model says (one wording)."""
    from ppir.torch.errors import ModelError
    from ppir.torch.model import load_model

    (tmp_path / "mine" / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    schedule = ["-n", "2", "1f1b"] if command == "launch" else []
    for spec in (str(tmp_path / "mine"), "mine", "mine.sub"):
        code, out, err = cli(command, *schedule, "--module", spec)
        said = f"{spec} is a folder: give the .py file that defines build_stage, make_batch and "
        assert code == 2 and out == "", err
        assert err.strip() == f"ppir: error: --module {said}loss_fn"
    with pytest.raises(ModelError, match=f"^model {tmp_path / 'mine'} is a folder: give the"):
        load_model(str(tmp_path / "mine"))  # was: 'model file ... does not exist'
    code, _, err = cli(command, *schedule, "--module", str(tmp_path / "gone.py"))
    assert code == 2 and f"--module {tmp_path / 'gone.py'}: no such file" in err


def test_the_batch_check_takes_a_nan_in_the_same_batch_for_the_same_batch(monkeypatch):
    """``ppir.run`` compares the ranks' ``make_batch`` slices at steps 0-2 by fingerprints: a
    seeded batch that holds a NaN (or an infinity) is the same batch on every rank, though
    NaN != NaN; it was refused as 'different batches: seed make_batch from step' where the
    loss check would have named the NaN.  A batch that does differ is still refused."""
    from types import SimpleNamespace

    import torch.distributed as dist

    from ppir.torch.errors import ModelError
    from ppir.torch.model import check_same_batch

    shift = [0.0]

    def all_gather(out, mine):  # two ranks: this one, and a peer whose batch is shifted
        out[0].copy_(mine)
        out[1].copy_(mine + shift[0])

    monkeypatch.setattr(dist, "get_world_size", lambda *a: 2)
    monkeypatch.setattr(dist, "all_gather", all_gather)
    ctx = SimpleNamespace(rank=0, device=torch.device("cpu"), timeout_s=None)
    x = torch.randn(8, 4)
    for value in (float("nan"), float("inf"), -float("inf")):
        x[0, 0] = value
        check_same_batch(list(x.chunk(4)), list(x.chunk(4)), 1, ctx, 1)
    shift[0] = 1.0
    x[0, 0] = 0.0
    with pytest.raises(ModelError, match=r"make_batch\(1\) gave rank 0 and rank 1 different"):
        check_same_batch(list(x.chunk(4)), list(x.chunk(4)), 1, ctx, 1)


TWO_STAGES_ONE_RANK = """schedule two(M = 2)
ranks 1
stages 2
microbatches M
placement [0, 0]
program r {
  for m in 0 .. M { F(m, 0) F(m, 1) }
  for m in 0 .. M { B(m, 1) B(m, 0) }
}
"""


def test_a_refused_tie_says_how_to_undo_the_refusal_in_the_api_and_the_cli():
    """'ppir launch --tied refuse' reaches the runtime as shared='refuse': its refusal named
    only the keyword, which a command-line user never wrote."""
    from ppir.torch import SetupError, split_layers

    class Head(torch.nn.Module):
        def __init__(self, emb):
            super().__init__()
            self.emb = emb

        def forward(self, h):
            return h @ self.emb.weight.t()

    emb = torch.nn.Linear(4, 4)
    stages = split_layers([torch.nn.Linear(4, 4)], 2, first=emb, last=Head(emb))
    program = ppir.compile(ppir.load_text(TWO_STAGES_ONE_RANK)).program
    with pytest.raises(SetupError) as e:
        PipelineRuntime(program, stages, torch.nn.functional.mse_loss, shared="refuse")
    # both holders on one rank (as a V placement's first and last stage): one tensor, no copies
    # to keep identical; the refusal said "refusing to run it untied (... to keep the copies
    # identical by summing their gradients)", a cross-rank tie that does not exist here
    assert str(e.value) == (
        "parameter 'first.weight' is shared: 'first.weight' of stage 0 is the same tensor as "
        "'last.emb.weight' of stage 1, all on rank 0 (one tensor: no gradient crosses ranks for "
        "it); refusing a model with shared parameters (drop shared='refuse', or --tied refuse "
        "on the command line, to run it as it is)"
    )


def test_a_refused_tie_across_ranks_names_each_holder_and_its_rank():
    from ppir.torch.tied import tied_refusal

    entry = {"name": "wte = head", "holders": [[0, "first.wte"], [3, "last.head"]]}
    assert tied_refusal(entry, [0, 1, 1, 0]).endswith(", all on rank 0 (one tensor: no "
        "gradient crosses ranks for it); refusing a model with shared parameters (drop "
        "shared='refuse', or --tied refuse on the command line, to run it as it is)")  # fmt: skip
    assert tied_refusal(entry, [0, 1, 2, 3]) == (
        "parameter 'wte = head' is shared: 'first.wte' of stage 0 (rank 0) is the same tensor as "
        "'last.head' of stage 3 (rank 3); refusing to run it untied (drop shared='refuse', or "
        "--tied refuse on the command line, to keep the copies identical by summing their "
        "gradients)"
    )


@pytest.mark.parametrize(
    "world,dp,advice",
    [(3, None, "must be 2 x the data-parallel size: start a multiple of 2 processes"),
     (3, 2, "must be 2 x the data-parallel size (2 asked): start 4 processes")],
)  # fmt: skip
def test_a_world_the_plan_does_not_fit_says_how_many_processes_to_start(
    monkeypatch, world, dp, advice
):
    """3 processes for a 2-rank plan without --dp were told 'start 2 processes', as if the
    data-parallel size had to be 1: 4 or 6 run it too (2 or 3 replicas)."""
    import torch.distributed as dist

    from ppir.torch import SetupError, make_mesh

    monkeypatch.setattr(dist, "get_world_size", lambda *a: world)
    monkeypatch.setattr(dist, "get_rank", lambda *a: 1)
    with pytest.raises(SetupError) as e:
        make_mesh(2, dp)
    said = f"rank 1: the plan has 2 pipeline ranks, so the {world} processes (WORLD_SIZE) "
    assert str(e.value) == said + advice


@pytest.mark.parametrize("made", [None, "sgd"])
def test_a_make_optimizer_that_returns_no_optimizer_is_refused(made):
    """A make_optimizer that forgets its return gave None, which the run took for 'no
    parameters to train': every step ran, nothing trained, nothing was said."""
    from types import SimpleNamespace

    from ppir.torch import ModelError
    from ppir.torch.model import make_optimizer

    model = SimpleNamespace(make_optimizer=lambda params: made)
    with pytest.raises(ModelError) as e:
        make_optimizer(model, [torch.nn.Parameter(torch.zeros(2))], None)
    assert str(e.value) == (
        f"make_optimizer returned {type(made).__name__}, not an optimizer (an object with step() "
        "and zero_grad()): does it return the optimizer it makes?"
    )


def test_a_microbatch_of_another_shape_in_the_first_step_says_shapes_are_per_boundary():
    """A stage that returned a data-dependent number of rows got only '... has shape (3, 32)
    but the plan's metadata for boundary 1 says (2, 32)': the reason came from step 1 on."""
    rt = runtime()
    xs = [torch.randn(2, 8), torch.randn(3, 8), torch.randn(2, 8), torch.randn(2, 8)]
    with pytest.raises(RuntimeFailure) as e:
        rt.step_microbatches(xs, [torch.randn_like(x) for x in xs])
    assert str(e.value) == (
        "rank 0, instruction #2 (0F1): microbatch 1 of the inputs has shape (3, 8) float32 but "
        "the plan's metadata for boundary 0 says (2, 8) float32 (a boundary's shapes are the "
        "same for every microbatch: the plan's, or those the first microbatch gave)"
    )


@pytest.mark.parametrize(
    "stages",
    [
        torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()),  # taken apart before
        torch.nn.Linear(8, 8),  # "'Linear' object is not iterable" before
    ],
)
def test_one_stage_module_not_in_a_list_is_refused_by_name(stages):
    plan = build_plan(ppir.lower(ppir.load_schedule("1f1b", {"P": 1, "M": 2})))
    with pytest.raises(ppir.torch.SetupError) as e:
        PipelineRuntime(plan, stages, torch.nn.functional.mse_loss)
    assert str(e.value) == (
        f"rank 0: stages is one module ({type(stages).__name__}), not a list: give this rank's "
        "stages [0] as a list of modules, e.g. [stage]"
    )
    listed = torch.nn.ModuleList([stages])  # a ModuleList of stages is a list
    assert PipelineRuntime(plan, listed, torch.nn.functional.mse_loss).stages == [stages]


def test_a_compile_that_deadlocks_is_refused_not_run():
    """A compiled object (or its lowered Schedule) whose program does not verify is refused
    before anything is posted, as a plan dict or file is; before, only dicts and files were
    validated, and a deadlocking program was handed to the ranks to hang in."""
    from ppir.plan import PlanError
    from ppir.torch import as_plan

    c = ppir.compile(ppir.load("1f1b", P=3, M=4), lowering="naive")
    assert not c.ok and c.program.is_lowered
    stage = torch.nn.Linear(4, 4)
    for given in (c, c.program):
        with pytest.raises(PlanError) as e:
            PipelineRuntime(given, [stage], torch.nn.functional.mse_loss)
        assert str(e.value).startswith(
            "the plan's program does not verify: deadlock: ranks 1 and 2 wait for each other"
        )
    assert as_plan(c, verify=False)["ranks"] == 3  # verify=False is the caller's choice


def _linear_stages(n: int):
    from ppir.torch import split_layers

    torch.manual_seed(0)
    return split_layers([torch.nn.Linear(8, 8) for _ in range(n)], n)


def test_split_layers_stages_handed_in_another_order_are_refused():
    """A rank holding two stages given them in another order (or another stage in a stage's
    place: the looped rule r, r + P under zbv's V placement) trained a different model, the
    layers permuted, with no error anywhere: every boundary has the same shape."""
    plan = build_plan(ppir.lower(ppir.load_schedule("looped_bfs", {"P": 1, "M": 2, "v": 2})))
    stages = _linear_stages(2)
    with pytest.raises(ppir.torch.SetupError) as e:
        PipelineRuntime(plan, [stages[1], stages[0]], torch.nn.functional.mse_loss)
    assert str(e.value) == (
        "rank 0: this rank holds stages [0, 1] of the plan, in that order, but was given "
        "split_layers' stages [1, 0]: give it [stages[s] for s in "
        "program.stages_of_rank[pp_rank]] (a V placement, as zbv's, holds stages r and "
        "2P - 1 - r)"
    )
    assert PipelineRuntime(plan, stages, torch.nn.functional.mse_loss).stage_ids == [0, 1]
    # a module of the user's own beside one: only the split_layers stage is judged, and the
    # message does not give the plan's id for the user's module as if it had been given
    mine = torch.nn.Linear(8, 8)
    with pytest.raises(ppir.torch.SetupError) as e:
        PipelineRuntime(plan, [mine, stages[0]], torch.nn.functional.mse_loss)
    assert "split_layers' stages [?, 0] (?: a module of your own): give it" in str(e.value)
    assert PipelineRuntime(plan, [stages[0], mine], torch.nn.functional.mse_loss).stages[1] is mine


def test_stages_cut_for_another_number_of_stages_are_refused():
    """split_layers(layers, P) where the plan has P * v stages: the runtime counted only the
    modules given, so a rank given two of the three stages trained two thirds of a model."""
    plan = build_plan(ppir.lower(ppir.load_schedule("looped_bfs", {"P": 1, "M": 2, "v": 2})))
    stages = _linear_stages(3)
    with pytest.raises(ppir.torch.SetupError) as e:
        PipelineRuntime(plan, stages[:2], torch.nn.functional.mse_loss)
    assert str(e.value) == (
        "rank 0: the stage modules were cut into 3 stages (split_layers), but the plan has 2: "
        "cut them with split_layers(layers, program.stages, ...)"
    )
    # modules of the user's own (no split_layers) carry no index: nothing to judge by
    mods = [torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)]
    assert PipelineRuntime(plan, mods, torch.nn.functional.mse_loss).stages == mods
