"""Tensor parallel by heads (vLLM, SGLang) or by channels in proportion to memory (ExLlamaV3)."""

from __future__ import annotations

from advisor.engine.placement.base import PlacerBase
from advisor.engine.placement.records import DeviceUse, Placement


def tensor_parallel(p: PlacerBase, ctx: int) -> Placement:
    """Each layer split across all GPUs: by heads (`heads`: the head counts must divide by the GPU count, the KV
    cache is sharded) or by channels in proportion to memory (`channels`)."""
    m, n = p.model, len(p.caps)
    # `channels`: heads and MLP channels dealt out in proportion to each GPU's memory (ExLlamaV3's
    # TPAllocator), so no head count has to divide by the GPU count and each GPU keeps its heads' KV.
    by_memory = p.split_kind == "channels"
    if not by_memory and m.attention_heads % n:
        return p._refused(ctx, f"tensor parallel over {n} GPUs needs the {m.attention_heads} attention "
                                  f"heads to divide by {n}")
    if not by_memory and (m.kv_heads % n) and (n % m.kv_heads):
        return p._refused(ctx, f"tensor parallel over {n} GPUs needs the {m.kv_heads} KV heads and "
                                  f"{n} to divide one another")
    kv_total = sum(p._kv(ctx))
    kv_share = kv_total * max(1 / n, 1 / max(m.kv_heads, 1)) if not m.is_mla else kv_total
    experts = sum(p.layout.expert_bytes)  # cut like the rest (vLLM's FusedMoE shards every expert's matrices)
    lookup, head = p.edges()  # the vocabulary-parallel embedding and head, cut like the rest
    # a runtime that keeps the embedding in system RAM (ExLlamaV2) holds it there whole, a tied head on the GPUs
    host = p.layout.embed_bytes if p.embed_on_host else 0
    weights = p.layout.total_bytes - (lookup if p.embed_on_host else 0)
    lookup = 0 if p.embed_on_host else lookup
    if by_memory:
        total_cap = sum(p.caps)
        frac = [c / total_cap for c in p.caps] if total_cap > 0 else [1 / n] * n
        kvs = [kv_total if m.is_mla else kv_total * f for f in frac]
    else:
        frac = [1 / n] * n
        kvs = [kv_share] * n
    devices = tuple(
        DeviceUse(g.label, g.name or g.spec.name, int(weights * frac[i]), int(kvs[i]),
                  p._overhead(ctx, holds_output=True, heads=m.attention_heads // n, gpu=i), p.caps[i],
                  m.layers, True, int(experts * frac[i]), embed_bytes=int(lookup * frac[i]),
                  head_bytes=int(head * frac[i]))
        for i, g in enumerate(p.rig.gpus))
    ok = all(d.fits for d in devices)
    return Placement("tensor_parallel", devices, p._host(host, 0, 0), fits=ok, runs=ok, gpu_layers=m.layers,
                     problem="" if ok or p.runtime.supports_cpu_offload else
                     f"{p.runtime.name} cannot offload to system RAM and the GPUs are too small")
