"""llama.cpp's layer split, with partial offload of whole layers or of MoE experts."""

from __future__ import annotations

from advisor.engine.placement.arith import llama_cpp_layer_devices
from advisor.engine.placement.base import PlacerBase
from advisor.engine.placement.records import DeviceUse, Placement


def layers(p: PlacerBase, ctx: int, n_gpu_layers: int, cpu_experts: frozenset[int] = frozenset()) -> Placement:
    """llama.cpp layer placement with `n_gpu_layers` (n_layer + 1 = everything incl. output); the
    routed experts of the layers in `cpu_experts` stay in system RAM (`-ot blk.N.ffn_.*_exps=CPU`)."""
    n = p.model.layers
    kv = p._kv(ctx)
    devs = llama_cpp_layer_devices(n, n_gpu_layers, p.split_weights)
    w = [0] * len(p.caps)
    k = [0] * len(p.caps)
    e = [0] * len(p.caps)
    nl = [0] * len(p.caps)
    host_w = p.layout.embed_bytes if p.embed_on_host else 0
    host_k = host_e = 0
    moved = []
    on_gpu = dict(p.options.gpu_expert_layers)  # -ot ...exps=CUDA1: experts on a named GPU
    for il in range(n):
        d = devs[il]
        lw = p.layout.layer_bytes[il]
        ew = p.layout.expert_bytes[il]
        if il in on_gpu and ew and on_gpu[il] < len(w):
            w[on_gpu[il]] += ew
            e[on_gpu[il]] += ew
            lw -= ew
            ew = 0
        if d >= 0 and il in cpu_experts and ew:
            host_w += ew
            host_e += ew
            lw -= ew
            ew = 0
            moved.append(il)
        if d < 0:
            host_w += lw
            host_e += ew
            host_k += kv[il]
        else:
            w[d] += lw
            e[d] += ew
            k[d] += kv[il]
            nl[d] += 1
    out_dev = devs[n]
    look, head = [0] * len(p.caps), [0] * len(p.caps)
    if out_dev >= 0:
        w[out_dev] += p.layout.output_bytes
        head[out_dev] = p.layout.output_bytes
    else:
        host_w += p.layout.output_bytes
    if not p.embed_on_host and not (p.model.tied_embeddings and out_dev >= 0):
        # unified memory / runtimes that keep the embedding on the GPU: it sits with layer 0 (a tied
        # embedding is the output head already counted there: PyTorch runtimes hold one copy).
        first = next((d for d in devs if d >= 0), -1)
        if first >= 0:
            w[first] += p.layout.embed_bytes
            look[first] = p.layout.embed_bytes
        else:
            host_w += p.layout.embed_bytes
    used = sorted({d for d in devs if d >= 0} | {g for g in on_gpu.values() if g < len(w)})
    devices = []
    for i, g in enumerate(p.rig.gpus):
        over = p._overhead(ctx, holds_output=(i == out_dev), gpu=i) if (i in used) else 0
        devices.append(DeviceUse(g.label, g.name or g.spec.name, w[i], k[i], over, p.caps[i], nl[i],
                                 i == out_dev, e[i], embed_bytes=look[i], head_bytes=head[i]))
    host = p._host(host_w, host_k, n - sum(nl), gpu_bytes=sum(d.total_bytes for g, d in zip(p.rig.gpus, devices)
                                        if g.node == p.rig.gpus[0].node),
                      expert_bytes=host_e)
    gpu_ok = all(d.fits for d in devices)
    full = n_gpu_layers > n and not moved
    if full:
        strategy = "single_gpu" if len(used) <= 1 else "layer_split"
    else:
        strategy = "moe_offload" if moved and n_gpu_layers > n else "cpu_offload"
    return Placement(strategy, tuple(devices), host, fits=gpu_ok and full and host.fits,
                     runs=gpu_ok and host.fits, gpu_layers=sum(nl), cpu_expert_layers=len(moved),
                     cpu_expert_set=tuple(moved))


def offload(p: PlacerBase, ctx: int) -> Placement:
    """Keep as much on the GPUs as fits; the rest runs from system RAM (if the runtime can)."""
    if not p.runtime.supports_cpu_offload:
        best = layers(p, ctx, p.model.layers + 1)
        return Placement(best.strategy, best.devices, best.host, fits=False, runs=False,
                         gpu_layers=best.gpu_layers,
                         problem=f"{p.runtime.name} cannot offload to system RAM and the GPUs are too small")
    if p.model.is_moe and p.runtime.offloads_experts:
        best = fill_experts(p, ctx)
        if best is not None:
            return p._runs_or_not(best)
    lo, hi, best = 0, p.model.layers, None
    while lo <= hi:  # most layers on the GPUs that still fit
        mid = (lo + hi) // 2
        tried = layers(p, ctx, mid)
        if all(d.fits for d in tried.devices):
            best, lo = tried, mid + 1
        else:
            hi = mid - 1
    if best is None:
        best = layers(p, ctx, 0)
    return p._runs_or_not(best)


def fill_experts(p: PlacerBase, ctx: int) -> Placement | None:
    """MoE offload as llama.cpp's `--fit` does it: every layer's attention, dense and shared weights
    and its KV cache on its GPU (layers spread by memory or `-ts`), then on every GPU as many of its
    layers' routed experts as fit; the experts of the rest (each GPU's first layers) stay in RAM.
    None when even without any experts a GPU overflows (then whole layers go to RAM)."""
    n = p.model.layers
    moe = [il for il in range(n) if p.layout.expert_bytes[il]]
    bare = layers(p, ctx, n + 1, frozenset(moe))
    if not all(d.fits for d in bare.devices):
        return None
    devs = llama_cpp_layer_devices(n, n + 1, p.split_weights)
    cpu = set(moe)
    for i, d in enumerate(bare.devices):
        free = d.free_bytes
        mine = [il for il in moe if devs[il] == i]
        for il in reversed(mine):  # keep the last layers' experts; the first ones go to RAM
            if p.layout.expert_bytes[il] <= free:
                free -= p.layout.expert_bytes[il]
                cpu.discard(il)
            else:
                break
    return layers(p, ctx, n + 1, frozenset(cpu))
