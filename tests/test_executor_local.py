"""The runtime in one process (no process group): plans whose stages all sit on one rank, so
every hand-off is local, plus the runtime's error messages.  Fast; needs torch."""

from __future__ import annotations

import sys
import traceback
import types

import pytest

torch = pytest.importorskip("torch")

import ppir  # noqa: E402
from ppir.ir import Action, OpKind  # noqa: E402
from ppir.plan import build_plan  # noqa: E402
from ppir.torch import NonFiniteLoss, PipelineRuntime, SetupError, ShapeMismatch  # noqa: E402
from ppir.torch.errors import ModelError  # noqa: E402
from ppir.torch.model import build_stages, load_model, parse_options, split_batch  # noqa: E402
from ppir.torch.reference import max_grad_diff, reference_grads  # noqa: E402

CPU = torch.device("cpu")


def model(width: int = 5, batch: int = 6):
    def build_stage(stage, num_stages):
        torch.manual_seed(stage)
        return torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh())

    def make_batch(step):
        g = torch.Generator().manual_seed(step)
        return torch.randn(batch, width, generator=g), torch.randn(batch, width, generator=g)

    return types.SimpleNamespace(
        build_stage=build_stage, make_batch=make_batch, loss_fn=lambda y, t: ((y - t) ** 2).mean()
    )


class Pair(torch.nn.Module):
    """A stage taking and returning a tuple (x, mask): a float and an integer tensor."""

    def __init__(self, stage, width=5):
        super().__init__()
        torch.manual_seed(stage)
        self.lin = torch.nn.Linear(width, width)

    def forward(self, x, mask):
        return torch.tanh(self.lin(x)) * (mask > 0), mask


def pair_model(batch=6, width=5):
    def make_batch(step):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(batch, width, generator=g)
        mask = (torch.arange(batch * width).reshape(batch, width) % 3).to(torch.int64)
        return (x, mask), torch.randn(batch, width, generator=g)

    return types.SimpleNamespace(
        build_stage=lambda s, n: Pair(s, width),
        make_batch=make_batch,
        loss_fn=lambda y, t: ((y[0] - t) ** 2).mean(),
    )


def split_iw(s):
    progs = []
    for r in range(s.ranks):
        out, ws = [], []
        for a in s.compute_actions(r):
            if a.kind is OpKind.B:
                out.append(Action(a.stage, OpKind.I, a.mb))
                ws.append(Action(a.stage, OpKind.W, a.mb))
            else:
                out.append(a)
        progs.append(tuple(out + ws))
    return s.replace_programs(tuple(progs))


def runtime(plan, m, **kw):
    stages = build_stages(m, plan["stages_of_rank"][0], plan["stages"], CPU, 0)
    return PipelineRuntime(plan, stages, m.loss_fn, **kw)


@pytest.mark.parametrize("kind", ["tensor", "tuple"])
@pytest.mark.parametrize("split", [False, True])
def test_local_hand_offs_match_the_reference(split, kind):
    s = ppir.load_schedule("looped_bfs", {"P": 1, "M": 3, "v": 4})
    s = ppir.lower(split_iw(s) if split else s)
    m = model() if kind == "tensor" else pair_model()
    rt = runtime(build_plan(s), m)
    loss = rt.step_microbatches(*split_batch(m, 0, 3, CPU, 0))
    ref_loss, ref = reference_grads(m, 4, 0, CPU)
    assert abs(loss.item() - ref_loss.item()) < 1e-6
    diff, _ = max_grad_diff(rt.stages, rt.stage_ids, ref)
    assert diff < 1e-6
    assert rt.peak_saved == 12  # looped BFS keeps every (stage, microbatch) until its backward


def test_step_cuts_a_batch_into_microbatches():
    m = pair_model()
    plan = build_plan(ppir.lower(ppir.load_schedule("gpipe", {"P": 1, "M": 3})))
    rt = runtime(plan, m)
    x, y = m.make_batch(0)
    loss = rt.step(x, y)
    ref_loss, _ = reference_grads(m, 1, 0, CPU)
    assert abs(loss.item() - ref_loss.item()) < 1e-6
    with pytest.raises(ValueError, match=r"dim 0 must split into 3 equal microbatches"):
        rt.step(torch.zeros(4, 5), y)


