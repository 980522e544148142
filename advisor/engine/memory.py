"""Where every byte goes: weights per layer, KV cache per layer, runtime buffers per GPU.

Pure arithmetic over catalog entries and the rulebook. Exact where the architecture makes it
exact (KV cache, F16 weights); whole-model bits per weight for quantized catalog models.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

from advisor.record import Record, record
from advisor.catalog.rulebook import Rulebook
from advisor.catalog.types import GIB, ModelSpec, QuantSpec, RuntimeSpec
from advisor.engine import layers

MIB = 1024**2


@record
class WeightsLayout(Record):
    """A model's weights at one quantization, cut where the runtimes cut them."""

    total_bytes: int
    """All weights, as in the model file."""
    embed_bytes: int
    """Token-embedding matrix (input layer)."""
    output_bytes: int
    """Output head on its device (the embedding matrix again when tied: llama.cpp duplicates it)."""
    layer_bytes: tuple[int, ...]
    """Each repeating layer's weights (attention, norms, MLP or experts)."""
    expert_bytes: tuple[int, ...]
    """Each layer's routed-expert weights (0 for dense layers): what MoE offload moves to RAM."""
    unloaded_bytes: int = 0
    """In the file but not loaded by default: multi-token-prediction layers past the layer count."""

    @property
    def gpu_resident_total(self) -> int:
        """Bytes on GPUs when the input embedding stays on the host (llama.cpp)."""
        return sum(self.layer_bytes) + self.output_bytes


@lru_cache(maxsize=1024)
def weights_layout(model: ModelSpec, quant: QuantSpec) -> WeightsLayout:
    """Split the model's parameters into embedding, output head and per-layer shares.

    Per-layer parameters come from the total minus embedding and head, so the sum is exact to the
    catalog's parameter count. MoE layers carry their experts; leading dense layers their dense MLP.
    """
    bpw = quant.bits_per_weight
    embed = model.vocab_size * model.hidden_size
    head = 0 if model.tied_embeddings else embed
    ple = model.per_layer_embed_params  # Gemma 3n/4: looked up with the token embedding, on the host
    body = max(model.params_total - embed - head - ple, 0)
    n = model.layers
    expert_params = [0] * n
    extra = [0] * n
    if model.is_moe:
        per_moe = model.experts * model.expert_matrices * model.hidden_size * model.moe_intermediate_size
        dense_mlp = 3 * model.hidden_size * model.intermediate_size
        moe_layers = set(model.expert_layers)
        for il in range(n):
            if moe_layers and il not in moe_layers:
                continue  # a block without experts (Nemotron-H's Mamba/attention/MLP blocks): an even share
            if il < model.dense_layers and not moe_layers:
                extra[il] = dense_mlp
            else:
                expert_params[il] = per_moe
                extra[il] = per_moe
        if sum(extra) > body:  # inconsistent entry: fall back to an even split
            expert_params = [0] * n
            extra = [0] * n
    shared = (body - sum(extra)) / n
    mlp = mlp_params(model, expert_params, extra) if quant.mlp_bits is not None else [0] * n
    body_bits = quant.body_bits
    edge_bits = embed_bits(quant)
    experts_bits = expert_bits(model, quant)
    to_bytes = lambda p: int(round(p * body_bits / 8))  # noqa: E731
    expert_to_bytes = lambda p: int(round(p * experts_bits / 8))  # noqa: E731
    edge = int(round(embed * edge_bits / 8))
    out = int(round(embed * head_bits(model, quant) / 8))
    ple_bytes = int(round(ple * edge_bits / 8))
    expert_b = tuple(expert_to_bytes(p) for p in expert_params)
    mlp_b = [int(round(p * quant.mlp_bits / 8)) if p else 0 for p in mlp]
    layer_bytes = tuple(to_bytes(shared + extra[il] - expert_params[il] - mlp[il]) + mlp_b[il] + expert_b[il]
                        for il in range(n))
    return WeightsLayout(
        total_bytes=sum(layer_bytes) + edge + (0 if model.tied_embeddings else out) + ple_bytes,
        embed_bytes=edge + ple_bytes,
        output_bytes=out,
        layer_bytes=layer_bytes,
        expert_bytes=expert_b,
    )


