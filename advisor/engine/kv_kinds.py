"""A KV pool per attention kind, each with its own token count: SGLang's pool configurators.

SGLang (python/sglang/srt/model_executor/pool_configurator.py and mem_cache/kv_cache_configurator.py @003fca80)
turns the bytes its memory fraction leaves after the weights into pools by the model's attention kinds:

- Full attention and MLA (DefaultPoolConfigurator): a token costs every attention layer's K and V on this GPU
  (kv heads // tp, at least one) or its MLA latent (kv_lora_rank + qk_rope_head_dim, the same on every GPU); the
  pool holds budget // that many tokens, whole pages.
- Sliding-window and chunked-local layers (HybridSWAPoolConfigurator), only on the architectures its
  `is_hybrid_swa_model` lists (rules/runtimes.toml `swa_pool_models`): a second pool of
  `--swa-full-tokens-ratio` x the full pool's tokens, so a token costs the full layers' bytes plus that ratio of
  the window layers' and the full pool holds budget // that. On any other model with windows (Gemma 2 and 3)
  the window is a mask in the attention kernels only: every layer holds the whole length.
- Recurrent layers (Mamba2, Gated DeltaNet; `_handle_max_mamba_cache`): `--mamba-full-memory-ratio` r splits
  the budget, r / (1 + r) of it for state slots of one request's states each (every recurrent layer's, its
  heads split over tp), K = (that share - one slot) // one slot; the rest, less K + 1 slots (one is padding), is
  the full pool of the attention layers alone. A running request takes `recurrent_slots_per_request` slots
  (`_calculate_mamba_ratio`: 3, and 2 more for the extra buffer's ping-pong pair), which caps the requests it runs
  at once.

DeepSeek V4's compressed cache has a configurator of its own and is left to the placement's bytes. Under pipeline
parallel each stage is counted with every layer (SGLang takes the smallest stage's pool, and stages are equal).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import NamedTuple

from advisor.engine import kv_groups, layers
from advisor.engine.scenario import Scenario


class KindPools(NamedTuple):
    tokens: int
    """Tokens of the full-attention pool (SGLang's max_total_num_tokens, "#tokens" in its start-up log)."""
    state_slots: int
    """Recurrent-state slots (its max_mamba_cache_size; 0 without recurrent layers)."""
    token_bytes: float
    """Bytes one token costs on one GPU across the pools it is in."""
    slot_bytes: float
    """Bytes of one recurrent-state slot on one GPU."""


def applies(sc: Scenario) -> bool:
    """The runtime sizes pools by kind and this model has a kind besides full attention."""
    m = sc.model
    return sc.runtime.kind_pools and not m.compress_ratios and bool(
        m.sliding_window or layers.recurrent_layer_count(m))


def window_pool(sc: Scenario) -> bool:
    """The runtime gives this model's sliding-window layers a pool of their own."""
    rt, m = sc.runtime, sc.model
    listed = any(fnmatchcase(m.id.lower(), p) for p in rt.swa_pool_models)
    return bool(m.sliding_window) and (listed or bool(m.architecture) and m.architecture in rt.swa_pool_architectures)


def _token_bytes(sc: Scenario, tp: int, sliding: bool) -> float:
    """One token of one attention layer on one of `tp` GPUs (get_num_kv_heads: kv heads // tp, at least 1)."""
    m = sc.model
    elem = float(sc.rules.memory.kv_cache.bytes_per_element[sc.options.kv_type])
    values = layers.kv_elements_per_token(m, sliding)
    if m.is_mla:
        return values * elem
    heads = m.kv_heads if sliding or not m.global_kv_heads else m.global_kv_heads
    return values / heads * max(heads // max(tp, 1), 1) * elem


def pools(sc: Scenario, tp: int, free_bytes: float) -> KindPools:
    """The pools `free_bytes` on one of `tp` tensor-parallel GPUs hold."""
    m, rt = sc.model, sc.runtime
    kv = layers.kv_layer_count(m)
    sliding = min(m.sliding_window_layers, kv) if window_pool(sc) else 0
    cell = ((kv - sliding) * _token_bytes(sc, tp, False)
            + rt.swa_full_tokens_ratio * sliding * _token_bytes(sc, tp, True))
    rec = layers.recurrent_layer_count(m)
    slot = kv_groups.state_bytes(sc) / max(tp, 1) * rec
    slots, rest = 0, free_bytes
    if slot > 0:
        share = free_bytes * rt.recurrent_memory_ratio / (1 + rt.recurrent_memory_ratio)
        slots = max(int((share - slot) // slot), 0)
        rest = free_bytes - (slots + 1) * slot
    block = max(rt.kv_block_tokens, 1)
    tokens = int(max(rest, 0) // cell) // block * block if cell > 0 else 0
    return KindPools(tokens, slots, cell, slot)


def requests_cap(sc: Scenario, p: KindPools) -> int:
    """Requests the state slots let run at once (0: no cap)."""
    per = sc.runtime.recurrent_slots_per_request
    return p.state_slots // per if per and p.slot_bytes > 0 else 0


def basis(sc: Scenario, p: KindPools) -> str:
    """The pools in words, for the serving basis."""
    rt = sc.runtime
    parts = []
    if window_pool(sc):
        parts.append(f"the sliding-window layers hold {rt.swa_full_tokens_ratio:g} x the full pool's tokens in a "
                     f"pool of their own")
    elif sc.model.sliding_window:
        parts.append("the sliding window is a mask only: every layer holds the whole length")
    if p.slot_bytes > 0:
        r = rt.recurrent_memory_ratio
        parts.append(f"{r:g}/{1 + r:g} of it holds {p.state_slots:,} recurrent-state slots of "
                     f"{p.slot_bytes / 2**20:,.1f} MiB, {rt.recurrent_slots_per_request} per running request, and "
                     f"the rest the attention layers' tokens")
    return ("; " + "; ".join(parts) + f" ({rt.kind_pools_basis})") if parts else ""
