"""Is PCIe good enough, and would NVLink pay? Link model x traffic model, per workload.

Links: each GPU pair is NVLink (bridge or switch), PCIe peer-to-peer, or PCIe staged through host
memory (GeForce 40/50 on the stock driver), at the slower of the two GPUs' host links.
Traffic: layer split moves one hidden vector per token per boundary; tensor parallel (vLLM, llama.cpp
-sm tensor's meta device) does two all-reduces per layer per token (latency-bound at decode, bandwidth-bound at prefill and under
concurrency). The verdict compares the same workload with the GPUs' NVLink (where they have one,
else a generic NVLink 3 bridge) against the rig as it is.
"""

from __future__ import annotations


from advisor.record import Record, record
from advisor.catalog.rulebook import Rulebook
from advisor.catalog.types import ModelSpec
from advisor.engine.multinode import allreduce_s, hop_s, network_of
from advisor.engine.placement import Placement
from advisor.engine.rig import Rig
from advisor.engine.scenario import Scenario
from advisor.engine.speed import pcie_gb_s


@record
class Link(Record):
    kind: str
    """`nvlink`, `pcie_p2p`, `pcie_host` or `network`."""
    gb_s: float
    """Achievable bandwidth one direction, GB/s."""
    latency_us: float
    """Latency of one small all-reduce or copy over this link, microseconds."""
    label: str
    """In words, e.g. `PCIe 4.0 x8, host-staged (no P2P)`."""


def gpu_link(rig: Rig, a: int, b: int, rules: Rulebook, mode: str = "as_is") -> Link:
    """The link between GPUs a and b: as the rig has it, or as if joined by `nvlink`, or over `pcie`."""
    ic = rules.interconnect
    ga, gb = rig.gpus[a], rig.gpus[b]
    if ga.node != gb.node:  # different machines: the network, whatever the GPUs have inside a box
        net = rig.network or "1gbe"
        return Link("network", float(ic.network.gb_s[net]), float(ic.network.latency_us[net]),
                    f"the network between machines ({ic.network.label.get(net, net)})")
    if mode == "nvlink" or (mode == "as_is" and rig.nvlinked(a, b)):
        nv = [g.spec.nvlink.gb_s for g in (ga, gb) if g.spec.nvlink] or [112.5]
        bw = min(nv) / 2 * float(ic.nvlink.efficiency)
        return Link("nvlink", bw, float(ic.allreduce.latency_us["nvlink"]), f"NVLink ({min(nv):g} GB/s)")
    gen = min(g.pcie_gen or g.spec.pcie_gen or 3 for g in (ga, gb))
    lanes = min(g.pcie_lanes or g.spec.pcie_lanes or 16 for g in (ga, gb))
    bw = pcie_gb_s(gen, lanes, rules)
    p2p = rig.p2p if rig.p2p is not None else (ga.spec.pcie_p2p and gb.spec.pcie_p2p)
    word = rig.topology[a][b] if rig.topology and a < len(rig.topology) and b < len(rig.topology[a]) else ""
    if word == "SYS":  # across CPU sockets (QPI/UPI): no P2P, and the inter-socket hop halves throughput
        p2p = False
        bw *= float(ic.pcie.chipset_bandwidth_factor)
    if p2p:
        return Link("pcie_p2p", bw, float(ic.allreduce.latency_us["pcie_p2p"]),
                    f"PCIe {gen}.0 x{lanes}, peer-to-peer")
    return Link("pcie_host", bw * float(ic.pcie.host_staged_factor),
                float(ic.allreduce.latency_us["pcie_host"]),
                f"PCIe {gen}.0 x{lanes}, staged through host memory (no P2P)"
                + (", across CPU sockets" if word == "SYS" else ""))


def slowest_link(rig: Rig, devices: list[int], rules: Rulebook, mode: str = "as_is") -> Link | None:
    links = [gpu_link(rig, a, b, rules, mode) for i, a in enumerate(devices) for b in devices[i + 1:]]
    if not links:
        return None
    return min(links, key=lambda l: (l.gb_s, -l.latency_us))


def allreduce_cost(link: Link, n: int, sc: Scenario) -> tuple[float, float]:
    """(seconds of latency, GB/s) of one all-reduce over `n` GPUs whose slowest link is `link`. For runtimes whose
    all-reduce is NCCL's (rules/interconnect.toml [allreduce] nccl_families): a pair's latency plus one hop per
    further ring step (ring_step_us), and, staged through host memory, the all-reduce's own share of the PCIe rate
    (host_staged_factor) instead of a plain copy's; others (llama.cpp's meta device, held to its own tables by
    bench/sm_tensor.py) at the pair's latency and the link's copy rate."""
    rules = sc.rules
    ar = rules.interconnect.allreduce
    if sc.runtime.family not in ar.nccl_families:
        return link.latency_us * 1e-6, link.gb_s
    steps = max(2 * (n - 1) - 2, 0)
    latency_s = (link.latency_us + steps * float(ar.ring_step_us.get(link.kind, 0.0))) * 1e-6
    gb_s = link.gb_s
    if link.kind == "pcie_host":
        gb_s = link.gb_s / float(rules.interconnect.pcie.host_staged_factor) * float(ar.host_staged_factor)
    return latency_s, gb_s


