"""Megatron-LM's memory and FLOP formulas, ported as test references (not product code).

Source: NVIDIA/Megatron-LM at commit d98e8a64ddf34856e74b24714e3bedb2f5a39553:

* ``megatron/training/theoretical_memory_usage.py``: ``compute_weight_and_optimizer_memory``
  and ``compute_activation_memory`` (the sequence-parallel + selective-recomputation branch
  ``report_theoretical_memory`` picks), dense models only: the MoE, MTP and multi-latent-attention
  branches are dropped (their inputs are None / False here) and every other line is kept, in
  order, with its arithmetic unchanged.
* ``megatron/training/training.py``: ``num_floating_point_operations``' ``transformer_flops``,
  dense multi-head / grouped-query attention only, one batch of ``batch_size`` sequences.

``args`` is a namespace carrying the Megatron argument names used below; :func:`megatron_args`
builds one from a ppir :class:`~ppir.analysis.models.ModelShape`.
"""

from __future__ import annotations

import math
from types import SimpleNamespace


def megatron_args(m, pp: int, vp: int | None = None, distributed_optimizer: bool = False):
    """The Megatron arguments describing ``m`` (a ModelShape) at pipeline size ``pp``."""
    return SimpleNamespace(
        kv_channels=m.hidden // m.heads,
        num_attention_heads=m.heads,
        hidden_size=m.hidden,
        group_query_attention=m.kv != m.heads,
        num_query_groups=m.kv,
        num_experts=None,
        swiglu=bool(m.swiglu),
        normalization="RMSNorm" if m.norm == "rmsnorm" else "LayerNorm",
        ffn_hidden_size=m.ffn_hidden,
        padded_vocab_size=m.vocab,
        untie_embeddings_and_output_weights=not m.tied,
        num_layers=m.layers,
        pipeline_model_parallel_size=pp,
        virtual_pipeline_model_parallel_size=vp,
        tensor_model_parallel_size=m.tp,
        data_parallel_size=m.dp,
        use_distributed_optimizer=distributed_optimizer,
        seq_length=m.seq,
        micro_batch_size=m.mbs,
    )


def compute_weight_and_optimizer_memory(args):
    # Attention projection size.
    query_projection_size = args.kv_channels * args.num_attention_heads
    query_projection_to_hidden_size_ratio = query_projection_size / args.hidden_size
    # Group Query Attention.
    if not args.group_query_attention:
        args.num_query_groups = args.num_attention_heads
    gated_linear_multiplier = 3 / 2 if args.swiglu else 1
    num_dense_layers = args.num_layers
    # RMSNorm does not have bias, but LayerNorm has.
    norm_size = 1 if args.normalization == "RMSNorm" else 2
    self_attn_term = (
        2
        * args.hidden_size
        * args.hidden_size
        * (
            # Attention.
            (1 + (args.num_query_groups / args.num_attention_heads))
            * query_projection_to_hidden_size_ratio
        )
    )
    embedding_size = args.hidden_size * args.padded_vocab_size
    final_layernorm = norm_size * args.hidden_size
    attention_params = self_attn_term
    dense_mlp_params = 2 * args.hidden_size * args.ffn_hidden_size * gated_linear_multiplier
    layernorm_params = 2 * args.hidden_size * norm_size
    # Split params by how they are held on each rank: regular TP, replicated, or EP/ETP.
    tp_sharded_params_in_transformer_block = (attention_params + dense_mlp_params) * (
        num_dense_layers
    )
    replicated_params_in_transformer_block = layernorm_params * num_dense_layers + final_layernorm
    # Most loaded model shard has 1/pp_size transformer layers, 1 mtp block, and 1 embedding layer.
    tp_sharded_params_on_most_loaded_shard = (
        (tp_sharded_params_in_transformer_block / args.pipeline_model_parallel_size)
        + embedding_size
    ) / args.tensor_model_parallel_size
    replicated_params_on_most_loaded_shard = (
        replicated_params_in_transformer_block / args.pipeline_model_parallel_size
    )
    if args.untie_embeddings_and_output_weights and args.pipeline_model_parallel_size == 1:
        tp_sharded_params_on_most_loaded_shard += embedding_size / args.tensor_model_parallel_size

    def num_bytes_per_parameter(data_parallel_size):
        # This estimator assumes bf16 training: bf16 model params, fp32 main gradients,
        # fp32 main params, and fp32 Adam states. See docs/user-guide/features/dist_optimizer.md.
        return 18 if not args.use_distributed_optimizer else 6 + (12 / data_parallel_size)

    weight_and_optimizer_memory = (
        tp_sharded_params_on_most_loaded_shard + replicated_params_on_most_loaded_shard
    ) * num_bytes_per_parameter(args.data_parallel_size)
    return weight_and_optimizer_memory


