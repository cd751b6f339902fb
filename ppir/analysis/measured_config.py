"""A cost config from a ``[measured]`` table (:mod:`ppir.analysis.measured`): what
:func:`ppir.analysis.config.make_config` returns for a cost file written by ``ppir profile``."""

from __future__ import annotations

from dataclasses import replace

from ppir.analysis.measured import from_table
from ppir.diagnostics import error


def measured_config(data: dict, kw: dict, model, where: str):
    """Op times and the message time come from the ``[measured]`` table; a model, if given,
    only sizes memory.  Settings that would give times another way are refused.  (Called by
    :func:`ppir.analysis.config.make_config`, which has checked the sections' keys.)"""
    from ppir.analysis.config import (
        COMM_MODELS,
        CostConfig,
        Link,
        positive_count,
        processors_setting,
    )

    measured = from_table(data["measured"], where)
    clash = [f"costs.{k}" for k in kw if k in ("F", "B", "I", "W", "FB", "stage_weights")]
    clash += [
        f"hardware.{k}"
        for k in data.get("hardware", {})
        if k not in ("ranks_per_node", "processors")
    ]
    clash += [f"comm.{k}" for k in data.get("comm", {}) if k not in ("free", "model")]
    if clash:
        raise error(
            "bad-config",
            f"{where}: {', '.join(clash)} cannot be combined with [measured]: the measured costs "
            "give every op and message time",
            hints=["drop those settings, or the [measured] table to use the analytic model"],
        )
    rpn = data.get("hardware", {}).get("ranks_per_node")
    if rpn is not None:
        rpn = positive_count(rpn, "hardware.ranks_per_node", where)
    comm = data.get("comm", {})
    cm = comm.get("model", "rendezvous")
    if cm not in COMM_MODELS:
        raise error("bad-config", f"{where}: comm.model must be one of {', '.join(COMM_MODELS)}")
    if comm.get("free") is True:  # free communication: no transfer, and no post either
        link = Link(0.0)
        measured = replace(measured, post=0.0, post_wall=0.0)
    else:  # a measured transfer of 0 (done while its post ran) keeps the measured posts
        link = Link(measured.transfer)
    processors = processors_setting(data.get("hardware", {}), where)
    if processors is None:  # hardware.processors = 0 (--processors 0): one per rank
        processors = dict(measured.info).get("processors")
    return CostConfig(
        model=model,
        recompute=kw.get("recompute", "none"),
        stage_layers=kw.get("stage_layers"),
        measured=measured,
        ranks_per_node=rpn,
        processors=processors or None,
        intra=link,
        inter=link,
        comm_model=cm,
    )