def test_world_size_mismatch_is_named():
    plan = build_plan(ppir.lower(ppir.load_schedule("1f1b", {"P": 4, "M": 4})))
    with pytest.raises(
        SetupError, match=r"rank 0: the plan is for 4 ranks but the pipeline group has 1"
    ):
        PipelineRuntime(plan, [], lambda y, t: y.sum())


def test_stage_count_mismatch_is_named():
    plan = build_plan(ppir.lower(ppir.load_schedule("looped_bfs", {"P": 1, "M": 2, "v": 2})))
    with pytest.raises(
        SetupError, match=r"1 stage module given, but this rank holds stages \[0, 1\]"
    ):
        PipelineRuntime(plan, [torch.nn.Linear(2, 2)], lambda y, t: y.sum())


def test_plan_metadata_is_enforced():
    plan = build_plan(ppir.lower(ppir.load_schedule("looped_bfs", {"P": 1, "M": 2, "v": 2})))
    plan["meta"] = {
        "boundaries": {"0": ["t", "float32", [3, 5]], "1": ["t", "float32", [3, 7]]},
        "source": "test",
    }
    m = model()
    rt = runtime(plan, m)
    with pytest.raises(
        ShapeMismatch,
        match=r"rank 0, instruction #0 \(0F0\): the output of "
        r"stage 0 has shape \(3, 5\) float32 but the plan's "
        r"metadata for boundary 1 says \(3, 7\) float32",
    ):
        rt.step_microbatches(*split_batch(m, 0, 2, CPU, 0))


def test_non_finite_loss_names_rank_step_and_microbatch(capsys):
    m = model()
    m.loss_fn = lambda y, t: ((y - t) ** 2).mean() * (float("nan") if y[0, 0] > -9 else 1)
    plan = build_plan(ppir.lower(ppir.load_schedule("gpipe", {"P": 1, "M": 2})))
    rt = runtime(plan, m)
    with pytest.raises(
        NonFiniteLoss, match=r"rank 0: the loss is nan at step 0, microbatch 0 \(stage 0\)"
    ):
        rt.step_microbatches(*split_batch(m, 0, 2, CPU, 0))
    rt = runtime(plan, m, nonfinite="warn")
    rt.step_microbatches(*split_batch(m, 0, 2, CPU, 0))
    assert "warning: rank 0: the loss is nan at step 0, microbatch 0" in capsys.readouterr().err


def test_factory_returning_the_wrong_thing():
    m = model()
    m.build_stage = lambda stage, n: [torch.nn.Linear(2, 2)]
    with pytest.raises(
        ModelError,
        match=r"rank 3: build_stage\(5, 8\) returned list, "
        r"expected a torch.nn.Module",
    ):
        build_stages(m, [5], 8, CPU, 3)


def test_batches_must_split_into_microbatches():
    with pytest.raises(
        ModelError,
        match=r"inputs have shape \(6, 5\): dim 0 must split into "
        r"4 equal microbatches",
    ):
        split_batch(model(), 0, 4, CPU, 0)
    with pytest.raises(ModelError, match=r"must split into 4 equal data-parallel replicas"):
        split_batch(model(), 0, 1, CPU, 0, replicas=4, replica=1)
    m = model()
    m.make_batch = lambda step: (torch.zeros(13 * 16, 5), torch.zeros(13 * 16, 5))
    with pytest.raises(ModelError) as e:  # every size it splits into
        split_batch(m, 0, 3, CPU, 0)
    assert str(e.value).endswith(
        "(208 splits into 1, 2, 4, 8, 13, 16, 26, 52, 104 or 208 equal parts)"
    ), str(e.value)
    m = model()
    m.make_batch = lambda step: torch.zeros(4)
    with pytest.raises(ModelError, match="must return \\(inputs, targets\\)"):
        split_batch(m, 0, 2, CPU, 0)