def compute_activation_memory(args, num_microbatches):
    # Using formula in Table 2 of https://arxiv.org/pdf/2205.05198.pdf.
    # We are trying to compute the maximum activation footprint, so all calculations in this
    # function are for the first pipeline stage.
    # Memory footprint from transformer layer (self-attention and MLP).
    activation_memory = (args.seq_length * args.micro_batch_size * args.hidden_size) * (
        18 + (4 * (args.ffn_hidden_size / args.hidden_size))
    )
    activation_memory *= args.num_layers
    # Input to embedding (pp_size microbatches in flight).
    activation_memory += (
        8 * args.seq_length * args.micro_batch_size * args.pipeline_model_parallel_size
    )
    # Dropout in embedding layer (pp_size microbatches in flight).
    activation_memory += (
        args.seq_length
        * args.micro_batch_size
        * args.hidden_size
        * args.pipeline_model_parallel_size
    )
    # Multiply by interleaved PP memory factor.
    if args.virtual_pipeline_model_parallel_size is not None:
        interleaved_schedule_memory_penalty = 1 + (
            (args.pipeline_model_parallel_size - 1)
            / (args.pipeline_model_parallel_size * args.virtual_pipeline_model_parallel_size)
        )
        in_flight_microbatches = math.ceil(  # noqa: F841 (printed in the original)
            interleaved_schedule_memory_penalty * args.pipeline_model_parallel_size
        )
        activation_memory *= interleaved_schedule_memory_penalty
    # If using non-interleaved schedule, number of microbatches in pipeline can be less than
    # pp_size, so discount accordingly.
    if args.virtual_pipeline_model_parallel_size is None and args.pipeline_model_parallel_size > 1:
        if num_microbatches is not None:
            activation_memory *= min(1, num_microbatches / args.pipeline_model_parallel_size)
    if args.pipeline_model_parallel_size == 1:
        # Inputs to output layer and CE loss.
        activation_memory += (
            args.seq_length
            * args.micro_batch_size
            * args.hidden_size
            * 4
            * (1 + (args.padded_vocab_size / args.hidden_size))
        )
    # Activation memory is partitioned by TP size due to tensor and sequence model parallelism.
    return activation_memory / args.tensor_model_parallel_size


def transformer_flops(args, batch_size):
    """Training FLOPs (forward and backward) of one batch: ``transformer_flops`` (dense)."""
    seqlen_squared_sum_in_batch = batch_size * args.seq_length * args.seq_length
    total_real_tokens_in_batch = batch_size * args.seq_length
    if not args.group_query_attention:
        args.num_query_groups = args.num_attention_heads
    num_dense_layers = args.num_layers
    num_layers = args.num_layers
    forward_backward_expansion_factor = 3
    fma_expansion_factor = 2
    ffn_expansion_factor = 3 if args.swiglu else 2
    ## MHA or GQA
    query_projection_size = args.kv_channels * args.num_attention_heads
    key_projection_size = args.kv_channels * args.num_query_groups
    value_projection_size = args.kv_channels * args.num_query_groups
    gate_projection_size = 0
    # Token-linear part of self-attention (QKV projection + output projection).
    standard_self_attn_term = (
        forward_backward_expansion_factor
        * fma_expansion_factor
        * (
            ## qkv proj
            args.hidden_size
            * (
                query_projection_size
                + key_projection_size
                + value_projection_size
                + gate_projection_size
            )
            ## out proj
            + query_projection_size * args.hidden_size
        )
    )
    # Core-attention (L^2) part: ``QK^T`` and ``(softmax(QK^T)) V``.
    standard_self_attn_core_term = (
        forward_backward_expansion_factor
        * fma_expansion_factor
        * query_projection_size
        / 2  # causal mask (only half of the mask is non-zero)
        * 2  # QK^T and (QK^T)V
    )
    self_attn_term = standard_self_attn_term * num_layers
    self_attn_core_term = standard_self_attn_core_term * num_layers
    total_floating_point_operations = (
        total_real_tokens_in_batch
        * (
            # MLP
            forward_backward_expansion_factor
            * fma_expansion_factor
            * args.hidden_size
            * ((args.ffn_hidden_size * ffn_expansion_factor) * num_dense_layers)
            # Self Attention (token-linear part).
            + self_attn_term
            # Logit.
            + forward_backward_expansion_factor
            * fma_expansion_factor
            * args.hidden_size
            * args.padded_vocab_size
        )
        + seqlen_squared_sum_in_batch * self_attn_core_term
    )
    return total_floating_point_operations
