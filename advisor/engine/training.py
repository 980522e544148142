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
from advisor.engine.interconnect import slowest_link
from advisor.engine.options import Options
from advisor.engine.placement import host_capacity, usable_capacity
from advisor.engine.result import Interconnect, Training
from advisor.engine.rig import Rig
from advisor.errors import AdvisorError

SHARDINGS = ("auto", "ddp", "zero1", "zero2", "zero3", "fsdp", "fsdp-offload")
"""--sharding: auto picks the least that fits; fsdp is ZeRO-3 (weights, gradients and state sharded);
fsdp-offload keeps the shards in system RAM and brings one layer at a time to the GPU (FSDP
CPUOffload, ZeRO-Infinity's offload: Answer.AI's recipe for 70B on 2x 24 GB)."""
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


def estimate_training(catalog: Catalog, rig: Rig, model: ModelSpec, options: Options) -> Training:
    rules = catalog.rules
    tr = rules.training
    t = rules.interconnect.training
    optimizer = check_training_options(catalog, options)
    state = float(tr.optimizer.state_bytes[optimizer])
    p = model.params_total
    n = max(len(rig.gpus), 1)
    kind = options.workload
    rank = options.lora_rank or tr.defaults.lora_rank
    if kind == "full-finetune":
        trainable = p
        weights = int(p * float(tr.full.weight_bytes))
        grads = int(p * float(tr.full.grad_bytes))
        optim = int(p * (float(tr.full.master_bytes) + state))
    else:
        trainable = lora_params(model, rank)
        base = catalog.quants["BF16" if kind == "lora" else "nf4"]
        weights = mem.weights_layout(model, base).total_bytes + int(trainable * float(tr.adapter.weight_bytes))
        grads = int(trainable * float(tr.adapter.grad_bytes))
        optim = int(trainable * state)
    trainer = next(r for r in catalog.runtimes.values() if r.trains)
    caps = usable_capacity(rig, trainer, rules) if rig.gpus else [0]
    cap = min(caps)
    context = int(float(trainer.context_mib) * mem.MIB)
    frag = float(tr.allocator.fragmentation)
    acts = activation_bytes(model, options, rules)
    layer_w = weights // max(model.layers, 1)

    def per_gpu(stage: str) -> int:
        if stage in ("single", "ddp"):
            tensors = weights + grads + optim
        elif stage == "zero1":
            tensors = weights + grads + optim // n
        elif stage == "zero2":
            tensors = weights + (grads + optim) // n
        elif stage == "zero3":  # everything sharded, one layer gathered at a time (and the next prefetched)
            tensors = (weights + grads + optim) // n + 2 * layer_w
        else:  # offload: the shards live in system RAM; the GPU holds the gathered layers and activations
            tensors = 2 * layer_w
        return int((tensors + acts) * frag) + context

    host_need = weights + grads + optim
    host_cap = host_capacity(rig, rules)

    def ok(stage: str) -> bool:
        return per_gpu(stage) <= cap and (stage != "offload" or host_need <= host_cap)

    if n == 1:
        stage = "single"
    elif options.sharding != "auto":
        stage = {"fsdp": "zero3", "fsdp-offload": "offload"}.get(options.sharding, options.sharding)
    else:
        stage = next((s for s in ("ddp", "zero2", "zero3", "offload") if ok(s)), "zero3")
    need = per_gpu(stage)
    strategy = _NAMES[stage]
    if stage in ("zero3", "offload") and kind == "qlora":
        strategy = "FSDP+QLoRA (4-bit base sharded, Answer.AI)" + (" with CPU offload" if stage == "offload" else "")
    elif stage in ("zero3", "offload") and kind == "lora":
        strategy = "FSDP (frozen base sharded)" + (" with CPU offload" if stage == "offload" else "")
    fits = bool(rig.gpus) and ok(stage)
    note = ""
    if not fits and n > 1 and per_gpu("offload") <= cap and host_need > host_cap:
        note = (f"FSDP with CPU offload would fit the GPUs ({per_gpu('offload') / GIB:.1f} GiB each) but keeps "
                f"{host_need / GIB:.1f} GiB of shards in system RAM, and {host_cap / GIB:.1f} GiB is usable (--ram)")
    tokens = options.batch_size * options.seq_len
    flops_per_token = (6 if kind == "full-finetune" else 4) * model.params_active
    if options.gradient_checkpointing:
        flops_per_token += 2 * model.params_active
    compute = comm = tps = None
    if rig.gpus and all(g.spec.fp16_tflops > 0 for g in rig.gpus):
        speed = min(g.spec.fp16_tflops for g in rig.gpus) * 1e12 * float(t.mfu)
        compute = tokens * flops_per_token / speed  # each GPU its own micro-batch
        comm = _comm_seconds(rig, model, options, strategy, trainable, rules, mode="as_is", weights=weights)
        step = compute + comm
        tps = tokens * n / step
    sharded = {"single": "", "ddp": "", "zero1": "/N", "zero2": "/N", "zero3": "/N", "offload": " in RAM"}[stage]
    assumptions = (
        ("sequence length", f"{options.seq_len:,} tokens (--seq-len)"),
        ("micro-batch", f"{options.batch_size} per GPU (--batch-size)"),
        ("gradient checkpointing", "on (--no-gradient-checkpointing turns it off)" if options.gradient_checkpointing
         else "off"),
        ("optimizer", f"{optimizer}: {state:g} bytes of state per trainable parameter (--optimizer)"),
        ("trainable parameters", f"{trainable:,}" + (f" (LoRA rank {rank} on every linear layer, --lora-rank)"
                                                      if kind != "full-finetune" else " (all)")),
        ("base weights", {"full-finetune": "bf16 + fp32 master copy", "lora": "bf16, frozen",
                          "qlora": "NF4 (bitsandbytes, double quant), frozen"}[kind]),
        ("sharding", f"{strategy} (--sharding {options.sharding})"
         + (f"; {host_need / GIB:.1f} GiB of shards in system RAM" if stage == "offload" else "")),
        ("allocator", f"peak reserved = {frag:g} x tensors + {trainer.context_mib:g} MiB CUDA context"),
    )
    basis = (f"memory: weights, gradients{sharded}, optimizer state{sharded} and activations per rules/training.toml "
             f"(held to Answer.AI's FSDP+QLoRA and Unsloth's published figures, tests/data/training_memory.csv); "
             f"compute at {float(t.mfu):.0%} of dense FP16 throughput; communication from the slowest link")
    return Training(workload=kind, strategy=strategy, per_gpu_bytes=int(need), weights_bytes=int(weights),
                    gradients_bytes=int(grads), optimizer_bytes=int(optim), activations_bytes=int(acts), fits=fits,
                    step_compute_s=compute, step_comm_s=comm, tokens_per_s=tps, basis=basis,
                    capacity_bytes=int(cap), trainable_params=int(trainable), sharding=stage,
                    assumptions=assumptions, note=note)