@record
class LinkTimes(Record):
    decode_s: float
    prefill_s: float
    link: Link


def link_times(sc: Scenario, placement: Placement, prompt_tokens: int, streams: int,
               mode: str = "as_is") -> LinkTimes | None:
    """Seconds per decode step and per prompt spent on GPU-to-GPU links (mode: as_is, nvlink, pcie)."""
    rig, model, runtime, rules = sc.rig, sc.model, sc.runtime, sc.rules
    used = [i for i, d in enumerate(placement.devices) if d.total_bytes > 0]
    if len(used) < 2:
        return None
    link = slowest_link(rig, used, rules, mode)
    assert link is not None
    ic = rules.interconnect
    h = model.hidden_size
    if len({rig.gpus[i].node for i in used}) > 1 and placement.split_kind != "rows":
        return _across_machines(sc, placement, prompt_tokens, streams, used, mode)
    if placement.strategy == "tensor_parallel" and placement.split_kind == "rows":
        return _row_split_times(sc, placement, prompt_tokens, streams, used, link)
    if placement.strategy == "tensor_parallel":
        n = len(used)
        ring = 2 * (n - 1) / n
        per_ar, gb_s = allreduce_cost(link, n, sc)
        count = 2 * model.layers
        act = runtime.tp_activation_bytes  # fp16/bf16 activations, or ggml's f32 (llama.cpp -sm tensor)
        decode = count * (per_ar + ring * h * act * streams / (gb_s * 1e9))
        prefill = count * (per_ar + ring * h * act * prompt_tokens / (gb_s * 1e9))
    else:
        boundaries = len(used) - 1
        copy = link.latency_us if link.kind == "network" else \
            float(ic.pcie.copy_latency_us["p2p" if link.kind in ("nvlink", "pcie_p2p") else "host_staged"])
        decode = boundaries * (copy * 1e-6 + h * 4 * streams / (link.gb_s * 1e9))
        prefill = boundaries * (copy * 1e-6 + h * 4 * prompt_tokens / (link.gb_s * 1e9))
    return LinkTimes(decode, prefill, link)


def _groups(placement: Placement, used: list[int]) -> list[list[int]]:
    """The GPUs that share each layer, stage by stage: all of them under tensor parallel, `tp_size` at a time
    in a staged (TP x PP) placement, one at a time in a layer split."""
    size = len(used) if placement.strategy == "tensor_parallel" else max(placement.tp_size, 1)
    return [used[k:k + size] for k in range(0, len(used), size)]


def _across_machines(sc: Scenario, placement: Placement, prompt_tokens: int, streams: int, used: list[int],
                     mode: str) -> LinkTimes:
    """GPUs in several machines: each stage's all-reduces over its own link (the network when its GPUs sit in
    several machines: the runtime's protocol's messages in series at the network's latency, advisor.engine.
    multinode), and each boundary between stages over the link between them (the network's hop when it crosses
    machines). Layers are counted per stage, in proportion to the layers each stage holds."""
    rig, model, runtime, rules = sc.rig, sc.model, sc.runtime, sc.rules
    net = network_of(sc)
    groups = _groups(placement, used)
    layers = [max(placement.devices[g[0]].layers, 0) for g in groups]
    total_layers = sum(layers) or model.layers
    act = runtime.tp_activation_bytes
    h = model.hidden_size
    decode = prefill = 0.0
    for group, n_layers in zip(groups, layers):
        if len(group) < 2:
            continue
        count = 2 * model.layers * (n_layers / total_layers)
        machines = len({rig.gpus[i].node for i in group})
        if machines > 1:
            decode += count * allreduce_s(net, machines, h * act * streams)
            prefill += count * allreduce_s(net, machines, h * act * prompt_tokens)
            continue
        local = slowest_link(rig, group, rules, mode)
        ring = 2 * (len(group) - 1) / len(group)
        per_ar, gb_s = allreduce_cost(local, len(group), sc)
        decode += count * (per_ar + ring * h * act * streams / (gb_s * 1e9))
        prefill += count * (per_ar + ring * h * act * prompt_tokens / (gb_s * 1e9))
    copy_us = float(rules.interconnect.pcie.copy_latency_us["p2p"])
    for a, b in zip(groups, groups[1:]):
        if rig.gpus[a[-1]].node != rig.gpus[b[0]].node:
            decode += hop_s(net, h * act * streams)
            prefill += hop_s(net, h * act * prompt_tokens)
        else:
            local = gpu_link(rig, a[-1], b[0], rules, mode)
            decode += copy_us * 1e-6 + h * act * streams / (local.gb_s * 1e9)
            prefill += copy_us * 1e-6 + h * act * prompt_tokens / (local.gb_s * 1e9)
    link = Link("network", net.gb_s, net.latency_us, f"the network between machines ({net.label})")
    return LinkTimes(decode, prefill, link)


