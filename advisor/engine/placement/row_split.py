"""llama.cpp -sm row: layers as in a layer split, their 2-D matrices cut into row bands over all GPUs."""

from __future__ import annotations

from advisor.engine import memory as mem
from advisor.engine.placement.arith import llama_cpp_layer_devices
from advisor.engine.placement.base import PlacerBase
from advisor.engine.placement.records import DeviceUse, Placement


def row_tile(p: PlacerBase) -> list[int]:
    """Each GPU's MMQ tile height, the rows its share of a split matrix is rounded to (rules/memory.toml
    [row_split])."""
    rs = p.rules.memory.row_split
    out = []
    for g in p.rig.gpus:
        if g.spec.vendor == "nvidia":
            cc = g.spec.compute_capability
            out.append(rs.mmq_rows["nvidia" if cc is None or cc >= rs.volta_cc else "nvidia_pre_volta"])
        else:
            out.append(rs.mmq_rows.get(g.spec.vendor, rs.mmq_rows["amd"]))
    return out


def row_split(p: PlacerBase, ctx: int) -> Placement:
    """llama.cpp -sm row as its loader places it (src/llama-model.cpp load_tensors, Oct 2024 - Jul 2026):
    the layers go to the GPUs as in a layer split (split points by free memory or -ts), and with each
    layer its KV cache, norms, routed experts (3-D: a split buffer refuses them) and compute; only its
    2-D matrices, and the output head, sit in the split buffer, which gives every GPU a band of rows in
    proportion to -ts or, by default, to each GPU's total memory (advisor.engine.memory row_split_*).
    A matrix of which the layer's own GPU would get no rows is not split (the device refuses it)."""
    m, lay, n = p.model, p.layout, len(p.caps)
    rs = p.rules.memory.row_split
    kv = p._kv(ctx)
    devs = llama_cpp_layer_devices(m.layers, m.layers + 1, p.split_weights)
    ts = p.options.tensor_split
    starts = mem.row_split_starts(list(ts) if ts is not None and len(ts) == n and any(ts)
                                  else [g.spec.vram_bytes for g in p.rig.gpus])
    rounding = mem.row_rounding(starts, row_tile(p))
    bpw = p.quant.body_bits / 8
    own = [0] * n
    split = [0] * n
    k, e, nl = [0] * n, [0] * n, [0] * n

    def deal(total: int, d: int, mats: list[tuple[int, int]] | None) -> None:
        """`total` bytes of non-expert weights of a layer on GPU d: its listed matrices split by rows."""
        if mats is None:  # matrices not listed: the whole non-expert part in proportion to the shares
            fr = [(starts[i + 1] if i + 1 < n else 1.0) - starts[i] for i in range(n)]
            for i in range(n):
                split[i] += int(total * fr[i])
            return
        left = total
        for rows, cols in mats:
            want = int(round(rows * cols * bpw))
            if want > left:
                break  # the layout holds fewer bytes than the listed shapes: the rest stays on GPU d
            left -= want
            per = mem.row_split_rows(rows, starts, rounding)
            if per[d] == 0:
                own[d] += want
                continue
            got = mem.split_matrix_bytes(rows, cols, bpw, per, rs.row_padding)
            scale = want / max(rows * cols * bpw, 1)
            for i in range(n):
                split[i] += int(got[i] * scale)
        own[d] += left  # norms and anything not listed

    for il in range(m.layers):
        d = devs[il]
        ew = lay.expert_bytes[il]
        own[d] += ew
        e[d] += ew
        k[d] += kv[il]
        nl[d] += 1
        deal(lay.layer_bytes[il] - ew, d, mem.row_split_matrices(m, il, lay))
    out_dev = devs[m.layers]
    before = [own[i] + split[i] for i in range(n)]
    deal(lay.output_bytes, out_dev, [(m.vocab_size, m.hidden_size)])
    head = [own[i] + split[i] - before[i] for i in range(n)]
    look = [0] * n
    if not p.embed_on_host:  # a runtime that keeps the input embedding on the GPU: with layer 0
        own[devs[0]] += lay.embed_bytes
        look[devs[0]] = lay.embed_bytes
    used = {i for i in range(n) if own[i] or split[i]}
    devices = tuple(
        DeviceUse(g.label, g.name or g.spec.name, own[i] + split[i], k[i],
                  p._overhead(ctx, holds_output=(i == out_dev), gpu=i) if i in used else 0,
                  p.caps[i], nl[i], i == out_dev, e[i], split_bytes=split[i], embed_bytes=look[i],
                  head_bytes=head[i])
        for i, g in enumerate(p.rig.gpus))
    ok = all(d.fits for d in devices)
    return Placement("tensor_parallel", devices, p._host(p.layout.embed_bytes if p.embed_on_host else 0,
                                                            0, 0),
                     fits=ok, runs=ok, gpu_layers=m.layers,
                     problem="" if ok or p.runtime.supports_cpu_offload else
                     f"{p.runtime.name} cannot offload to system RAM and the GPUs are too small")