def _comm_seconds(rig: Rig, model: ModelSpec, options: Options, strategy: str, trainable: int, rules: Rulebook,
                  mode: str, weights: int) -> float:
    n = len(rig.gpus)
    if n < 2:
        return 0.0
    link = slowest_link(rig, list(range(n)), rules, mode)
    assert link is not None
    ring = 2 * (n - 1) / n
    if strategy.startswith(("DDP", "ZeRO")):
        volume = ring * trainable * 2
        calls = 1
    elif strategy.startswith("FSDP"):  # FSDP, FSDP+QLoRA: the (quantized) weights gathered per layer, twice
        # (with CPU offload they come over each GPU's host link instead: the same volume, a slower link)
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
    nv = _comm_seconds(rig, model, options, tr.strategy, trainable, rules, mode="nvlink", weights=tr.weights_bytes)
    pcie = _comm_seconds(rig, model, options, tr.strategy, trainable, rules, mode="pcie", weights=tr.weights_bytes)
    without, with_nv = tr.step_compute_s + pcie, tr.step_compute_s + nv
    speedup = without / with_nv
    share = tr.step_comm_s / (tr.step_compute_s + tr.step_comm_s)
    v = rules.interconnect.verdict
    verdict = "needed" if speedup >= float(v.needed_above) else "helps" if speedup >= float(v.helps_above) \
        else "not_needed"
    have = " (which this rig has)" if rig.nvlink else ""
    summary = (f"{options.workload} with {tr.strategy}: {pcie:.2f} s of each {without:.2f} s step is communication "
               f"over PCIe; with NVLink{have} a step takes {with_nv:.2f} s ({speedup:.2f}x).")
    details = (("strategy", tr.strategy), ("step compute", f"{tr.step_compute_s:.3f} s"),
               ("step communication over PCIe", f"{pcie:.3f} s"), ("with NVLink", f"{nv:.3f} s"))
    return Interconnect(verdict, round(share, 4), round(max(speedup, 1.0), 3), summary, details)
