"""vLLM's layout: equal pipeline stages, each split across its tensor-parallel GPUs."""

from __future__ import annotations

from advisor.catalog.types import GIB
from advisor.engine.placement.base import PlacerBase
from advisor.engine.placement.records import DeviceUse, Placement


def staged(p: PlacerBase, ctx: int) -> Placement:
    """vLLM's layout: `pp` pipeline stages of equal layer counts (vllm/distributed/utils.py
    get_pp_indices: the remainder goes to the stages before the last), each split across `tp` GPUs by
    heads; the embedding sits on the first stage, the output head on the last. Every GPU must hold its
    own share, so the smallest card of a stage decides. `--cpu-offload-gb` keeps that many GiB of each
    GPU's weights in system RAM."""
    m, lay = p.model, p.layout
    tp, pp = p.parallel_sizes()
    if tp > 1 and m.attention_heads % tp:
        return p._refused(ctx, f"tensor parallel over {tp} GPUs needs the {m.attention_heads} attention "
                                  f"heads to divide by {tp}")
    if tp > 1 and (m.kv_heads % tp) and (tp % m.kv_heads):
        return p._refused(ctx, f"tensor parallel over {tp} GPUs needs the {m.kv_heads} KV heads and "
                                  f"{tp} to divide one another")
    if pp > m.layers:
        return p._refused(ctx, f"{pp} pipeline stages need at least {pp} layers; {m.name} has {m.layers}")
    per = [m.layers // pp] * pp
    for i in range(2, m.layers % pp + 2):
        per[-i] += 1
    kv = p._kv(ctx)
    kv_share = 1.0 if m.is_mla else max(1 / tp, 1 / max(m.kv_heads, 1))
    offload = int(p.options.cpu_offload_gb * GIB)
    devices, host_w, start = [], 0, 0
    for s_i, count in enumerate(per):
        layers = range(start, start + count)
        start += count
        w = sum(lay.layer_bytes[il] for il in layers)
        e = sum(lay.expert_bytes[il] for il in layers)  # what a token reads only k of E of
        # the embedding with the first stage, the head with the last (one matrix when tied on one stage)
        look, head = p.edges() if m.tied_embeddings and pp == 1 else \
            (lay.embed_bytes if s_i == 0 else 0, lay.output_bytes if s_i == pp - 1 else 0)
        w += look + head
        k = sum(kv[il] for il in layers) * kv_share
        for t in range(tp):
            i = s_i * tp + t
            g = p.rig.gpus[i]
            gw = int(w / tp)
            moved = min(offload, gw)
            host_w += moved
            devices.append(DeviceUse(g.label, g.name or g.spec.name, gw - moved, int(k),
                                     p._overhead(ctx, holds_output=(s_i == pp - 1),
                                                    heads=m.attention_heads // tp, gpu=i),
                                     p.caps[i], count, s_i == pp - 1, max(int(e / tp) - moved, 0),
                                     embed_bytes=int(look / tp), head_bytes=int(head / tp)))
    for g in p.rig.gpus[tp * pp:]:  # GPUs the run does not use
        devices.append(DeviceUse(g.label, g.name or g.spec.name, 0, 0, 0, p.caps[len(devices)], 0))
    host = p._host(host_w, 0, 0)
    ok = all(d.fits for d in devices) and host.fits
    if host_w:
        strategy = "cpu_offload"
    elif tp * pp == 1:
        strategy = "single_gpu"
    else:
        strategy = "layer_split" if pp > 1 else "tensor_parallel"
    problem = "" if ok else (f"{p.runtime.name} cannot offload to system RAM on its own and the GPUs are too "
                             f"small" if host.fits else "the weights offloaded with --cpu-offload-gb do not fit "
                                                        "in system RAM")
    return Placement(strategy, tuple(devices), host, fits=ok and not host_w, runs=ok, gpu_layers=m.layers,
                     problem=problem, tp_size=tp if pp > 1 else 1)
