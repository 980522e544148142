"""GPUs in several machines: how each runtime splits a model across them, what the network costs, and what
loading takes.

The runtime says what it does across machines (rules/runtimes.toml `[runtime.multinode]`: llama.cpp RPC puts
whole layers on the remote GPUs, vLLM with Ray keeps tensor parallel inside a machine and pipeline stages
across, SGLang's multi-node example runs one tensor-parallel group over every GPU, exo cuts pipeline stages
or, asked, shards every layer); the network is rules/interconnect.toml [network], and how the runtime's
machines talk over it (messages per stage boundary, per all-reduce) is [protocol.ID]. Pure functions of the
Scenario: nothing here names a runtime.
"""

from __future__ import annotations

from advisor.record import Record, record
from advisor.catalog.rulebook import ProtocolRules
from advisor.engine.rig import Rig
from advisor.engine.scenario import Scenario


def spans_machines(rig: Rig) -> bool:
    return rig.nodes > 1


def across_nodes(sc: Scenario) -> tuple[int, int] | None:
    """(tensor parallel, pipeline parallel) a runtime that cuts equal stages (vLLM) uses by default on GPUs in
    several machines: `tp_in_node` takes every GPU of a machine for tensor parallel and one stage per machine
    (vLLM docs: "tensor_parallel_size to the number of GPUs per node and pipeline_parallel_size to the number
    of nodes"); machines with different GPU counts, or GPUs not listed machine by machine, take one stage per
    GPU ("uneven GPU splits": tensor_parallel_size=1, pipeline_parallel_size = GPUs). None: not several
    machines, or the runtime's default is not that."""
    rig = sc.rig
    if not spans_machines(rig) or sc.runtime.multinode.split != "tp_in_node":
        return None
    counts = [len(rig.gpus_on(n)) for n in rig.node_ids]
    order = [g.node for g in rig.gpus]
    contiguous = order == sorted(order)
    if len(set(counts)) == 1 and contiguous:
        return counts[0], len(counts)
    return 1, len(rig.gpus)


@record
class NetworkLink(Record):
    """The network between a rig's machines, as a runtime's protocol uses it."""

    name: str
    """rules/interconnect.toml [network] key."""
    gb_s: float
    latency_us: float
    """One message's one-way latency, microseconds."""
    rdma: bool
    label: str
    protocol: ProtocolRules | None
    """How the runtime's machines talk (None: the runtime has no multi-node protocol)."""


def network_of(sc: Scenario) -> NetworkLink:
    net = sc.rules.interconnect.network
    name = sc.rig.network or "1gbe"
    proto = sc.rules.interconnect.protocol.get(sc.runtime.multinode.protocol)
    return NetworkLink(name, float(net.gb_s[name]), float(net.latency_us[name]), name in net.rdma,
                       net.label.get(name, name), proto)


def hop_s(link: NetworkLink, payload_bytes: float) -> float:
    """One stage boundary that crosses machines: the protocol's messages in series, then the payload."""
    messages = link.protocol.hop_messages if link.protocol else 1.0
    return messages * link.latency_us * 1e-6 + payload_bytes / (link.gb_s * 1e9)


def allreduce_s(link: NetworkLink, machines: int, payload_bytes: float) -> float:
    """One all-reduce over `machines` machines: 2(m-1) ring steps in series, each carrying 1/m of the data."""
    per_peer = link.protocol.allreduce_messages_per_peer if link.protocol else 2.0
    steps = per_peer * (machines - 1)
    return steps * link.latency_us * 1e-6 + steps / machines * payload_bytes / (link.gb_s * 1e9)


def prefill_overlaps(sc: Scenario) -> bool:
    """Whether a prompt's micro-batches overlap across the stages of a layer split (False: RPC and exo run the
    stages one after another across machines)."""
    if not spans_machines(sc.rig):
        return True
    proto = sc.rules.interconnect.protocol.get(sc.runtime.multinode.protocol)
    return proto is None or proto.prefill_overlap


def network_bytes_at_load(rig: Rig, runtime, placement) -> int:
    """Weights the first machine sends the others at load (llama.cpp RPC: every remote GPU's share); 0 where
    each machine reads its own copy."""
    if not spans_machines(rig) or not runtime.multinode.weights_over_network:
        return 0
    head = rig.node_ids[0]
    return sum(d.weights_bytes for i, d in enumerate(placement.devices) if i < len(rig.gpus) and rig.gpus[i].node != head)


def load_seconds(rig: Rig, runtime, placement, rules) -> float:
    """At least this long to send the other machines their weights at load: the bytes at the network's line
    rate (rules/interconnect.toml [network] gb_s), which no TCP stream exceeds."""
    sent = network_bytes_at_load(rig, runtime, placement)
    net = rig.network or "1gbe"
    return sent / (float(rules.interconnect.network.gb_s[net]) * 1e9) if sent else 0.0
