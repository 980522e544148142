"""Fine-tuning on the rig: memory per GPU by piece, the sharding a practitioner would pick, and the
step time split into compute and communication. Every assumption is stated and settable.

Memory (rules/training.toml): full fine-tuning keeps bf16 weights and gradients, an fp32 master copy
and the optimizer's state per parameter (16 bytes with AdamW: ZeRO paper); LoRA keeps the frozen
base in bf16 and fp32 adapters of rank r on every linear layer with their gradients and optimizer
state; QLoRA the same over an NF4 base (bitsandbytes, embeddings and head in bf16). Activations per
token: with gradient checkpointing each layer's bf16 input plus one layer recomputed, without it
every layer's (Korthikanti et al. 2022); plus the fp32-upcast logits. Sharding across N GPUs: DDP
keeps everything on each GPU; ZeRO-1 shards the optimizer state, ZeRO-2 also the gradients, ZeRO-3
/ FSDP also the weights (FSDP+QLoRA: the 4-bit base sharded, Answer.AI 2024). The answer picks the
least sharding that fits (DDP is fastest when it fits: Answer.AI's 2x3090 benchmarks).
Communication: DDP all-reduces the trainable gradients (2(N-1)/N x bytes) per step; FSDP moves
about 1.5x that with the weights.
"""

from __future__ import annotations

from advisor.catalog.rulebook import Rulebook
from advisor.catalog.types import GIB, Catalog, ModelSpec
from advisor.engine import memory as mem
from advisor.engine.interconnect import Link, slowest_link
from advisor.engine.options import SHARDINGS, Options
from advisor.engine.placement import host_capacity, usable_capacity
from advisor.engine.result import Interconnect, Training
from advisor.engine.rig import Rig
from advisor.engine.speed import pcie_gb_s
from advisor.errors import AdvisorError
from advisor.record import Record, record

_NAMES = {"single": "single GPU", "ddp": "DDP (data parallel)", "zero1": "ZeRO-1 (optimizer state sharded)",
          "zero2": "ZeRO-2 (gradients and optimizer state sharded)", "zero3": "FSDP / ZeRO-3 (sharded)",
          "offload": "FSDP / ZeRO-3 with CPU offload"}


def lora_params(model: ModelSpec, rank: int) -> int:
    """Trainable parameters of rank-r LoRA on every linear layer: r x (in + out) per matrix."""
    h, hd = model.hidden_size, model.head_dim
    attn = rank * ((h + model.attention_heads * hd) * 2 + (h + model.kv_heads * hd) * 2)
    dense_mlp = rank * 3 * (h + model.intermediate_size)
    if model.is_moe:
        moe_mlp = rank * 3 * (h + model.moe_intermediate_size) * (model.experts + model.shared_experts)
        mlp = model.dense_layers * dense_mlp + (model.layers - model.dense_layers) * moe_mlp
    else:
        mlp = model.layers * dense_mlp
    return model.layers * attn + mlp


def activation_bytes(model: ModelSpec, options: Options, rules: Rulebook) -> int:
    a = rules.training.activations
    tokens = options.batch_size * options.seq_len
    h = model.hidden_size
    layer = h * float(a.layer_bytes_per_hidden)
    per_token = (model.layers * h * float(a.ckpt_bytes_per_hidden) + layer if options.gradient_checkpointing
                 else model.layers * layer)
    return int(tokens * (per_token + model.vocab_size * float(a.logits_bytes_per_vocab)))


def check_training_options(catalog: Catalog, options: Options) -> str:
    optimizer = options.optimizer or catalog.rules.training.defaults.optimizer
    if optimizer not in catalog.rules.training.optimizer.state_bytes:
        raise AdvisorError(f"unknown optimizer {optimizer!r}",
                           f"use one of: {', '.join(catalog.rules.training.optimizer.state_bytes)}")
    if options.sharding not in SHARDINGS:
        raise AdvisorError(f"unknown sharding {options.sharding!r}", f"use one of: {', '.join(SHARDINGS)}")
    return optimizer


@record
class _Tensors(Record):
    """What training holds, before sharding: bytes of weights, gradients and optimizer state."""

    trainable: int
    weights: int
    grads: int
    optim: int
    optimizer: str
    state: float
    """Bytes of optimizer state per trainable parameter."""
    rank: int