def mlp_params(model: ModelSpec, expert_params: list[int], extra: list[int]) -> list[int]:
    """Each layer's dense MLP (a dense model's; a MoE model's leading dense layers', `extra`) or shared experts,
    which a format may store at its own width (`mlp_bits`): gate, up and down projections. Shared experts are
    taken at the routed experts' width, as Qwen3.5 / 3.6's are (shared_expert_intermediate_size 512 =
    moe_intermediate_size)."""
    h = model.hidden_size
    if not model.is_moe:
        return [3 * h * model.intermediate_size] * model.layers
    shared = model.shared_experts * model.expert_matrices * h * model.moe_intermediate_size
    return [shared if e else x for e, x in zip(expert_params, extra)]


def body_bits(model: ModelSpec, quant: QuantSpec) -> float:
    """Bits per weight of the repeating layers' weights outside the routed experts as `weights_layout` stores
    them: the format's `body_bits`, or where it stores MLPs apart (`mlp_bits`) the average of the two widths over
    this model's weights."""
    if quant.mlp_bits is None:
        return quant.body_bits
    lay = weights_layout(model, quant)
    experts = sum(lay.expert_bytes) * 8 / expert_bits(model, quant)
    edges = model.vocab_size * model.hidden_size * (1 if model.tied_embeddings else 2) + model.per_layer_embed_params
    return (sum(lay.layer_bytes) - sum(lay.expert_bytes)) * 8 / max(model.params_total - edges - experts, 1)


def embed_bits(quant: QuantSpec) -> float:
    """Bits per weight of the token embedding: the format's own where it states its linear layers apart, else
    the file's average."""
    return quant.embed_bits if quant.linear_bits is not None else quant.bits_per_weight


def head_bits(model: ModelSpec, quant: QuantSpec) -> float:
    """Bits per weight of the output head: an untied head the format quantizes on its own (EXL3 --head_bits) is
    not the embedding's width."""
    return quant.head_bits if quant.head_bits and not model.tied_embeddings else embed_bits(quant)


def expert_bits(model: ModelSpec, quant: QuantSpec) -> float:
    """Bits per weight of a MoE model's routed experts at a quantization: the format's own expert width where it
    stores them apart (MXFP4), a GGUF requant's published width where llama-quantize keeps them (gpt-oss), else
    the repeating layers' width."""
    if model.native_expert_bits and quant.format == "gguf":
        return model.native_expert_bits  # requants keep the experts as published
    return quant.expert_bits or quant.body_bits


def kv_cells(ctx: int, runtime: RuntimeSpec, rules: Rulebook) -> int:
    """KV cache length the runtime allocates for a context of `ctx` tokens."""
    pad = runtime.kv_pad_cells
    return int(math.ceil(ctx / pad) * pad) if pad > 0 else ctx


def kv_bytes_per_layer(model: ModelSpec, ctx_cells: int, kv_type: str, rules: Rulebook, sequences: int = 1,
                       *, swa_cells: int | None = None) -> tuple[int, ...]:
    """KV cache bytes of each layer for `ctx_cells` tokens in each of `sequences` streams.

    Standard attention caches K and V: 2 x kv_heads x head_dim per token (grouped-query attention
    shrinks kv_heads). Multi-head latent attention caches one compressed latent of kv_lora_rank +
    qk_rope_head_dim per token (V is read from the same latent). Sliding-window layers hold
    `swa_cells` per stream (`swa_kv_cells`: llama.cpp keeps more than the window), or at most the
    window when the caller does not say. Layers without a KV cache of their own
    (advisor.engine.layers) hold their fixed recurrent state per sequence instead, or nothing.
    """
    elem = float(rules.memory.kv_cache.bytes_per_element[kv_type])
    state = float(rules.memory.recurrent.bytes_per_element)
    if model.compress_ratios:
        ckv = layers.compressed_entry_bytes(model, kv_type, elem, rules.memory.compressed_kv)
        return _compressed_kv_bytes_per_layer(model, ctx_cells, sequences, swa_cells, ckv)
    return _kv_bytes_per_layer(model, ctx_cells, elem, sequences, state, swa_cells)


