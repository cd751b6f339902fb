"""Forward-only evaluation with a training runtime: ``rt.evaluate(inputs, targets)``.

Contract:

* The evaluation program is compiled from the training plan on every rank alike: its program's
  compute order, the ``forward-only`` pass (each rank's forwards in their training order, as
  Megatron's ``forward_only=True`` and torch.distributed.pipelining's ``eval()`` run them),
  then lower-comms and overlap-comms, verified after each pass (:func:`ppir.compile`).
* Its forwards run under ``torch.no_grad()`` and keep nothing: no gradient is computed, no
  ``.grad`` changes, nothing is reduced across data-parallel replicas (each replica evaluates
  its own batch).  It runs in the modules' current mode: call ``.eval()`` on them first to
  turn dropout off, and ``.train()`` after.
* The batch is split into the plan's M microbatches as :meth:`PipelineRuntime.step` splits
  it; the loss returned (on the rank holding the last stage; None elsewhere) is the mean over
  microbatches of ``loss_fn``, like a training step's.  The boundary shapes are taken from the
  first evaluation batch (a collective, as at the first training step) and are then fixed.
"""

from __future__ import annotations

from ppir.plan import PlanError, build_plan, plan_schedule
from ppir.torch.errors import CommError

PASSES = "forward-only,lower-comms,overlap-comms"
EVALUATION_TAG = 1
"""The tag of an evaluation's messages (a training step's are 0): under gloo, a rank that
evaluates while its peer steps gets no answer instead of exchanging the wrong tensors."""


def evaluation_plan(plan: dict) -> dict:
    """The ``ppir.plan/2`` evaluation plan of a training plan (see the module docstring)."""
    from ppir import pipeline

    compiled = pipeline.compile(plan_schedule(plan), passes=PASSES)
    if not compiled.ok:
        raise PlanError(
            f"the evaluation program of this plan does not verify:\n{compiled.report.render()}"
        )
    return build_plan(compiled.program)


def evaluate(rt, inputs=None, targets=None):
    """One forward-only pass of runtime ``rt`` over its replica's batch (module docstring)."""
    xs = rt._split(inputs, "inputs", 0, "evaluate()") if rt.has_first_stage else None
    last = rt.plan["stages"] - 1
    ys = rt._split(targets, "targets", last, "evaluate()") if rt.has_last_stage else None
    rt._check_lists(xs, ys)
    try:
        ev = rt._evaluator
        if ev is None:  # the shapes are exchanged now (collective over the pipeline)
            ev = rt._evaluator = rt._executor(
                xs[0] if rt.has_first_stage else None, evaluation_plan(rt.plan)
            )
        loss = ev.step(xs, ys, rt.eval_count)
    except CommError as e:
        if not e.timeout:
            raise
        note = (
            "every rank of the pipeline calls evaluate() together: a peer in step() never answers"
        )
        raise CommError(f"{e}; {note}", e.peers, True) from None
    rt.eval_count += 1
    return loss
