"""A paged pool shared by groups of layers of each attention kind: vLLM's hybrid KV cache manager.

A model with more than one kind of layer (full attention beside sliding-window or chunked-local attention,
Gemma 3, gpt-oss, Llama 4; or attention beside Mamba / Gated DeltaNet states, Qwen3.5 / 3.6, Nemotron-H,
Granite 4.0-H) gets one page size for every layer: an attention page is 16 tokens, grown to a multiple of 16
that holds one recurrent state when the model has recurrent layers. The layers of each kind are dealt into
groups of the smallest kind's count (the largest when it is within 1.5x), each group a block table of its
own; the memory is `group size` tensors of `num_blocks` pages. A request needs, per group, its full length of
pages (full attention), its window plus its tokens in flight and one page (sliding window: window - 1 +
`in_flight_batches` x max_num_batched_tokens tokens, capped at its length, + 1 page), or its state pages
(recurrent). vLLM logs "Maximum concurrency" = num_blocks / those pages at --max-model-len, and "GPU KV cache
size" = that x --max-model-len. Full-attention layers of another width than the sliding ones (Gemma 4's global
layers) get the same page bytes on longer pages (vLLM's unify_kv_cache_spec_page_size scales each kind's block
size to the largest page). Sources and constants: rules/runtimes.toml (`kv_groups`, `recurrent_*`,
`in_flight_batches`).
"""

from __future__ import annotations

from typing import NamedTuple

from advisor.engine import layers
from advisor.engine.scenario import Scenario


class GroupLayout(NamedTuple):
    page_bytes: float
    """Bytes of one page of one layer (every kind's, after vLLM unifies them)."""
    block_tokens: int
    """Tokens a sliding-window (or the only) attention page holds."""
    full_block_tokens: int
    """Tokens a full-attention page holds (more than `block_tokens` where those layers are narrower per token)."""
    group_size: int
    """Layers per group: the pool is this many tensors of `num_blocks` pages."""
    groups: tuple[int, int, int]
    """Groups of full-attention, sliding-window and recurrent layers."""
    batch_tokens: int
    """Tokens of one request in flight (what a sliding-window layer holds beyond its window): the runtime's
    `in_flight_batches` scheduler steps."""


def _cdiv(a: float, b: float) -> int:
    return int(-(-a // b))


def layout(sc: Scenario, tp: int, batch_tokens: int) -> GroupLayout | None:
    """How the runtime groups this model's layers on one of `tp` tensor-parallel GPUs, `batch_tokens` a step;
    None when it keeps one pool of one kind (every layer alike), or for layouts this accounting does not cover
    (MLA, DeepSeek V4's compressed cache). Chunked-local layers on a runtime that does not group them
    (`chunked_groups` false) are one group of full-length layers."""
    rt, m = sc.runtime, sc.model
    if not rt.kv_groups or m.is_mla or m.compress_ratios:
        return None
    rec = layers.recurrent_layer_count(m)
    kv = layers.kv_layer_count(m)
    sliding = min(m.sliding_window_layers, kv) if m.sliding_window else 0
    unified = bool(m.attention_chunk_size) and not rt.chunked_groups and not rec
    if unified:
        sliding = 0  # the manager is off: chunked layers keep the full length like the others
    full = kv - sliding
    counts = [c for c in (full, sliding, rec) if c]
    if (len(counts) < 2 and not unified) or not kv:
        return None
    elem = float(sc.rules.memory.kv_cache.bytes_per_element[sc.options.kv_type])
    token = 2 * max(m.kv_heads // max(tp, 1), 1) * m.head_dim * elem
    wide = 2 * max((m.global_kv_heads or m.kv_heads) // max(tp, 1), 1) * (m.global_head_dim or m.head_dim) * elem
    full_token = wide if sliding else token  # Gemma 4's global layers: other heads than its sliding ones
    widest = max(token, full_token)
    block = max(rt.kv_block_tokens, 1)
    if rec:
        block *= _cdiv(state_bytes(sc) / max(tp, 1), block * widest)
    page = block * widest
    lo, hi = min(counts), max(counts)
    size = hi if hi < 1.5 * lo else lo
    return GroupLayout(page, int(page // token), int(page // full_token), size,
                       (_cdiv(full, size), _cdiv(sliding, size), _cdiv(rec, size)),
                       batch_tokens * (1 if sc.options.no_async_scheduling else max(rt.in_flight_batches, 1)))


def state_bytes(sc: Scenario) -> float:
    """One recurrent layer's state for one request: convolution values in the model's dtype, scan values in the
    dtype its config names (`mamba_ssm_dtype`), else the runtime's (rules/runtimes.toml)."""
    r, rt = sc.model.recurrent, sc.runtime
    if r is None:
        return 0.0
    conv = max(r.conv_kernel - 1, 0) * (r.inner_size + 2 * r.group_count * r.state_size)
    scan_bytes = r.scan_bytes or rt.recurrent_scan_bytes.get(r.kind, rt.recurrent_scan_bytes.get("default", 0.0))
    return conv * rt.recurrent_conv_bytes + r.state_size * r.inner_size * scan_bytes


def pages_per_request(sc: Scenario, g: GroupLayout, length: int) -> int:
    """Pages (of all groups) one request of `length` tokens holds at most."""
    full, sliding, rec = g.groups
    window = min(sc.model.sliding_window - 1 + g.batch_tokens, length)
    return (full * _cdiv(length, g.full_block_tokens) + sliding * (_cdiv(window, g.block_tokens) + 1)
            + rec * sc.runtime.recurrent_pages)


def blocks(g: GroupLayout, free_bytes: float) -> int:
    """Pages per group the pool of `free_bytes` on one GPU holds (vLLM's num_blocks)."""
    return int(free_bytes // g.page_bytes // g.group_size)


def concurrency(sc: Scenario, g: GroupLayout, free_bytes: float, length: int) -> float:
    """Requests of `length` tokens the pool holds at once (vLLM's "Maximum concurrency")."""
    return blocks(g, free_bytes) / max(pages_per_request(sc, g, length), 1)