@lru_cache(maxsize=4096)
def _compressed_kv_bytes_per_layer(model: ModelSpec, ctx_cells: int, sequences: int, swa_cells: int | None,
                                   ckv: layers.CompressedEntry) -> tuple[int, ...]:
    """DeepSeek V4: each layer's window of shared K=V entries, its compressed entries (one per `ratio`
    tokens, rounded up: the pool a runtime sizes for the whole context), the indexer keys of the
    indexer-ratio layers and the compressors' fixed state, per sequence."""
    window = min(ctx_cells, model.sliding_window if swa_cells is None else swa_cells)
    out = []
    for il in range(model.layers):
        ratio = model.compress_ratios[il] if il < len(model.compress_ratios) else 0
        per_seq = window * ckv.entry
        if ratio:
            pooled = -(-ctx_cells // ratio)
            per_seq += pooled * ckv.entry + int(layers.compressor_state_elements(model, ratio, ckv) * ckv.state)
            if ratio == ckv.indexer_ratio and model.indexer_head_dim:
                per_seq += pooled * ckv.indexer
        out.append(int(round(per_seq * sequences)))
    return tuple(out)


def swa_kv_cells(model: ModelSpec, runtime: RuntimeSpec, ctx_cells: int, seqs_per_stream: int, ubatch: int,
                 swa_full: bool = False) -> int:
    """Cells one stream of a sliding-window layer holds.

    llama.cpp (`llama_kv_cache_iswa`): pad(n_swa x n_seq + n_ubatch, 256), capped at the stream's
    context, where n_seq is the sequences sharing the stream (all slots with a unified cache, one
    without); the whole context with `--swa-full`. Gemma 3's 1024 window at n_ubatch 512 keeps 1536
    cells (tests/data/llamacpp_oracle.json). Runtimes that do not declare `swa_pads_ubatch` keep the
    window."""
    window = model.sliding_window
    if not window or swa_full or runtime.swa_full_cache:
        return ctx_cells
    if not runtime.swa_pads_ubatch:
        return min(ctx_cells, window)
    pad = max(runtime.kv_pad_cells, 1)
    want = window * max(seqs_per_stream, 1) + ubatch
    return min(ctx_cells, int(math.ceil(want / pad) * pad))


@lru_cache(maxsize=4096)
def _kv_bytes_per_layer(model: ModelSpec, ctx_cells: int, elem: float, sequences: int,
                        state_elem: float = 4.0, swa_cells: int | None = None) -> tuple[int, ...]:
    window = min(ctx_cells, model.sliding_window if swa_cells is None else swa_cells)
    out = []
    state = int(layers.state_elements(model) * state_elem) * sequences
    for il in range(model.layers):
        kind = layers.layer_kind(model, il)
        if kind != layers.ATTENTION:
            out.append(state if kind == layers.RECURRENT else 0)
            continue
        cells = ctx_cells
        swa = bool(model.sliding_window) and _is_swa_layer(model, il)
        if swa:
            cells = window
        per_token = layers.kv_elements_per_token(model, swa) * elem
        out.append(int(round(per_token * cells * sequences)))
    return tuple(out)


def _is_swa_layer(model: ModelSpec, il: int) -> bool:
    """Spread the sliding-window layers evenly (their exact position does not change totals)."""
    if model.sliding_window_layers >= model.layers:
        return True
    if model.sliding_window_layers <= 0:
        return False
    # layer il is global when it completes a group: e.g. Gemma 3's 5 local : 1 global.
    ratio = model.layers / (model.layers - model.sliding_window_layers)
    return int((il + 1) / ratio) == int(il / ratio)


class GraphShape(NamedTuple):
    """What one GPU's compute graph is reserved for: the batch, the spans attention reads, what the GPU holds.
    (A named tuple: one is built per GPU per placement tried, thousands per answer.)"""

    ctx_cells: int
    """The span one sequence's attention reads."""
    holds_output: bool
    """This GPU holds the output head (its logits)."""
    flash_attention: bool
    heads_on_device: int | None = None
    """Attention heads on this GPU (tensor parallel); None: all of them."""
    ubatch: int | None = None
    """Tokens per micro-batch (its family's, advisor.engine.family micro_batch); None: the runtime's default,
    capped at the cache's cells."""
    swa_cells: int = 0
    """The span of the sliding-window layers."""
    total_cells: int | None = None
    """The whole cache (n_ctx, which caps the micro-batch); None: `ctx_cells`."""
    sequences: int = 0
    """Requests a paged runtime warms its sampler up with."""
    kv_rotated: bool = False
    """The runtime rotates a quantized K and V cache (see `kv_rotated`)."""


def compute_buffer_bytes(model: ModelSpec, runtime: RuntimeSpec, g: GraphShape) -> int:
    """A runtime's compute (scratch) buffer on one GPU, in bytes.

    `ctx_cells` is the span one sequence's attention reads (the whole cache when it is unified, one
    stream's cells when each sequence has its own), `swa_cells` the span of the sliding-window layers,
    `total_cells` the whole cache (n_ctx, which caps the micro-batch; default `ctx_cells`).
    llama.cpp reserves its graph for one micro-batch of `ub = min(n_ubatch, n_ctx)` tokens with every
    token an output, and keeps the largest phase (activations f32, 4 bytes):
      - output logits on the GPU that holds the output head: (vocab + 2 x hidden) x ub x 4 (with MLA
        the latent query of all heads, 2 x heads x (kv_lora_rank + rope dims), instead of 2 x hidden);
      - with flash attention, the feed-forward phase plus the f16 mask:
        (3 x n_ff + 4 x hidden) x ub x 4 + 2 x ctx x ub (n_ff: the dense MLP, or the chosen and shared
        experts' width);
      - without it, the larger of the attention scores and f32 mask over the context plus Q, K, V, the
        output and the residual stream, (heads x ctx + ctx + 2 x q_dim + 3 x hidden + 2 x kv_dim) x ub x 4
        (MLA adds the transposed latent of the whole cache, n_ctx x kv_lora_rank x 2 bytes), and the
        feed-forward phase with three f32 context-wide masks, 12 x ctx x ub (the short per-sequence
        spans of `-np`).
    `kv_rotated` (see `kv_rotated`): llama.cpp rotates a quantized K and V cache, so each layer's graph
    also holds rotated copies of Q, K, V and of the attention output. Its allocator (ggml-alloc) then
    lays the buffer out differently: once the f16 mask is at least one hidden state (2 x cells >= 4 x
    hidden bytes a token) the feed-forward phase needs one hidden-state buffer (hidden x ub x 4) less and
    the logits phase one more. Found with ../shared/tools/llamacpp-oracle: exact for llama and qwen3
    shapes from 4096 to 131072 cells and for the threshold (the change starts at 2 x hidden cells, 8192
    for hidden 4096); gemma3 and qwen3moe shapes take the extra logits buffer only near the threshold, so
    above it this budgets up to 1.4% more than llama.cpp allocates (tests/data/llamacpp_oracle.json).
    Reproduces llama.cpp's own allocations for llama, qwen3, qwen3moe, gemma3 and deepseek2 (MLA)
    shapes over context x flash attention x KV type x ubatch x slots (tests/data/llamacpp_oracle.json,
    bench/llamacpp_oracle.py) and the GPU load logs of tests/data/llamacpp_memory_logs.csv.
    """
    ub = g.ubatch or min(runtime.ubatch, max(g.total_cells or g.ctx_cells, 1))
    heads = model.attention_heads if g.heads_on_device is None else g.heads_on_device
    if runtime.compute_buffers != "ggml_graph":
        return int(runtime.compute_fixed_mib * MIB) + _torch_activations(model, runtime, ub, heads, g)
    return int(runtime.compute_fixed_mib * MIB) + _ggml_graph_bytes(model, ub, heads, g)


def attention_pool_bytes(model: ModelSpec, runtime: RuntimeSpec, g: GraphShape, backend: str) -> int:
    """What a ggml GPU back-end's memory pool keeps beside the compute buffer for attention without flash
    attention (RuntimeSpec.attention_pool_lookahead): one f16 copy of the scores, cells x micro-batch x heads
    on this GPU, rounded up by the pool's look-ahead to 256 bytes. 0 with flash attention, on back-ends that
    fuse or do not pool it, and for runtimes that declare no such pool."""
    if g.flash_attention or not runtime.attention_pool_lookahead or backend not in runtime.attention_pool_backends:
        return 0
    ub = g.ubatch or min(runtime.ubatch, max(g.total_cells or g.ctx_cells, 1))
    heads = model.attention_heads if g.heads_on_device is None else g.heads_on_device
    size = int(runtime.attention_pool_lookahead * g.ctx_cells * ub * heads * 2)
    return 256 * -(-size // 256)


def _ggml_graph_bytes(model: ModelSpec, ub: int, heads: int, g: GraphShape) -> int:
    """llama.cpp's graph reservation for one micro-batch of `ub` tokens (see compute_buffer_bytes)."""
    h, ctx_cells = model.hidden_size, g.ctx_cells
    share = heads / max(model.attention_heads, 1)
    if model.is_mla:
        q_dim = int(heads * (model.kv_lora_rank + model.qk_rope_head_dim))
        kv_dim = model.kv_lora_rank + model.qk_rope_head_dim
        out_extra = 2 * q_dim
    else:
        q_dim = int(heads * model.head_dim)
        kv_dim = int(max(model.kv_heads * share, 1) * model.head_dim)
        out_extra = 2 * h
    logits = (model.vocab_size + out_extra) * ub * 4 if g.holds_output else 0
    swa = min(g.swa_cells, ctx_cells) if model.sliding_window else 0
    ffn = int((3 * _ffn_width(model) * share + 4 * h) * ub * 4)
    if g.flash_attention:
        attention = ffn + 2 * (ctx_cells + swa) * ub
        if g.kv_rotated and 2 * ctx_cells >= 4 * h:
            attention -= h * ub * 4
            logits += h * ub * 4 if g.holds_output else 0
    else:
        scores = (heads * ctx_cells + ctx_cells + swa + 2 * q_dim + 3 * h + 2 * kv_dim) * ub * 4
        if model.is_mla:
            scores += (g.total_cells or ctx_cells) * model.kv_lora_rank * 2
        attention = max(scores, ffn + 3 * 4 * (ctx_cells + swa) * ub)
    return max(logits, attention)


def kv_rotated(model: ModelSpec, runtime: RuntimeSpec, kv_type: str, rules: Rulebook) -> bool:
    """Whether the runtime rotates this model's K and V cache with a Hadamard matrix: a block-quantized
    cache type (rules/memory.toml block_quantized) and K and V head sizes that are multiples of the
    runtime's `kv_rotation_head_multiple` (llama.cpp: 64). An MLA cache keeps no separate V
    (n_embd_head_v_all = 0, so attn_rot_v = 0) and only K is rotated, which leaves the compute buffer as it
    is (tests/data/llamacpp_oracle.json, deepseek2 rows)."""
    step = runtime.kv_rotation_head_multiple
    if not step or model.is_mla or kv_type not in rules.memory.kv_cache.block_quantized:
        return False
    return model.head_dim > 0 and model.head_dim % step == 0


def _ffn_width(model: ModelSpec) -> int:
    """The feed-forward width one token's activations span: the dense MLP, or the routed experts it
    chooses plus the shared ones (the larger when a MoE model has leading dense layers)."""
    if not model.is_moe:
        return model.intermediate_size
    moe = model.moe_intermediate_size * (model.experts_active + model.shared_experts)
    return max(moe, model.intermediate_size) if model.dense_layers else moe


def _torch_activations(model: ModelSpec, runtime: RuntimeSpec, ub: int, heads: int, g: GraphShape) -> int:
    """PyTorch runtimes (vLLM, ExLlamaV2, MLX, transformers): the activation peak of one chunk of `ub`
    tokens: the 16-bit residual, norms and MLP activations, for transformers' eager attention the 16-bit score
    matrix, and f32 logits: for the whole chunk, or where the runtime warms its sampler up with `sequences`
    requests, `sampler_copies` f32 copies of (sequences x vocab) (rules/runtimes.toml). vLLM's profile samples
    after the forward has freed its activations (`sampler_after_forward`): its peak is the larger of the forward
    and the sampler beside what outlives the forward, the batch's hidden states and the fused experts' persistent
    workspace. Its logged "PyTorch activation peak" is held to this in tests/test_engine_memory.py (4.76-7.38
    GiB at 8,192 batched tokens and 1,024 requests on an H100, tests/data/vllm_memory_logs.csv rows 19-23, 29,
    30, within 1% as the 2025 releases that ran them; gpt-oss's rows without the workspace, which those builds
    freed after each call). Fixed costs (CUDA graphs) are `compute_fixed_mib`."""
    share = heads / max(model.attention_heads, 1)  # tensor parallel shards the MLP like the heads
    act = ub * (4 * model.hidden_size + _torch_mlp_width(model, runtime, share)) * 2
    act += heads * g.ctx_cells * ub * 2 if runtime.eager_attention else 0
    if runtime.sampler_copies is None or not g.sequences:
        return int(act + (model.vocab_size * ub * 4 if g.holds_output else 0))
    if not g.holds_output:
        return int(act)
    sampler = runtime.sampler_copies * model.vocab_size * g.sequences * 4
    if not runtime.sampler_after_forward:
        return int(act + sampler)
    kept = ub * (model.hidden_size + _fused_workspace_width(model, runtime, share)) * 2
    return int(max(act, sampler + kept))


def _fused_workspace_width(model: ModelSpec, runtime: RuntimeSpec, share: float) -> float:
    """16-bit values one token holds in vLLM's fused-expert workspaces (0 where the runtime's MoE layers do not
    run them, `moe_activations`): each chosen expert's row of workspace13 (max(intermediate, hidden)) and
    workspace2 (max(2 x intermediate, hidden)), from TritonExperts workspace_shapes in
    vllm/model_executor/layers/fused_moe/experts/triton_moe.py @0003357 and the same two widths swapped in
    MarlinExperts', the 4-bit checkpoints' kernel (search-index file id 55088225468). The second holds the down
    projection's per-expert output of the unsharded hidden width, so fine-grained experts (intermediate < hidden)
    cost 2 x top-k x hidden whatever the tensor-parallel size. The workspaces are one buffer that persists across
    layers and after the forward (vLLM's WorkspaceManager.get_simultaneous, used by the modular MoE kernel since
    vllm-project/vllm #27532: "a global persistent buffer", #44544; it "grows to the largest fused-expert GEMM it
    sees" and is kept, Tencent-Hunyuan/UniRL #370)."""
    if not model.is_moe or runtime.moe_activations != "fused_workspace":
        return 0.0
    i, d, k = model.moe_intermediate_size * share, model.hidden_size, max(model.experts_active, 1)
    return k * (max(i, d) + max(2 * i, d))


def _torch_mlp_width(model: ModelSpec, runtime: RuntimeSpec, share: float) -> float:
    """16-bit values one token holds in a PyTorch runtime's feed-forward block, on a GPU with `share` of the
    MLP. Dense: gate-up output and activation, 3 x intermediate; so is each chosen expert of a MoE layer where
    the runtime's `moe_activations` is `expert_mlp`. `fused_workspace`: vLLM's fused-expert workspaces
    (`_fused_workspace_width`; experts at least as wide as the hidden state cost 3 x top-k x intermediate as a
    dense MLP would), held while the shared experts' dense MLP or the other layers' mixers run
    (`_torch_mixer_width`), whichever is larger. A MoE model's leading dense layers count when their MLP is the
    larger."""
    dense = 3 * model.intermediate_size * share
    if not model.is_moe:
        return dense
    i = model.moe_intermediate_size * share
    if runtime.moe_activations == "fused_workspace":
        moe = _fused_workspace_width(model, runtime, share) + max(3 * model.shared_experts * i,
                                                                  _torch_mixer_width(model, share))
    else:
        moe = 3 * max(model.experts_active, 1) * i
    return max(moe, dense) if model.dense_layers else moe


def _torch_mixer_width(model: ModelSpec, share: float) -> float:
    """16-bit values one token holds in a layer's token mixer during vLLM's profile run, which runs every
    projection at the whole batch but skips the attention kernel itself (no attention metadata in profile_run:
    vllm/v1/worker/gpu_model_runner.py _dummy_run @000fc94; the Gated DeltaNet layer only warms its kernels up at
    64 tokens, vllm-project/vllm #54775). Attention: the fused q, k, v output (q + 2 x kv widths), q and k again
    after their norm and rotary embedding (q + kv), and the output before o_proj (q), 3 x (q + kv). Recurrent
    (Mamba2, Gated DeltaNet): the projected convolution channels (inner + 2 x groups x state), the gate z, the
    mixer's output and its gated norm, 4 x inner + 2 x groups x state. The larger of the two, on a GPU with
    `share` of the heads (tests/data/leads/vllm_gdn_moe_activation_derivation.md reads the tensors off
    qwen3_next.py and qwen_gdn_linear_attn.py)."""
    q = model.attention_heads * model.head_dim * share
    kv = max(model.kv_heads * share, 1) * model.head_dim
    r = model.recurrent
    recurrent = (4 * r.inner_size + 2 * r.group_count * r.state_size) * share if r is not None else 0
    return max(3 * (q + kv), recurrent)


def context_bytes(runtime: RuntimeSpec) -> int:
    return int(runtime.context_mib * MIB)


def rotary_cache_bytes(model: ModelSpec, runtime: RuntimeSpec) -> int:
    """The cos/sin table a runtime builds for every position up to the model's maximum context, one per GPU
    (vLLM: max_position x rotary dims in the model's dtype): the rotated part of a head (`rotary_dims`, an MLA
    model's rope part), else the whole head."""
    dims = model.qk_rope_head_dim if model.is_mla and model.qk_rope_head_dim else model.rotary_dims or model.head_dim
    return int(runtime.rotary_cache_bytes * model.max_context * dims)


def capture_sizes(largest: int) -> list[int]:
    """The batch sizes vLLM captures CUDA graphs for by default, up to `largest`: 1, 2, 4, then every 8 below
    256, then every 16 (vllm/config/vllm.py _set_cudagraph_sizes)."""
    ladder = [1, 2, 4, *range(8, 256, 8), *range(256, largest + 1, 16)]
    return [s for s in ladder if s <= largest]


def graph_counts(runtime: RuntimeSpec, seqs: int, batch_tokens: int) -> tuple[int, int]:
    """(piecewise, full) CUDA graphs a paged runtime captures by default: a piecewise graph for each capture
    size up to min(`graph_capture_per_seq` x max_num_seqs, `graph_capture_max`, the profile batch) and a full
    decode graph for each of those sizes up to max_num_seqs (vLLM's FULL_AND_PIECEWISE:
    cudagraph_dispatcher.py initialize_cudagraph_keys)."""
    largest = min(runtime.graph_capture_per_seq * seqs, runtime.graph_capture_max, batch_tokens)
    sizes = capture_sizes(max(largest, 1))
    return len(sizes), sum(s <= seqs for s in sizes)


def cuda_graph_bytes(runtime: RuntimeSpec, seqs: int, batch_tokens: int) -> int:
    """What a paged runtime's CUDA graphs take out of its KV pool on one GPU, as vLLM estimates it
    (gpu_model_runner.py profile_cudagraph_memory): the first capture once (the modes share one pool) and
    `cuda_graph_each_mib` for every further graph of each mode."""
    if not runtime.cuda_graph_mib:
        return 0
    piecewise, full = graph_counts(runtime, seqs, batch_tokens)
    more = piecewise - 1 + max(full - 1, 0)
    return int((runtime.cuda_graph_mib + runtime.cuda_graph_each_mib * more) * MIB)


def apple_working_set(vram_bytes: int, rules: Rulebook) -> int:
    """Metal's recommendedMaxWorkingSetSize for a Mac with this much unified memory."""
    apple = rules.memory.apple
    small = vram_bytes <= apple.small_max_gib * GIB
    return int(vram_bytes * (apple.small_fraction if small else apple.large_fraction))


# --- llama.cpp row split (-sm row) ------------------------------------------------------------------
# Held to ggml's CUDA split buffer (ggml/src/ggml-cuda/ggml-cuda.cu before PR #24216 removed it, Jul 2026:
# get_row_rounding, get_row_split, ggml_backend_cuda_split_buffer_type_get_alloc_size) and to which tensors
# llama.cpp puts in it (src/llama-model.cpp load_tensors: make_gpu_buft_list puts the split buffer type
# first in every GPU layer's list; select_weight_buft takes it for a weight whose op the device supports
# from a split buffer, and ggml_backend_cuda_device_supports_op refuses MUL_MAT(_ID) on a split weight
# with ne[2] > 1 (3-D routed experts) or when the layer's own device gets no rows of it).


def row_split_starts(weights: list[float]) -> list[float]:
    """ggml's `tensor_split` array: each device's first row as a share of the rows, in float32 (the
    cumulative share of the devices before it). `weights` are -ts values or, by default, each GPU's
    total memory (ggml_cuda_info().default_tensor_split, from cudaDeviceProp.totalGlobalMem)."""
    import struct

    f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]  # noqa: E731
    total, starts = 0.0, []
    for w in weights:
        starts.append(total)
        total = f32(total + f32(float(w)))
    if total <= 0:
        return [f32(i / len(weights)) for i in range(len(weights))]
    return [f32(s / total) for s in starts]


def row_rounding(starts: list[float], per_device_rows: list[int]) -> int:
    """get_row_rounding: the largest MMQ tile height of the devices that get a share of the rows."""
    n = len(starts)
    out = 0
    for i in range(n):
        nxt = starts[i + 1] if i + 1 < n else 1.0
        if starts[i] < nxt:
            out = max(out, per_device_rows[i])
    return max(out, 1)


def row_split_rows(nrows: int, starts: list[float], rounding: int) -> list[int]:
    """get_row_split: rows of an `nrows`-row matrix on each device (row_low and row_high rounded down to
    the rounding; the last device takes the rest)."""
    import struct

    f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]  # noqa: E731
    n = len(starts)
    out = []
    for i in range(n):
        low = 0 if i == 0 else int(f32(nrows * starts[i]))
        low -= low % rounding
        if i == n - 1:
            high = nrows
        else:
            high = int(f32(nrows * starts[i + 1]))
            high -= high % rounding
        out.append(max(high - low, 0))
    return out


