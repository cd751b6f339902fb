"""The measured costs of one ``ppir profile`` run: trimmed means of the samples its ranks
gathered (:func:`ppir.profile.launch.gather`), as :class:`ppir.analysis.measured.MeasuredCosts`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ppir.analysis.measured import MeasuredCosts
from ppir.analysis.measured_text import share_range
from ppir.profile.selfcheck import oversubscribed

if TYPE_CHECKING:
    from ppir.profile.launch import ProfileSpec


def summarize(spec: ProfileSpec, data: dict) -> MeasuredCosts:
    """Trimmed means of the samples of each piece, in stage order; the message time is the
    trimmed mean of the messages' times in the run (:func:`.samples.message_times`), the
    isolated ping-pong figure when the run had none; the post time the trimmed mean of the
    groups' posts in the run, in processor time (:func:`.samples.post_times`) and in wall time
    (:func:`.samples.post_wall_times`; both 0 without groups); the samples of a microbatch
    (``data["microbatch_size"]``, which :func:`profile` adds) kept as ``microbatch_size``; on
    CPU with one thread per rank (``data["threads"]``), each piece's processor share
    (:func:`.samples.processor_share`); ``step_time``, the median wall time of the timed steps
    with whole backwards (``data["step_walls"]``), the upper one of two; on CPU, ``core_use``:
    the median over the timed steps of the ranks' processor seconds over the wall seconds of
    the cores they could use (``min(processors, ranks x threads)``, ``threads`` being torch's
    threads per rank, ``data["threads"]``, which the info then holds too).  Where the ranks
    outnumbered the cores, with its ``oversubscription`` (:func:`.selfcheck.oversubscribed`)."""
    from ppir.analysis.measured_shared import SharedBytes
    from ppir.profile.samples import (
        message_times,
        post_times,
        post_wall_times,
        processor_share,
        trimmed_mean,
        upper_median,
        usable_cores,
    )

    pieces = data["pieces"]
    in_run = message_times(data.get("groups", []))
    posts = post_times(data.get("groups", []))
    isolated = data.get("transfer_isolated", [])
    transfer = trimmed_mean(in_run) if in_run else (upper_median(isolated) if isolated else 0)
    info = (
        ("model", spec.model),
        ("schedule", "1f1b"),
        ("ranks", spec.ranks),
        ("microbatches", spec.num_microbatches),
        *((("microbatch_size", data["microbatch_size"]),) if "microbatch_size" in data else ()),
        ("steps", spec.steps),
        ("device", data.get("device", spec.device)),
    )
    if info[-1][1] == "cpu":  # the ranks shared these cores, and so will a run with more ranks
        info += (("processors", cpu_cores()),)
        if data.get("threads"):  # torch's threads per rank: a rank could use that many cores
            info += (("threads", data["threads"]),)
    if isolated:
        info += (("transfer_isolated", upper_median(isolated)),)
    walls = data.get("step_walls", ())
    whole = [w[1] for w in walls if w[0] is False]
    if whole:  # the timed 1F1B steps with whole backwards (the others split B into I and W)
        info += (("step_time", upper_median(whole)),)
    cores = dict(info).get("processors")
    if cores and walls and all(len(w) > 2 and w[1] > 0 for w in walls):
        usable = usable_cores(cores, spec.ranks, dict(info).get("threads", 1))
        use = [min(1.0, w[2] / (usable * w[1])) for w in walls]  # above 1: clock granularity
        info += (("core_use", upper_median(use)),)
    mc = MeasuredCosts(
        len(pieces),
        tuple(trimmed_mean(p["F"]) for p in pieces),
        tuple(trimmed_mean(p["B"]) for p in pieces),
        tuple(trimmed_mean(p["I"]) for p in pieces),
        tuple(trimmed_mean(p["W"]) for p in pieces),
        float(transfer),
        tuple(trimmed_mean(p["FB"]) for p in pieces),
        tuple(float(p["out_bytes"]) for p in pieces[:-1]),
        tuple(float(p["activation_bytes"]) for p in pieces),
        tuple(float(p["param_bytes"]) for p in pieces),
        info,
        trimmed_mean(posts),
        trimmed_mean(post_wall_times(data.get("groups", []))),
        # the optimizer's state per piece; none when a rank could not make the optimizer
        tuple(float(p["optimizer_bytes"]) for p in pieces)
        if all(p.get("optimizer_bytes", -1) >= 0 for p in pieces)
        else (),
        tuple(trimmed_mean(p["W_late"]) for p in pieces)
        if all(p.get("W_late") for p in pieces)
        else (),
        tuple(float(p.get("frozen_bytes", 0)) for p in pieces),
        tuple(
            SharedBytes(
                tuple(e["stages"]),
                float(e["param_bytes"]),
                float(e["frozen_bytes"]),
                float(max(0, e["optimizer_bytes"])),  # -1: no optimizer_bytes at all
            )
            for p in pieces
            for e in p.get("shared", ())
        ),
        tuple(processor_share(p) for p in pieces)
        if "processors" in dict(info) and data.get("threads") == 1
        else (),
        by_position(
            pieces, data.get("orders", []), "processors" in dict(info) and data.get("threads") == 1
        ),
    )
    return oversubscribed(mc)  # where its ranks outnumbered the cores


def by_position(pieces: list, orders: list, shares: bool = False) -> tuple:
    """``MeasuredCosts.order``: per piece, the trimmed means of its F, B and I samples by where
    their input was made (on the rank or on another), from 1F1B's steps (``pieces``) and the
    further orders' (``orders``: (piece, samples by position), :mod:`ppir.profile.orders`);
    the first piece's F and the last piece's B and I have no near position (their near
    entries repeat the far ones); () unless the further orders ran (:func:`.orders.why_none`)
    and every other position was timed; ``shares`` (CPU, a
    thread per rank): also ``near_share`` and ``far_share``, per piece the processor share of
    its ops in each position (:func:`.samples.processor_share`), for ``MeasuredCosts.op_times``."""
    from ppir.analysis.measured_order import ORDER_KEYS
    from ppir.profile.samples import processor_share, trimmed_mean

    if not orders:
        return ()
    sums = ("near_cpu", "near_wall", "far_cpu", "far_wall")
    pooled = [{k: list(p.get(k, ())) for k in ORDER_KEYS} for p in pieces]
    total = [{k: p.get(k, 0.0) for k in sums} for p in pieces]
    for j, got in orders:
        for k, xs in got.items():
            if k in sums:
                total[j][k] += xs
            else:
                pooled[j][k] += xs
    n = len(pieces)
    for kind, lonely in (("F", 0), ("B", n - 1), ("I", n - 1)):
        pooled[lonely][f"{kind}_near"] = pooled[lonely][f"{kind}_far"]
    if not all(p[k] for p in pooled for k in ORDER_KEYS):
        return ()
    out = tuple((k, tuple(trimmed_mean(p[k]) for p in pooled)) for k in ORDER_KEYS)
    if not shares:
        return out
    return out + tuple(
        (
            f"{w}_share",
            tuple(processor_share({"cpu": t[f"{w}_cpu"], "wall": t[f"{w}_wall"]}) for t in total),
        )
        for w in ("near", "far")
    )


BUSY_SHARE = 0.85
"""Below this mean processor share, with a core per rank, the profile says other work ran."""
BUSY_USE = 0.6
"""Below this ``core_use``, with more ranks than cores, the profile says other work ran."""


def busy_warning(m: MeasuredCosts) -> str:
    """A warning when the profile's ranks each had a core (ranks <= ``processors``) but their
    ops had one for less than :data:`BUSY_SHARE` of their time on average (``processor_share``),
    or when more ranks than cores used less than :data:`BUSY_USE` of the cores (``core_use``):
    other processes shared the cores, and the measured times hold their waits for one ('' when
    not).  On a quiet 2-core machine two ranks' ops had 0.93-1.00 of theirs; with the machine's
    other work running, 0.72-0.85.  Four ranks on those 2 cores kept 0.81-0.83 of them busy
    (the median over 1F1B's timed steps), and 0.51 while another job's tests ran (step by step
    0.34-0.57; 2026-12-04)."""
    info = dict(m.info)
    ranks, cores, share = info.get("ranks"), info.get("processors"), m.processor_share
    use = info.get("core_use")
    if ranks and cores and ranks > cores and use is not None and use < BUSY_USE:
        return (
            f"the {ranks} ranks kept only {use:.0%} of the {cores} cores busy in the timed "
            "steps, though they outnumber them: other work shared the cores while profiling, "
            "and the measured times hold its waits (profile again on a quiet machine for this "
            "model's own costs)"
        )
    if not share or not ranks or not cores or ranks > cores:
        return ""
    if sum(share) / len(share) >= BUSY_SHARE:
        return ""
    return (
        f"the ranks' ops had a processor for only {share_range(m)} % of their time, though "
        f"each of the {ranks} ranks had one of the {cores} cores: "
        "other work shared the cores while profiling, and the measured times hold its waits "
        "(profile again on a quiet machine for this model's own costs)"
    )


def cpu_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
