"""Megatron-LM's interleaved 1F1B order, ported from NVIDIA/Megatron-LM
``megatron/core/pipeline_parallel/schedules.py`` at commit
d98e8a64ddf34856e74b24714e3bedb2f5a39553:

* ``get_schedule_table`` (the (microbatch, model chunk) of each virtual microbatch id);
* ``get_pp_rank_microbatches`` (warm-up count of the interleaved schedule);
* the validity checks at the top of ``forward_backward_pipelining_with_interleaving``;
* that function's three loops: ``for k in range(num_warmup_microbatches)`` runs
  ``forward_step_helper(k)``; the steady loop runs ``forward_step_helper(k + warmup)`` then
  ``backward_step_helper(k)``; the cool-down runs ``backward_step_helper(k)`` for the rest.
  ``get_model_chunk_id(k, forward=False)`` reverses the chunk, and ``backward_step_helper``
  pops the oldest stored activation of that chunk (``input_tensors[chunk].pop(0)``), so the
  backward microbatch of a chunk is its oldest forward not yet run backward.
"""

from __future__ import annotations


class MegatronRejects(ValueError):
    """Megatron raises for this (P, M, N)."""


def get_schedule_table(num_microbatches, num_model_chunks, microbatch_group_size_per_vp_stage):
    schedule_table = []
    for min_microbatch_id_in_group in range(
        0, num_microbatches, microbatch_group_size_per_vp_stage
    ):
        if min_microbatch_id_in_group + microbatch_group_size_per_vp_stage >= num_microbatches:
            schedule_table.extend(
                [
                    (microbatch_id, model_chunk_id)
                    for model_chunk_id in range(num_model_chunks)
                    for microbatch_id in range(min_microbatch_id_in_group, num_microbatches)
                ]
            )
        else:
            schedule_table.extend(
                [
                    (microbatch_id, model_chunk_id)
                    for model_chunk_id in range(num_model_chunks)
                    for microbatch_id in range(
                        min_microbatch_id_in_group,
                        min_microbatch_id_in_group + microbatch_group_size_per_vp_stage,
                    )
                ]
            )
    return schedule_table


def check(P, M, N):
    """The two checks that raise in ``forward_backward_pipelining_with_interleaving``."""
    if N > M or N < P:
        raise MegatronRejects(f"group size {N} outside [PP={P}, M={M}]")
    final_microbatch_group_size = M % N
    if 0 < final_microbatch_group_size < P:
        raise MegatronRejects(f"final group of {final_microbatch_group_size} < PP={P}")


def rank_order(P, M, v, rank, N=None):
    """Rank ``rank``'s compute order as torch-style action text (``stage F mb``)."""
    N = P if N is None else N  # microbatch_group_size_per_vp_stage defaults to the PP size
    check(P, M, N)
    total_num_microbatches = M * v
    num_warmup_microbatches = (P - rank - 1) * 2
    num_warmup_microbatches += (v - 1) * N
    if num_warmup_microbatches >= total_num_microbatches:
        num_warmup_microbatches = total_num_microbatches
    num_microbatches_remaining = total_num_microbatches - num_warmup_microbatches

    table = get_schedule_table(M, v, N)
    microbatch_id_table, model_chunk_id_table = zip(*table)

    def get_model_chunk_id(virtual_microbatch_id, forward):
        model_chunk_id = model_chunk_id_table[virtual_microbatch_id % total_num_microbatches]
        if not forward:
            model_chunk_id = v - model_chunk_id - 1
        return model_chunk_id

    input_tensors = [[] for _ in range(v)]  # microbatch ids whose activations a chunk holds
    out = []

    def forward_step_helper(k):
        chunk = get_model_chunk_id(k, forward=True)
        mb = microbatch_id_table[k]
        input_tensors[chunk].append(mb)
        out.append(f"{chunk * P + rank}F{mb}")

    def backward_step_helper(k):
        chunk = get_model_chunk_id(k, forward=False)
        mb = input_tensors[chunk].pop(0)
        out.append(f"{chunk * P + rank}B{mb}")

    for k in range(num_warmup_microbatches):
        forward_step_helper(k)
    for k in range(num_microbatches_remaining):
        forward_step_helper(k + num_warmup_microbatches)
        backward_step_helper(k)
    for k in range(num_microbatches_remaining, total_num_microbatches):
        backward_step_helper(k)
    return out