def test_the_sizes_a_batch_splits_into_include_its_large_ones():
    """Divisors were searched up to 4096 only: a batch of 10,007 (a prime) 'splits into 1
    equal parts', one of 8,198 'into 1 or 2'; and a batch of 1 said '1 equal parts'."""
    from ppir.torch.values import split_batch as split

    cases = {
        10_007: "(10007 splits into 1 or 10007 equal parts)",
        8_198: "(8198 splits into 1, 2, 4099 or 8198 equal parts)",
        5_040: "(5040 splits into 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, ..., 5040 equal parts)",
        1: "(a batch of 1 does not split)",
    }
    for size, tail in cases.items():
        n = 11 if size == 5040 else 3
        with pytest.raises(ValueError) as e:
            split(torch.zeros(size, 2), n, "the inputs")
        assert str(e.value).endswith(tail), str(e.value)


def test_an_error_in_a_stage_keeps_its_traceback_and_names_the_stage_and_input():
    s = ppir.lower(ppir.load_schedule("looped_bfs", {"P": 1, "M": 3, "v": 4}))
    m = model()
    good = m.build_stage
    m.build_stage = lambda stage, n: torch.nn.Linear(7, 5) if stage == 2 else good(stage, n)
    rt = runtime(build_plan(s), m)
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied") as e:
        rt.step_microbatches(*split_batch(m, 0, 3, CPU, 0))
    assert type(e.value) is RuntimeError  # the user's own exception, re-raised unchanged
    if sys.version_info >= (3, 11):
        (note,) = e.value.__notes__
        assert note == (
            "rank 0: stage 2's forward (inferring its output's shapes), given (2, 5) float32 "
            "from the previous stage"
        ), note


def test_a_first_stage_that_rejects_the_batch_names_make_batch_not_a_previous_stage():
    s = ppir.lower(ppir.load_schedule("looped_bfs", {"P": 1, "M": 3, "v": 2}))
    m = model()
    good = m.build_stage
    m.build_stage = lambda stage, n: torch.nn.Linear(7, 5) if stage == 0 else good(stage, n)
    rt = runtime(build_plan(s), m)  # stage 1's input shape is inferred by running stage 0
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied") as e:
        rt.step_microbatches(*split_batch(m, 0, 3, CPU, 0))
    if sys.version_info >= (3, 11):
        (note,) = e.value.__notes__
        assert note.startswith("rank 0: stage 0's forward (inferring its output's shapes)")
        assert note.endswith("by make_batch"), note


def test_an_error_in_the_first_stage_names_the_instruction_and_the_microbatch():
    s = ppir.lower(ppir.load_schedule("gpipe", {"P": 1, "M": 2}))
    m = model()
    m.build_stage = lambda stage, n: torch.nn.Linear(7, 5)
    rt = runtime(build_plan(s), m)
    with pytest.raises(RuntimeError, match="mat1 and mat2") as e:
        rt.step_microbatches(*split_batch(m, 0, 2, CPU, 0))
    if sys.version_info >= (3, 11):
        assert e.value.__notes__ == [
            "rank 0, instruction #0 (0F0): stage 0's forward, given (3, 5) float32 from the "
            "microbatch's inputs"
        ]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are Python 3.11+")