def _tensors(catalog: Catalog, model: ModelSpec, options: Options) -> _Tensors:
    """Weights, gradients and optimizer state of the workload (rules/training.toml): all parameters for a full
    fine-tune, the adapters over a frozen 16-bit (LoRA) or NF4 (QLoRA) base otherwise."""
    tr = catalog.rules.training
    optimizer = check_training_options(catalog, options)
    state = float(tr.optimizer.state_bytes[optimizer])
    p = model.params_total
    rank = options.lora_rank or tr.defaults.lora_rank
    if options.workload == "full-finetune":
        return _Tensors(p, int(p * float(tr.full.weight_bytes)), int(p * float(tr.full.grad_bytes)),
                        int(p * (float(tr.full.master_bytes) + state)), optimizer, state, rank)
    trainable = lora_params(model, rank)
    base = catalog.quants["BF16" if options.workload == "lora" else "nf4"]
    weights = mem.weights_layout(model, base).total_bytes + int(trainable * float(tr.adapter.weight_bytes))
    return _Tensors(trainable, weights, int(trainable * float(tr.adapter.grad_bytes)), int(trainable * state),
                    optimizer, state, rank)


def _per_gpu(t: _Tensors, stage: str, n: int, layer_w: int, rest: tuple[int, float, int]) -> int:
    """Peak bytes on each GPU at a sharding stage; `rest`: (activations, allocator fragmentation, CUDA context)."""
    acts, frag, context = rest
    if stage in ("single", "ddp"):
        tensors = t.weights + t.grads + t.optim
    elif stage == "zero1":
        tensors = t.weights + t.grads + t.optim // n
    elif stage == "zero2":
        tensors = t.weights + (t.grads + t.optim) // n
    elif stage == "zero3":  # everything sharded, one layer gathered at a time (and the next prefetched)
        tensors = (t.weights + t.grads + t.optim) // n + 2 * layer_w
    else:  # offload: the shards live in system RAM; the GPU holds the gathered layers and activations
        tensors = 2 * layer_w
    return int((tensors + acts) * frag) + context


def _strategy(stage: str, kind: str) -> str:
    strategy = _NAMES[stage]
    offload = " with CPU offload" if stage == "offload" else ""
    if stage in ("zero3", "offload") and kind == "qlora":
        return "FSDP+QLoRA (4-bit base sharded, Answer.AI)" + offload
    if stage in ("zero3", "offload") and kind == "lora":
        return "FSDP (frozen base sharded)" + offload
    return strategy


def estimate_training(catalog: Catalog, rig: Rig, model: ModelSpec, options: Options) -> Training:
    """Memory per GPU, the sharding that fits (or the one asked for), and the step time of a training workload."""
    rules, tr = catalog.rules, catalog.rules.training
    t = _tensors(catalog, model, options)
    n = max(len(rig.gpus), 1)
    trainer = next(r for r in catalog.runtimes.values() if r.trains)
    cap = min(usable_capacity(rig, trainer, rules) if rig.gpus else [0])
    rest = (activation_bytes(model, options, rules), float(tr.allocator.fragmentation),
            int(float(trainer.context_mib) * mem.MIB))
    layer_w = t.weights // max(model.layers, 1)
    host_need = t.weights + t.grads + t.optim
    host_cap = host_capacity(rig, rules)

    def ok(stage: str) -> bool:
        return _per_gpu(t, stage, n, layer_w, rest) <= cap and (stage != "offload" or host_need <= host_cap)

    if n == 1:
        stage = "single"
    elif options.sharding != "auto":
        stage = {"fsdp": "zero3", "fsdp-offload": "offload"}.get(options.sharding, options.sharding)
    else:
        stage = next((s for s in ("ddp", "zero2", "zero3", "offload") if ok(s)), "zero3")
    strategy = _strategy(stage, options.workload)
    fits = bool(rig.gpus) and ok(stage)
    note = ""
    offload_gpu = _per_gpu(t, "offload", n, layer_w, rest)
    if not fits and n > 1 and offload_gpu <= cap and host_need > host_cap:
        note = (f"FSDP with CPU offload would fit the GPUs ({offload_gpu / GIB:.1f} GiB each) but keeps "
                f"{host_need / GIB:.1f} GiB of shards in system RAM, and {host_cap / GIB:.1f} GiB is usable (--ram)")
    compute, comm, tps = _step(rig, model, options, (stage, t.trainable, t.weights), rules)
    sharded = {"single": "", "ddp": "", "zero1": "/N", "zero2": "/N", "zero3": "/N", "offload": " in RAM"}[stage]
    basis = (f"memory: weights, gradients{sharded}, optimizer state{sharded} and activations per rules/training.toml "
             f"(held to Answer.AI's FSDP+QLoRA and Unsloth's published figures, tests/data/training_memory.csv); "
             f"compute at {float(rules.interconnect.training.mfu):.0%} of dense FP16 throughput; communication from "
             f"the slowest link")
    assumptions = _assumptions(options, t, strategy, host_need if stage == "offload" else 0,
                               (float(tr.allocator.fragmentation), trainer.context_mib))
    return Training(workload=options.workload, strategy=strategy, per_gpu_bytes=int(_per_gpu(t, stage, n, layer_w, rest)),
                    weights_bytes=int(t.weights), gradients_bytes=int(t.grads), optimizer_bytes=int(t.optim),
                    activations_bytes=int(rest[0]), fits=fits, step_compute_s=compute, step_comm_s=comm,
                    tokens_per_s=tps, basis=basis, capacity_bytes=int(cap), trainable_params=int(t.trainable),
                    sharding=stage, assumptions=assumptions, note=note)


