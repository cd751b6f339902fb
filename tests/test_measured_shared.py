"""A parameter several measured stages share (a tied embedding and head) counts once where one
rank, or one merged stage, holds several of its holders (ppir.analysis.measured_shared)."""

from __future__ import annotations

import pytest
import tomllib

from ppir.analysis.measured import MeasuredCosts, from_table
from ppir.analysis.measured_footprint import measured_footprint
from ppir.analysis.measured_shared import SharedBytes
from ppir.diagnostics import PpirError
from ppir.frontend.loader import load_schedule
from ppir.pipeline import compile

# four measured stages; stage 0 (embedding) and stage 3 (head) share a 16 KiB weight, whose
# optimizer state (SGD momentum) is 16 KiB as well, and a 1 KiB frozen table
PARAM = (280064.0, 263680.0, 263680.0, 281088.0)
FROZEN = (1024.0, 0.0, 0.0, 1024.0)
OPT = PARAM
TIE = SharedBytes((0, 3), 16384.0, 0.0, 16384.0)
TABLE = SharedBytes((0, 3), 0.0, 1024.0, 0.0)


def _measured(shared=(TIE, TABLE)) -> MeasuredCosts:
    t = (1e-3,) * 4
    return MeasuredCosts(
        4, t, (2e-3,) * 4, t, t, 1e-4, message_bytes=(64.0,) * 3,
        activation_bytes=(1000.0,) * 4, param_bytes=PARAM, optimizer_bytes=OPT,
        frozen_bytes=FROZEN, shared=shared,
    )  # fmt: skip


def _ranks(name, P, m):
    c = compile(load_schedule(name, {"P": P, "M": 4}))
    return measured_footprint(c.program, m, c.memory).per_rank


def test_a_v_placement_holds_a_tied_weight_once():
    """ZB-V at P=2: rank 0 holds stages 0 and 3, one tensor (docs/executor.md): its
    parameters, gradients and optimizer state count the tied weight once (it reported
    0.54 MiB, stage 0 + stage 3, for 544,768 B held)."""
    r0, r1 = _ranks("zbv", 2, _measured())
    assert r0.stages == (0, 3)
    assert r0.grads == PARAM[0] + PARAM[3] - 16384 == 544768
    assert r0.params == 544768 + FROZEN[0] + FROZEN[3] - 1024
    assert r0.optimizer == OPT[0] + OPT[3] - 16384
    assert (r1.params, r1.grads, r1.optimizer) == (PARAM[1] + PARAM[2],) * 3
    untied = _ranks("zbv", 2, _measured(shared=()))[0]  # without the declaration: both
    assert untied.grads == PARAM[0] + PARAM[3]


def test_holders_on_two_ranks_each_hold_a_copy():
    """1F1B at P=2 on the 4-stage measurement: stage 0 = pieces 0, 1 (rank 0), stage 1 =
    pieces 2, 3 (rank 1): the runtime keeps a copy on each rank."""
    r0, r1 = _ranks("1f1b", 2, _measured())
    assert r0.grads == PARAM[0] + PARAM[1] and r1.grads == PARAM[2] + PARAM[3]
    assert r0.params == r0.grads + FROZEN[0] and r1.params == r1.grads + FROZEN[3]


def test_a_merged_stage_holds_a_tied_weight_once():
    m = _measured().fit(1)
    assert m.param_bytes == (sum(PARAM) - 16384,)
    assert m.frozen_bytes == (sum(FROZEN) - 1024,)
    assert m.optimizer_bytes == (sum(OPT) - 16384,)
    assert m.shared == ()  # one stage: nothing left to share
    two = _measured().fit(2)
    assert two.shared == (
        SharedBytes((0, 1), 16384.0, 0.0, 16384.0),
        SharedBytes((0, 1), 0, 1024.0),
    )
    assert two.param_bytes == (PARAM[0] + PARAM[1], PARAM[2] + PARAM[3])


def test_dualpipe_copies_hold_their_own():
    """Bidirectional DualPipe's two pipelines are two copies of the model: rank 0 runs model
    stage 0 of one and model stage 1 of the other, distinct tensors."""
    m = _measured().fit(2)
    c = compile(load_schedule("dualpipe", {"P": 2, "M": 4}))
    r0 = measured_footprint(c.program, m, c.memory).per_rank[0]
    assert r0.grads == sum(PARAM)


def test_the_file_keeps_them():
    text = _measured().to_toml()
    assert "shared = [{stages = [0, 3], param_bytes = 16384.0" in text
    back = from_table(tomllib.loads(text)["measured"], "t.toml")
    assert back.shared == (TIE, TABLE)
    old = from_table(tomllib.loads(_measured(shared=()).to_toml())["measured"], "t.toml")
    assert old.shared == () and "shared" not in _measured(shared=()).to_toml()


@pytest.mark.parametrize(
    "value, message",
    [
        ("[{stages = [0]}]", "t.toml: measured.shared[0].stages must list two or more distinct "
                             "measured stages (0 to 3), got [0]"),
        ("[{stages = [0, 4]}]", "measured.shared[0].stages must list two or more distinct"),
        ("[{stages = [0, 3], param_bytes = -1}]", "measured.shared[0].param_bytes must be "
                                                  "bytes >= 0, got -1"),
        ("[{stages = [0, 3], bytes = 1}]", "measured.shared[0]: unknown key 'bytes'"),
        ("[1]", "measured.shared[0] must be a table"),
        ("3", "measured.shared must be a list of tables, got 3"),
    ],
)  # fmt: skip
def test_a_bad_entry_is_named(value, message):
    text = _measured(shared=()).to_toml() + f"shared = {value}\n"
    with pytest.raises(PpirError) as e:
        from_table(tomllib.loads(text)["measured"], "t.toml")
    assert message in e.value.diagnostics[0].message