def row_split_matrices(model: ModelSpec, il: int, layout: WeightsLayout) -> list[tuple[int, int]] | None:
    """(rows, columns) of the 2-D weight matrices layer `il` puts in a split buffer: attention Q, K, V and
    output, the dense feed-forward's gate, up and down, and in MoE layers the router and the shared
    experts (the routed experts are 3-D and stay on the layer's device). None where the layer is not
    standard attention (multi-head latent attention, recurrent or MLP-only blocks): its matrices are not
    listed here, and the caller splits its non-expert weights in proportion."""
    if model.is_mla or layers.layer_kind(model, il) != layers.ATTENTION:
        return None
    h, q, kv = model.hidden_size, model.attention_heads * model.head_dim, model.kv_heads * model.head_dim
    mats = [(q, h), (kv, h), (kv, h), (h, q)]
    if layout.expert_bytes[il]:
        mats.append((model.experts, h))
        if model.shared_experts:
            ff = model.shared_experts * model.moe_intermediate_size
            mats += [(ff, h), (ff, h), (h, ff)]
    else:
        ff = model.intermediate_size
        mats += [(ff, h), (ff, h), (h, ff)]
    return mats


def split_matrix_bytes(rows: int, cols: int, bytes_per_weight: float, device_rows: list[int],
                       row_padding: int) -> list[int]:
    """Bytes of one split matrix on each device: its rows there, plus the last row padded to a multiple of
    `row_padding` values (MATRIX_ROW_PADDING) on every device that holds any."""
    pad = (row_padding - cols % row_padding) % row_padding if row_padding else 0
    return [int(round((r * cols + (pad if r else 0)) * bytes_per_weight)) for r in device_rows]