def _step(rig: Rig, model: ModelSpec, options: Options, traffic: tuple[str, int, int], rules: Rulebook):
    """(compute seconds, communication seconds, tokens per second) of one step, or Nones where a GPU's
    throughput is unknown."""
    if not (rig.gpus and all(g.spec.fp16_tflops > 0 for g in rig.gpus)):
        return None, None, None
    tokens = options.batch_size * options.seq_len
    flops_per_token = (6 if options.workload == "full-finetune" else 4) * model.params_active
    if options.gradient_checkpointing:
        flops_per_token += 2 * model.params_active
    speed = min(g.spec.fp16_tflops for g in rig.gpus) * 1e12 * float(rules.interconnect.training.mfu)
    compute = tokens * flops_per_token / speed  # each GPU its own micro-batch
    comm = _comm_seconds(rig, model, options, traffic, rules, mode="as_is")
    return compute, comm, tokens * max(len(rig.gpus), 1) / (compute + comm)


def _assumptions(options: Options, t: _Tensors, strategy: str, offloaded: int,
                 allocator: tuple[float, float]) -> tuple[tuple[str, str], ...]:
    """The settings the answer assumed, each with the flag that changes it."""
    kind = options.workload
    return (
        ("sequence length", f"{options.seq_len:,} tokens (--seq-len)"),
        ("micro-batch", f"{options.batch_size} per GPU (--batch-size)"),
        ("gradient checkpointing", "on (--no-gradient-checkpointing turns it off)" if options.gradient_checkpointing
         else "off"),
        ("optimizer", f"{t.optimizer}: {t.state:g} bytes of state per trainable parameter (--optimizer)"),
        ("trainable parameters", f"{t.trainable:,}" + (f" (LoRA rank {t.rank} on every linear layer, --lora-rank)"
                                                        if kind != "full-finetune" else " (all)")),
        ("base weights", {"full-finetune": "bf16 + fp32 master copy", "lora": "bf16, frozen",
                          "qlora": "NF4 (bitsandbytes, double quant), frozen"}[kind]),
        ("sharding", f"{strategy} (--sharding {options.sharding})"
         + (f"; {offloaded / GIB:.1f} GiB of shards in system RAM" if offloaded else "")),
        ("allocator", f"peak reserved = {allocator[0]:g} x tensors + {allocator[1]:g} MiB CUDA context"),
    )


def host_link(rig: Rig, rules: Rulebook) -> Link:
    """The slowest GPU's own PCIe link to system RAM (host-to-device copies run at the link's rate)."""
    gen = min(g.pcie_gen or g.spec.pcie_gen or 3 for g in rig.gpus)
    lanes = min(g.pcie_lanes or g.spec.pcie_lanes or 16 for g in rig.gpus)
    return Link("pcie_host", pcie_gb_s(gen, lanes, rules), float(rules.interconnect.allreduce.latency_us["pcie_host"]),
                f"PCIe {gen}.0 x{lanes} to system RAM")


