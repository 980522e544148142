"""Fine-tuning on the rig: memory per GPU, step time split into compute and communication, and
the strategy a practitioner would pick (DDP, FSDP/ZeRO-3, or a naive layer split with device_map).

Memory: full fine-tuning with mixed-precision Adam keeps 16 bytes per parameter (ZeRO paper);
LoRA keeps frozen 16-bit weights plus adapters with their own 16 bytes per trainable parameter;
QLoRA the same over 4-bit (nf4) weights. Activations: with gradient checkpointing one 16-bit
hidden vector per token per layer plus one layer's full activations; without, every layer's.
Communication: DDP all-reduces the trainable gradients (2(N-1)/N x bytes) per step; FSDP moves
about 1.5x that with the weights; a layer split passes activations at each boundary.
"""

from __future__ import annotations

from advisor.catalog.rulebook import Rulebook
from advisor.catalog.types import Catalog, ModelSpec
from advisor.engine.interconnect import slowest_link
from advisor.engine.options import Options
from advisor.engine.placement import usable_capacity
from advisor.engine.result import Interconnect, Training
from advisor.engine.rig import Rig


def _activation_bytes(model: ModelSpec, options: Options, rules: Rulebook, layers: int) -> int:
    t = rules.interconnect.training
    b, s, h = options.batch_size, options.seq_len, model.hidden_size
    one_layer = b * s * h * float(t.full_act_bytes_per_hidden) + \
        float(t.full_act_heads_factor) * model.attention_heads * s * s * b
    if options.gradient_checkpointing:
        return int(layers * b * s * h * float(t.ckpt_bytes_per_hidden) + one_layer)
    return int(layers * one_layer)


def estimate_training(catalog: Catalog, rig: Rig, model: ModelSpec, options: Options) -> Training:
    rules = catalog.rules
    t = rules.interconnect.training
    p = model.params_total
    n = max(len(rig.gpus), 1)
    kind = options.workload
    if kind == "full-finetune":
        trainable = p
        weights = p * 2
        grads = p * 2
        optim = p * (int(t.full_bytes_per_param) - 4)
    else:
        trainable = int(p * float(t.lora_trainable_fraction))
        bits = 16 if kind == "lora" else catalog.quants["nf4"].bits_per_weight
        weights = int(p * bits / 8)
        grads = trainable * 2
        optim = trainable * (int(t.full_bytes_per_param) - 2)
    trainer = next(r for r in catalog.runtimes.values() if r.trains)
    caps = usable_capacity(rig, trainer, rules) if rig.gpus else [0]
    cap = min(caps)
    acts = _activation_bytes(model, options, rules, model.layers)
    state = weights + grads + optim
    if n == 1:
        strategy, per_gpu = "single GPU", state + acts
    elif state + acts <= cap:
        strategy, per_gpu = "DDP (data parallel)", state + acts
    elif kind == "full-finetune":
        strategy, per_gpu = "FSDP / ZeRO-3 (sharded)", state // n + acts
    else:
        strategy, per_gpu = "layer split (device_map='auto')", state // n + acts // n
    fits = bool(rig.gpus) and per_gpu <= cap
    tokens = options.batch_size * options.seq_len
    flops_per_token = (6 if kind == "full-finetune" else 4) * model.params_active
    if options.gradient_checkpointing:
        flops_per_token += 2 * model.params_active
    compute = comm = tps = None
    if rig.gpus and all(g.spec.fp16_tflops > 0 for g in rig.gpus):
        speed = min(g.spec.fp16_tflops for g in rig.gpus) * 1e12 * float(t.mfu)
        if strategy.startswith("layer split"):
            compute = tokens * flops_per_token / speed  # the GPUs take turns
        else:
            compute = tokens * flops_per_token / speed  # each GPU its own batch
        comm = _comm_seconds(rig, model, options, strategy, trainable, rules, mode="as_is")
        step = compute + comm
        tps = tokens * (1 if strategy.startswith("layer split") or n == 1 else n) / step
    basis = ("memory: 16 B/param for mixed-precision Adam (ZeRO), LoRA adapters at "
             f"{float(t.lora_trainable_fraction):.1%} of parameters, activations per Korthikanti et al.; "
             f"compute at {float(t.mfu):.0%} of dense FP16 throughput; communication from the slowest link")
    return Training(workload=kind, strategy=strategy, per_gpu_bytes=int(per_gpu), weights_bytes=int(weights),
                    gradients_bytes=int(grads), optimizer_bytes=int(optim), activations_bytes=int(acts), fits=fits,
                    step_compute_s=compute, step_comm_s=comm, tokens_per_s=tps, basis=basis)


def _comm_seconds(rig: Rig, model: ModelSpec, options: Options, strategy: str, trainable: int, rules: Rulebook,
                  mode: str) -> float:
    n = len(rig.gpus)
    if n < 2:
        return 0.0
    link = slowest_link(rig, list(range(n)), rules, mode)
    assert link is not None
    ring = 2 * (n - 1) / n
    if strategy.startswith("DDP"):
        volume = ring * trainable * 2
        calls = 1
    elif strategy.startswith("FSDP"):
        volume = 1.5 * ring * model.params_total * 2
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
    trainable = int(model.params_total * (1 if options.workload == "full-finetune"
                                          else float(rules.interconnect.training.lora_trainable_fraction)))
    nv = _comm_seconds(rig, model, options, tr.strategy, trainable, rules, mode="nvlink")
    pcie = _comm_seconds(rig, model, options, tr.strategy, trainable, rules, mode="pcie")
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