def test_an_error_in_loss_fn_keeps_its_traceback_and_names_both_shapes():
    """Was the user's traceback alone, naming the rank but not the stage, microbatch or the
    shapes loss_fn was given (a target of the wrong shape is the usual cause)."""
    s = ppir.lower(ppir.load_schedule("gpipe", {"P": 1, "M": 2}))
    m = model()
    m.make_batch = lambda step: (torch.randn(6, 5), torch.zeros(6, 1, dtype=torch.int64))
    m.loss_fn = lambda y, t: torch.nn.functional.cross_entropy(y, t)  # t: (3, 1), not (3,)
    rt = runtime(build_plan(s), m)
    with pytest.raises(RuntimeError) as e:
        rt.step_microbatches(*split_batch(m, 0, 2, CPU, 0))
    assert e.value.__notes__ == [
        "rank 0, instruction #0 (0F0): loss_fn(output, target) of stage 0, microbatch 0, given "
        "output (3, 5) float32 and target (3, 1) int64"
    ]
    assert any(f.name == "<lambda>" for f in traceback.extract_tb(e.value.__traceback__))


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are Python 3.11+")
@pytest.mark.parametrize("where", ["stage", "loss"])
def test_an_error_in_the_verify_grads_reference_says_it_ran_on_the_whole_batch(where):
    """A model that holds a microbatch's size trains pipelined and fails only in the
    single-process reference of --verify-grads, on the whole global batch.  Was the user's
    traceback alone: 'Expected input batch_size (3) to match target batch_size (6)', with no
    word of the reference, whose batch is no microbatch of the run."""
    m = model()  # 6 samples, microbatches of 3
    good = m.build_stage
    if where == "stage":
        m.build_stage = lambda stage, n: (
            torch.nn.Unflatten(0, (1, 3)) if stage == 1 else good(stage, n)
        )
        note = "stage 1's forward, given (6, 5) float32"
    else:
        m.loss_fn = lambda y, t: ((y.reshape(3, 5) - t.reshape(3, 5)) ** 2).mean()
        note = "loss_fn(output, target), given output (6, 5) float32 and target (6, 5) float32"
    with pytest.raises(RuntimeError) as e:
        reference_grads(m, 3, 0, CPU)
    assert e.value.__notes__ == [
        "--verify-grads' single-process reference, on the whole batch of make_batch(0): " + note
    ]