def offload_seconds(rig: Rig, model: ModelSpec, weights: int, rules: Rulebook) -> float:
    """FSDP's CPU offload: each GPU copies its shard of the weights from system RAM before the forward and the
    backward gather (2 x weights / N) over its own PCIe link, all GPUs at once; no GPU-to-GPU link carries it."""
    link, n = host_link(rig, rules), max(len(rig.gpus), 1)
    return 2 * weights / n / (link.gb_s * 1e9) + 2 * model.layers * link.latency_us * 1e-6


def _comm_seconds(rig: Rig, model: ModelSpec, options: Options, traffic: tuple[str, int, int], rules: Rulebook,
                  mode: str) -> float:
    """Seconds of a step on the links; `traffic`: (sharding stage, trainable parameters, weight bytes). With CPU
    offload the shards also cross each GPU's own host link (offload_seconds), which `mode` does not change."""
    stage, trainable, weights = traffic
    n = len(rig.gpus)
    if n < 2:
        return 0.0
    if stage == "offload":
        return offload_seconds(rig, model, weights, rules) + _comm_seconds(rig, model, options,
                                                                            ("zero3", trainable, weights), rules, mode)
    link = slowest_link(rig, list(range(n)), rules, mode)
    assert link is not None
    ring = 2 * (n - 1) / n
    if stage in ("ddp", "zero1", "zero2"):
        volume = ring * trainable * 2
        calls = 1
    elif stage == "zero3":  # FSDP, FSDP+QLoRA: the (quantized) weights gathered per layer, twice
        volume = 1.5 * ring * weights
        calls = 3 * model.layers
    else:  # layer split: activations forward and their gradients backward at each boundary
        volume = 2 * (n - 1) * options.batch_size * options.seq_len * model.hidden_size * 2
        calls = 2 * (n - 1)
    return volume / (link.gb_s * 1e9) + calls * link.latency_us * 1e-6


def training_verdict(catalog: Catalog, rig: Rig, model: ModelSpec, options: Options, tr: Training) -> Interconnect:
    rules = catalog.rules
    if len(rig.gpus) < 2:
        return Interconnect("not_applicable", 0.0, 1.0, "one GPU: training needs no GPU-to-GPU link")
    if tr.step_compute_s is None or tr.step_comm_s is None:
        return Interconnect("not_applicable", 0.0, 1.0, "speed of these GPUs is unknown")
    trainable = tr.trainable_params
    traffic = (tr.sharding, trainable, tr.weights_bytes)
    nv = _comm_seconds(rig, model, options, traffic, rules, mode="nvlink")
    pcie = _comm_seconds(rig, model, options, traffic, rules, mode="pcie")
    without, with_nv = tr.step_compute_s + pcie, tr.step_compute_s + nv
    speedup = without / with_nv
    share = tr.step_comm_s / (tr.step_compute_s + tr.step_comm_s)
    v = rules.interconnect.verdict
    verdict = "needed" if speedup >= float(v.needed_above) else "helps" if speedup >= float(v.helps_above) \
        else "not_needed"
    have = " (which this rig has)" if rig.nvlink else ""
    summary = (f"{options.workload} with {tr.strategy}: {pcie:.2f} s of each {without:.2f} s step is communication "
               f"over PCIe; with NVLink{have} a step takes {with_nv:.2f} s ({speedup:.2f}x).")
    if tr.sharding == "offload":
        host = offload_seconds(rig, model, tr.weights_bytes, rules)
        bound = without / (tr.step_compute_s + host)  # a GPU link infinitely fast still waits for the host copies
        summary += (f" Of that, {host:.2f} s copies the shards from system RAM over each GPU's own PCIe link, which "
                    f"NVLink does not carry: the host link bounds the step, so no GPU link can make it more than "
                    f"{bound:.2f}x as fast.")
    details = (("strategy", tr.strategy), ("step compute", f"{tr.step_compute_s:.3f} s"),
               ("step communication over PCIe", f"{pcie:.3f} s"), ("with NVLink", f"{nv:.3f} s"))
    return Interconnect(verdict, round(share, 4), round(max(speedup, 1.0), 3), summary, details)
