"""llama.cpp -sm tensor: the meta device of PR #19378."""

from __future__ import annotations

from fnmatch import fnmatchcase

from advisor.catalog.types import GIB
from advisor.engine import memory as mem
from advisor.engine.placement.arith import _unit_fractions, deal_units
from advisor.engine.placement.base import PlacerBase
from advisor.engine.placement.records import DeviceUse, Placement
from advisor.engine.rig import gpu_backend


def tensor_refusal(p: PlacerBase) -> str:
    """Why the runtime's `--split tensor` refuses this configuration (rules/runtimes.toml tensor_*), or ""."""
    rt, m = p.runtime, p.model
    if p.split_kind != "meta" or len(p.rig.gpus) < 2:
        return ""
    why = next((why for pattern, why in rt.tensor_unsupported_models.items()
                if fnmatchcase(m.id.lower(), pattern)), "")
    if why:
        return f"{rt.name} --split-mode tensor does not run {m.name}: {why}; use --split layer"
    if p.rig.nodes > 1 and not rt.multinode.tensor:
        return (f"{rt.name} --split-mode tensor runs over the GPUs of one machine, not across machines "
                f"({rt.multinode.tensor_basis}); across machines use --split layer")
    other = sorted({gpu_backend(g.spec) for g in p.rig.gpus} - set(rt.tensor_backends)) if rt.tensor_backends \
        else []
    if other:
        return (f"{rt.name} documents --split-mode tensor for the {' and '.join(rt.tensor_backends)} back-ends only, "
                f"not {' or '.join(other)} ({rt.tensor_basis.split(':')[0]}); use --split layer")
    if rt.tensor_flash_attention and not p.flash_attention:
        return (f"{rt.name} --split-mode tensor needs flash attention ('SPLIT_MODE_TENSOR requires flash_attn to "
                f"be enabled'), and it is off here")
    if rt.tensor_kv_types and p.options.kv_type not in rt.tensor_kv_types:
        return (f"{rt.name} --split-mode tensor has no quantized KV cache ('simultaneous use of SPLIT_MODE_TENSOR "
                f"and KV cache quantization not implemented'): use --kv-cache {rt.tensor_kv_types[0]}")
    return ""


def meta_split(p: PlacerBase, ctx: int) -> Placement:
    """llama.cpp -sm tensor as its meta device allocates it (src/llama-model.cpp
    llama_meta_device_get_split_state, PR #19378; rules/runtimes.toml): in every layer the attention
    matrices go by KV heads (each GPU its KV groups' Q heads and output columns) and the dense and routed-
    expert feed-forward matrices by units of `lcm(block, 128)` columns, each in -ts proportion (even without
    -ts), the remainder of the rounding rotating with the layer; the KV cache follows the KV heads (latent
    attention keeps it whole on every GPU); the output head is cut by vocabulary rows; norms, the router and
    whatever else a layer holds are mirrored on every GPU; the input embedding stays in host RAM."""
    m, lay, n = p.model, p.layout, len(p.caps)
    ts = p.options.tensor_split
    share = list(ts) if ts is not None and len(ts) == n and sum(ts) > 0 else [1.0] * n
    share = [x / sum(share) for x in share]
    kv = p._kv(ctx)
    bpw = p.quant.body_bits / 8
    col = int(p.rules.memory.tensor_split.ffn_columns.get(p.quant.kernel,
                                                            p.rules.memory.tensor_split.ffn_columns["default"]))
    w, k, e = [0.0] * n, [0.0] * n, [0.0] * n
    for il in range(m.layers):
        rot = il % n
        heads = deal_units(m.kv_heads, share, rot)
        head_fr = [h / max(m.kv_heads, 1) for h in heads]
        ew = lay.expert_bytes[il]
        rest = lay.layer_bytes[il] - ew
        mats = mem.row_split_matrices(m, il, lay)
        if mats is None:  # latent attention, recurrent or MLP-only blocks: the split weights in -ts proportion
            for i in range(n):
                w[i] += rest * share[i]
                k[i] += kv[il] if m.is_mla else kv[il] * share[i]
        else:
            h = m.hidden_size
            q_dim, kv_dim = m.attention_heads * m.head_dim, m.kv_heads * m.head_dim
            attn = min((2 * q_dim * h + 2 * kv_dim * h) * bpw, rest)
            ff = m.shared_experts * m.moe_intermediate_size if ew else m.intermediate_size
            ffn = min(3 * ff * h * bpw, rest - attn)
            mirrored = rest - attn - ffn  # norms, the router, biases of sums
            ffn_fr = _unit_fractions(ff, col, share, rot)
            for i in range(n):
                w[i] += attn * head_fr[i] + ffn * ffn_fr[i] + mirrored
                k[i] += kv[il] * head_fr[i]
        if ew:
            ex_fr = _unit_fractions(m.moe_intermediate_size or m.intermediate_size, col, share, rot)
            for i in range(n):
                w[i] += ew * ex_fr[i]
                e[i] += ew * ex_fr[i]
    out_fr = [r / max(m.vocab_size, 1) for r in deal_units(m.vocab_size, share, m.layers % n)]
    for i in range(n):
        w[i] += lay.output_bytes * out_fr[i]
    host_w = lay.embed_bytes if p.embed_on_host else 0
    if not p.embed_on_host:  # a runtime that keeps the input embedding on its GPUs: mirrored like the rest
        for i in range(n):
            w[i] += lay.embed_bytes
    devices = tuple(
        DeviceUse(g.label, g.name or g.spec.name, int(w[i]), int(k[i]),
                  p._overhead(ctx, holds_output=True, heads=max(round(m.attention_heads * share[i]), 1), gpu=i),
                  p.caps[i], m.layers, True, int(e[i]), embed_bytes=0 if p.embed_on_host else lay.embed_bytes,
                  head_bytes=int(lay.output_bytes * out_fr[i]))
        for i, g in enumerate(p.rig.gpus))
    ok = all(d.fits for d in devices)
    over = next((d for d in devices if not d.fits), None)
    problem = "" if over is None else (
        f"{over.device} would need {over.total_bytes / GIB:.1f} GiB with --split-mode tensor; "
        f"{over.capacity_bytes / GIB:.1f} GiB is usable (this mode cannot fit itself: lower -c or use --split layer)")
    return Placement("tensor_parallel", devices, p._host(host_w, 0, 0), fits=ok, runs=ok, gpu_layers=m.layers,
                     problem=problem)