class _Boom(torch.autograd.Function):
    """The identity, whose backward fails: a user's custom autograd code."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        raise ValueError("boom in backward")


class _BoomStage(torch.nn.Module):
    def forward(self, x):
        return _Boom.apply(x)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are Python 3.11+")
@pytest.mark.parametrize(
    "name, params, boom, note",
    [
        ("gpipe", {"P": 1, "M": 2}, 0, "rank 0, instruction #2 (0B0): stage 0's backward"),
        ("zbv", {"P": 1, "M": 2}, 1, "rank 0, instruction #2 (1I0): stage 1's backward (input "
         "gradient)"),
        # stage 0's input needs no gradient: its whole backward runs in W
        ("zbv", {"P": 1, "M": 2}, 0, "rank 0, instruction #6 (0W0): stage 0's backward (weight "
         "gradients)"),
    ],
)  # fmt: skip
def test_an_error_in_a_backward_keeps_its_traceback_and_names_the_instruction(
    name, params, boom, note
):
    """Was the user's traceback alone, naming the rank but not the stage or the instruction
    (a forward's error names them)."""
    m = model()
    good = m.build_stage
    m.build_stage = lambda s, n: (
        torch.nn.Sequential(good(s, n), _BoomStage()) if s == boom else good(s, n)
    )
    rt = runtime(build_plan(ppir.lower(ppir.load_schedule(name, params))), m)
    with pytest.raises(ValueError, match="boom in backward") as e:
        rt.step_microbatches(*split_batch(m, 0, 2, CPU, 0))
    assert e.value.__notes__ == [note]
    assert any(f.name == "backward" for f in traceback.extract_tb(e.value.__traceback__))


def test_loss_must_be_a_scalar():
    s = ppir.lower(ppir.load_schedule("gpipe", {"P": 1, "M": 2}))
    m = model()
    m.loss_fn = lambda y, t: (y - t) ** 2
    rt = runtime(build_plan(s), m)
    with pytest.raises(ModelError, match=r"loss_fn on stage 0, microbatch 0 returned \(3, 5\)"):
        rt.step_microbatches(*split_batch(m, 0, 2, CPU, 0))


@pytest.mark.parametrize(
    "loss_fn",
    [
        lambda y, t: torch.tensor(3.0),  # a constant
        lambda y, t: ((y.detach() - t) ** 2).mean(),  # detached from the stage's output
    ],
)
def test_a_loss_without_autograd_names_loss_fn(loss_fn):
    """Was torch's 'element 0 of tensors does not require grad' from inside the backward."""
    s = ppir.lower(ppir.load_schedule("gpipe", {"P": 1, "M": 2}))
    m = model()
    m.loss_fn = loss_fn
    rt = runtime(build_plan(s), m)
    with pytest.raises(ModelError, match=r"loss_fn on stage 0, microbatch 0 returned a tensor "
                       r"that does not require grad"):  # fmt: skip
        rt.step_microbatches(*split_batch(m, 0, 2, CPU, 0))


def test_model_modules_are_checked(tmp_path):
    bad = tmp_path / "bad_model.py"
    bad.write_text("def build_stage(stage, n):\n    return None\n")
    with pytest.raises(ModelError, match="lacks make_batch, loss_fn"):
        load_model(str(bad))
    with pytest.raises(ModelError, match="does not exist"):
        load_model(str(tmp_path / "missing.py"))
    assert parse_options(["layers=4", "lr=0.5", "name=x"]) == {"layers": 4, "lr": 0.5, "name": "x"}
    # only plain decimal numbers become numbers: 'mode=nan' is the text a model switches on
    assert parse_options(["mode=nan", "a=inf", "d=1_000", "e=1e-3", "f=-2"]) == {
        "mode": "nan",
        "a": "inf",
        "d": "1_000",
        "e": 1e-3,
        "f": -2,
    }


def test_a_model_file_says_what_it_defines_when_it_lacks_the_api(tmp_path):
    bad = tmp_path / "wrong_names.py"
    bad.write_text("import os\ndef build(s, n): pass\ndef batch(step): pass\nloss = len\n")
    with pytest.raises(ModelError) as e:
        load_model(str(bad))
    msg = str(e.value)
    assert "lacks build_stage, make_batch, loss_fn; it defines batch, build (" in msg, msg
    assert "build_stage(stage, num_stages), make_batch(step) and loss_fn(output, target)" in msg


@pytest.mark.parametrize(
    "source, said",
    [
        (
            "def build_stage(stage): pass\n",
            "build_stage(stage) at wrong_args.py:1 cannot be called as build_stage(stage, "
            "num_stages), as the runtime calls it (too many positional arguments); a model "
            "module defines build_stage(stage, num_stages), make_batch(step) and",
        ),
        ("def make_batch(): pass\n", "make_batch() at wrong_args.py:1 cannot be called as "),
        ("def loss_fn(output): pass\n", "loss_fn(output) at wrong_args.py:1 cannot be called "),
        (
            "def make_optimizer(params, lr): pass\n",
            "make_optimizer(params, lr) at wrong_args.py:1 cannot be called as "
            "make_optimizer(params), as the runtime calls it (missing a required argument: "
            "'lr')",
        ),
    ],
)
def test_a_model_function_with_the_wrong_parameters_is_refused_when_loaded(tmp_path, source, said):
    """Was a TypeError traceback through the runtime's frames alone (none of the user's), at
    the first call on each rank, after the process group had started."""
    api = {n: f"def {n}({a}): pass\n" for n, a in (("build_stage", "s, n"),
           ("make_batch", "step"), ("loss_fn", "y, t"))}  # fmt: skip
    name = source.split("(")[0].removeprefix("def ")
    bad = tmp_path / "wrong_args.py"
    bad.write_text(source + "".join(v for n, v in api.items() if n != name))
    with pytest.raises(ModelError) as e:
        load_model(str(bad))
    assert str(e.value).startswith(f"model '{bad}': {said}"), str(e.value)


def test_a_model_whose_loss_fn_is_a_loss_class_is_refused_when_loaded(tmp_path):
    """``loss_fn = nn.CrossEntropyLoss`` (no parentheses) was torch's 'Boolean value of Tensor
    with more than one value is ambiguous' from the class's constructor, at the first loss."""
    bad = tmp_path / "loss_class.py"
    bad.write_text(
        "import torch\ndef build_stage(s, n): pass\ndef make_batch(step): pass\n"
        "loss_fn = torch.nn.CrossEntropyLoss\n"
    )
    with pytest.raises(ModelError) as e:
        load_model(str(bad))
    assert str(e.value) == (
        f"model '{bad}': loss_fn is the class CrossEntropyLoss: called as loss_fn(output, "
        "target) it makes a CrossEntropyLoss instead of a loss; give an instance, "
        "CrossEntropyLoss()"
    )


def test_a_model_function_torch_or_a_class_gives_is_taken_as_it_is(tmp_path):
    (tmp_path / "torch_loss.py").write_text(
        "import torch\nbuild_stage = torch.nn.Linear\ndef make_batch(step): pass\n"
        "loss_fn = torch.nn.functional.cross_entropy\nmake_optimizer = torch.optim.SGD\n"
    )
    (tmp_path / "module_loss.py").write_text(
        "import torch\ndef build_stage(s, n): pass\ndef make_batch(step): pass\n"
        "loss_fn = torch.nn.MSELoss()\n"
    )
    for f in ("torch_loss.py", "module_loss.py"):
        load_model(str(tmp_path / f))


@pytest.mark.parametrize(
    "options, said",
    [
        (
            {"widht": 8},
            "--module-opt widht=8: model '{m}' has no option 'widht' (its configure(width=16, "
            "depth=2) at keyword_opts.py:4); did you mean 'width'?",
        ),
        (
            {"width": 8, "colour": "red"},
            "--module-opt colour=red: model '{m}' has no option 'colour' (its "
            "configure(width=16, depth=2) at keyword_opts.py:4)",
        ),
    ],
)
def test_a_module_opt_that_configure_does_not_take_is_named(tmp_path, options, said):
    """Was a TypeError traceback from the call of configure() (no frame of the user's), exit
    1 on every rank of ppir launch, a raw traceback from ppir profile."""
    m = tmp_path / "keyword_opts.py"
    m.write_text(API + "def configure(width=16, depth=2):\n    global SEEN\n    SEEN = width\n")
    with pytest.raises(ModelError) as e:
        load_model(str(m), options)
    assert str(e.value) == said.format(m=m)
    assert not hasattr(sys.modules[f"ppir_user_model_{m.stem}"], "SEEN")  # not called


def test_a_configure_that_needs_an_option_not_given_says_which(tmp_path):
    m = tmp_path / "needs_depth.py"
    m.write_text(API + "def configure(width, depth):\n    pass\n")
    with pytest.raises(ModelError) as e:
        load_model(str(m), {"width": 3})
    assert str(e.value) == (
        f"model '{m}': its configure(width, depth) at needs_depth.py:4 cannot take width=3 "
        "(missing a required argument: 'depth')"
    )
    free = tmp_path / "any_opts.py"  # configure(**options) decides for itself
    free.write_text(API + "def configure(**options):\n    global SEEN\n    SEEN = options\n")
    assert load_model(str(free), {"any": 1}).SEEN == {"any": 1}


def test_a_model_file_imports_the_files_beside_it(tmp_path, monkeypatch):
    """As ``python proj/model.py`` runs it: from any working directory, the module's folder is
    on its path (a model split over several files)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "sibling_layers.py").write_text("WIDTH = 3\n")
    (proj / "split_model.py").write_text(
        "from sibling_layers import WIDTH\n"
        "def build_stage(s, n): return None\n"
        "def make_batch(step): return None\n"
        "def loss_fn(y, t): return None\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # restored afterwards
    monkeypatch.delitem(sys.modules, "sibling_layers", raising=False)
    mod = load_model("proj/split_model.py")
    assert mod.WIDTH == 3 and sys.path[0] == str(proj.resolve())
    monkeypatch.delitem(sys.modules, mod.__name__)
    monkeypatch.delitem(sys.modules, "sibling_layers")


def test_two_model_files_of_the_same_name_are_two_modules(tmp_path):
    mods = []
    for d, value in (("a", 1), ("b", 2)):
        (tmp_path / d).mkdir()
        f = tmp_path / d / "same_name_model.py"
        f.write_text(f"VALUE = {value}\n" + API)
        mods.append(load_model(str(f)))
    assert [m.VALUE for m in mods] == [1, 2]  # the second was the first, by its file's stem
    assert load_model(str(tmp_path / "a" / "same_name_model.py")) is mods[0]  # imported once


API = "def build_stage(s, n): pass\ndef make_batch(step): pass\ndef loss_fn(y, t): pass\n"


def test_runtime_accepts_schedules_and_plan_files(tmp_path):
    from ppir.plan import save_plan

    s = ppir.lower(ppir.load_schedule("gpipe", {"P": 1, "M": 2}))
    m = model()
    stages = build_stages(m, [0], 1, CPU, 0)
    save_plan(build_plan(s), tmp_path / "p.json")
    for program in (s, build_plan(s), tmp_path / "p.json", str(tmp_path / "p.json")):
        rt = PipelineRuntime(program, stages, m.loss_fn)
        assert rt.plan["digest"] == build_plan(s)["digest"]
    with pytest.raises(TypeError, match="expected a plan"):
        PipelineRuntime(42, stages, m.loss_fn)


def test_gpt_example_trains_in_one_process():
    """The example's API on one rank: loss falls over a few optimizer steps."""
    from pathlib import Path

    from ppir.torch.model import make_optimizer

    gpt = load_model(str(Path(__file__).parent.parent / "examples" / "gpt_model.py"))
    old = dict(gpt.CONFIG)
    try:
        gpt.configure(layers=2, d_model=32, seq=8, batch=8, lr=1e-2)
        plan = build_plan(ppir.lower(ppir.load_schedule("1f1b", {"P": 1, "M": 2})))
        rt = runtime(plan, gpt)
        opt = make_optimizer(gpt, rt.parameters(), 0.0)
        losses = []
        for step in range(15):
            opt.zero_grad()
            losses.append(rt.step_microbatches(*split_batch(gpt, step, 2, CPU, 0)).item())
            opt.step()
        assert losses[-1] < losses[0] - 0.5, losses
    finally:
        gpt.CONFIG.clear()
        gpt.CONFIG.update(old)


def test_rank_output_is_written_a_whole_line_at_a_time(monkeypatch):
    # Ranks share the launcher's stdout; under PYTHONUNBUFFERED print() wrote the text and its
    # newline in two writes, and two ranks' lines spliced ("... msverify-params: ...").
    import io

    from ppir.torch.run import whole_lines

    class Raw(io.RawIOBase):
        def __init__(self):
            self.writes = []

        def writable(self):
            return True

        def write(self, b):
            self.writes.append(bytes(b))
            return len(b)

    streams = {}
    for name in ("stdout", "stderr"):
        raw = Raw()
        streams[name] = raw
        monkeypatch.setattr(sys, name, io.TextIOWrapper(raw, write_through=True))  # as -u
    print("step 2", flush=True)
    assert streams["stdout"].writes == [b"step 2", b"\n"]  # what splices
    whole_lines()
    print("step 3", flush=True)
    print("verify-params: ok")
    print("error", file=sys.stderr)
    assert streams["stdout"].writes[2:] == [b"step 3\n", b"verify-params: ok\n"]
    assert streams["stderr"].writes == [b"error\n"]


def test_boundary_values_are_freed_without_the_cyclic_collector():
    """flatten/unflatten make no reference cycle holding the tensors: a received value is
    freed as soon as the runtime drops it, not at the next garbage collection (a cycle kept
    every F's input alive past its backward, about 9 % of a GPT stage's activations)."""
    import gc
    import weakref

    from ppir.torch import values as V

    gc.collect()
    gc.disable()
    try:
        value = (torch.ones(3), {"m": torch.zeros(2, dtype=torch.int64)})
        refs = [weakref.ref(t) for t in V.flatten(value)[0]]
        leaves, spec = V.flatten(value)
        again = V.unflatten(spec, leaves)
        assert again[0] is value[0] and again[1]["m"] is value[1]["m"]
        del value, leaves, again
        assert [r() for r in refs] == [None, None]
    finally:
        gc.enable()


def test_the_launch_summary_gives_peak_activations_in_a():
    """``ppir.run``'s last line counts the executor's chunk activations in A, the unit of
    ``ppir compile``: a chunk of interleaved 1F1B at v=2 is half a rank share."""
    from ppir.torch.run_report import in_a

    plan = build_plan(ppir.compile(ppir.load("interleaved_1f1b", P=2, M=4, v=2)).program)
    assert (in_a(3, plan), in_a(4, plan)) == ("1.5", "2")
    plan = build_plan(ppir.compile(ppir.load("1f1b", P=2, M=4)).program)
    assert in_a(3, plan) == "3"


def test_a_batch_whose_shapes_change_after_the_first_step_is_told_why():
    s = ppir.lower(ppir.load_schedule("looped_bfs", {"P": 1, "M": 2, "v": 2}))
    m = model(batch=4)
    rt = runtime(build_plan(s), m)
    rt.step_microbatches(*split_batch(m, 0, 2, CPU, 0))  # infers the boundaries: (2, 5)
    m2 = model(batch=6)  # the next step's microbatches have 3 rows
    with pytest.raises(ShapeMismatch) as e:
        rt.step_microbatches(*split_batch(m2, 1, 2, CPU, 0))
    text = str(e.value)
    assert (
        "inputs has shape (3, 5) float32 but the plan's metadata for boundary 0 says (2, 5)" in text
    )
    assert "(at step 1: a boundary's shapes are fixed for the whole run" in text
    assert text.endswith(
        "; pad a batch of another size to the first one's, or drop it: a data loader's smaller "
        "last batch (drop_last=True), a make_batch whose shapes change from step to step)"
    )


def test_a_data_parallel_rank_names_the_pipeline_rank_whose_program_it_runs():
    from ppir.torch.executor import Executor

    where = Executor._where
    assert where(types.SimpleNamespace(rank=3, pp_rank=1, index=7), {"ir": "1F0"}) == (
        "rank 3 (pipeline rank 1's program), instruction #7 (1F0)"
    )
    assert where(types.SimpleNamespace(rank=1, pp_rank=1, index=0), {"ir": "1F0"}) == (
        "rank 1, instruction #0 (1F0)"
    )


@pytest.mark.parametrize("first_amp", [False, True])
def test_a_step_under_another_autocast_than_the_first_is_told_so(first_amp):
    """Under ``torch.autocast`` a stage's output is bfloat16: the boundary's dtype that the
    first step fixed changes when a later step runs with autocast switched the other way."""
    s = ppir.lower(ppir.load_schedule("looped_bfs", {"P": 1, "M": 2, "v": 2}))
    torch.manual_seed(0)
    stages = [torch.nn.Linear(5, 5), torch.nn.Linear(5, 5)]
    rt = PipelineRuntime(build_plan(s), stages, lambda y, t: ((y.float() - t) ** 2).mean())
    x, t = torch.randn(4, 5), torch.randn(4, 5)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=first_amp):
        rt.step(x, t)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=not first_amp):
        with pytest.raises(ShapeMismatch) as e:
            rt.step(x, t)
    was, now = ("bfloat16", "float32") if first_amp else ("float32", "bfloat16")
    assert f"has shape (2, 5) {now} but the plan's metadata for boundary 1 says (2, 5) {was}" in (
        str(e.value)
    )
    assert str(e.value).endswith(
        "inferred); only the dtype differs: run every step under the same torch.autocast (or "
        "none) as the first"
    )