def split_matrices(model: ModelSpec, rules: Rulebook) -> int:
    """Weight matrices a row split divides over the GPUs, over all layers: attention's in every layer,
    the feed-forward's in dense layers and in MoE layers with shared experts (routed experts are not
    split: rules/interconnect.toml [row_split] matrices)."""
    m = rules.interconnect.row_split.matrices
    ffn_layers = model.layers
    if model.is_moe:
        ffn_layers = model.dense_layers + ((model.layers - model.dense_layers) if model.shared_experts else 0)
    return int(model.layers * m["attention"] + ffn_layers * m["feed_forward"])


def _row_split_times(sc: Scenario, placement: Placement, prompt_tokens: int, streams: int, used: list[int],
                     link: Link) -> LinkTimes:
    """llama.cpp -sm row: every split matrix multiply is synchronised on its own (rules/interconnect.toml
    [row_split]): a fixed cost plus one per further GPU, peer to peer where the rig's links allow it
    (NVLink or PCIe P2P, and only for micro-batches up to `peer_max_batch` tokens), else staged through
    host memory; each other GPU receives the input activations and sends back its slice of the result."""
    rig, model, runtime, rules = sc.rig, sc.model, sc.runtime, sc.rules
    rs = rules.interconnect.row_split
    n = len(used)
    peer = link.kind in ("nvlink", "pcie_p2p")
    mats = split_matrices(model, rules)
    h, ff = model.hidden_size, model.moe_intermediate_size if model.is_moe else model.intermediate_size
    q_dim, kv_dim = model.attention_heads * model.head_dim, model.kv_heads * model.head_dim
    layout = placement.layout
    quantized = layout is None or layout.total_bytes < 2 * model.params_total  # f16/bf16/f32 keep >= 2 bytes
    src1 = float(rs.src1_bytes["quantized" if quantized else "float"])
    ffn_share = (mats - model.layers * rs.matrices["attention"]) / max(model.layers * rs.matrices["feed_forward"], 1)
    # per token and layer: the main GPU sends the input activations to each other GPU (Q, K, V, gate and
    # up read the hidden state, the output matrix the attention result, down the feed-forward activation)
    # and receives (n-1)/n of every output row back; PCIe is full duplex, so the larger direction counts
    inputs = 3 * h + q_dim + ffn_share * (2 * h + ff)
    outputs = q_dim + 2 * kv_dim + h + ffn_share * (2 * ff + h)
    per_token = model.layers * max((n - 1) * src1 * inputs, (n - 1) / n * 4 * outputs)

    def sync_s(with_peer: bool, slices: int) -> float:
        per_gpu = float(rs.per_gpu_us["peer" if with_peer else "staged"])
        return (float(rs.sync_us) + slices * (n - 1) * per_gpu) * 1e-6

    # every copy crosses the main GPU's own link (peer to peer: the pair's link); llama.cpp PR #4766 (3x P40):
    # moving the main GPU from x16 to x8 cost 19% of row-split pp512 and 2% of its tg128
    main = rig.gpus[used[0]]
    main_gb_s = pcie_gb_s(main.pcie_gen or main.spec.pcie_gen or 3, main.pcie_lanes or main.spec.pcie_lanes or 16,
                          rules)
    decode_peer = peer and streams <= rs.peer_max_batch
    decode = mats * sync_s(decode_peer, -(-streams // rs.col_stride)) \
        + per_token * streams / ((link.gb_s if decode_peer else main_gb_s) * 1e9)
    ub = max(1, min(runtime.ubatch, prompt_tokens))
    n_ub = -(-prompt_tokens // ub)
    peer_pp = peer and ub <= rs.peer_max_batch  # above it peer access is off: the copies go through the host
    prefill = mats * n_ub * sync_s(peer_pp, -(-ub // rs.col_stride)) \
        + per_token * prompt_tokens / ((link.gb_s if peer_pp else main_gb_s) * 1e9)
    if link.kind == "network":  # GPUs in other machines (llama.cpp RPC): every split multiply crosses the network
        net = network_of(sc)
        remote = sum(1 for i in used if rig.gpus[i].node != rig.gpus[used[0]].node)
        per_matrix = remote * hop_s(net, 0.0)  # the protocol's messages to and from each remote GPU, in series
        decode = mats * (sync_s(False, -(-streams // rs.col_stride)) + per_matrix) \
            + per_token * streams / (net.gb_s * 1e9)
        prefill = mats * n_ub * (sync_s(False, -(-ub // rs.col_stride)) + per_matrix) \
            + per_token * prompt_tokens / (net.gb_s * 1e9)
    return LinkTimes(decode, prefill, link)
