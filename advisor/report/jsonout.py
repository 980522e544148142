"""A Report as the contract's JSON object (sizes in integer bytes, rates as floats)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a faster start)
if TYPE_CHECKING:
    from typing import Any, Callable

from advisor.engine.result import SCHEMA_VERSION, ErrorBand, Report


def error_band_json(b: ErrorBand) -> dict[str, Any]:
    """`speed.error_band`: the kind, the pool each band comes from (the kind, its backend family or all rows), its
    row counts, and p50/p90 per test or "not measured"."""
    def part(p50: float | None, p90: float | None) -> dict[str, float] | str:
        return "not measured" if p50 is None or p90 is None else {"p50_pct": p50, "p90_pct": p90}
    return {"kind": b.kind, "n": {"decode": b.decode_rows, "prefill": b.prefill_rows}, "min_rows": b.min_rows,
            "pool": {"decode": b.decode_pool, "prefill": b.prefill_pool},
            "decode": part(b.decode_p50_pct, b.decode_p90_pct),
            "prefill": part(b.prefill_p50_pct, b.prefill_p90_pct),
            "text": b.text}


def calibration_json(r: Report) -> dict[str, Any]:
    """`speed.calibration`, present only when this rig's `advisor verify` runs corrected the answer: the factors
    (measured / predicted), their run counts and key, and the plain model's numbers they replaced."""
    c = getattr(r.speed, "calibration", None)
    if c is None:
        return {}
    f = c.factor
    return {"calibration": {
        "device": f.device, "backend": f.backend, "placement": f.placement, "runs": f.runs,
        "decode_factor": f.decode, "decode_runs": f.decode_runs, "prefill_factor": f.prefill,
        "prefill_runs": f.prefill_runs, "plain_decode_tokens_per_s": c.plain_decode_tokens_per_s,
        "plain_prefill_tokens_per_s": c.plain_prefill_tokens_per_s, "source": c.source, "text": c.text}}


def fit_margin_json(r: Report) -> dict[str, Any] | None:
    """`fit_margin`: the memory the runtime keeps free on each GPU when it fits a model itself, and the GPU
    with the least left (`tight` is true when that is below the margin); null where the runtime declares none."""
    if not r.fit_margin_bytes or not r.placement.devices:
        return None
    least = min(r.placement.devices, key=lambda d: d.free_bytes)
    return {"margin_bytes": r.fit_margin_bytes, "device": least.device, "free_bytes": least.free_bytes,
            "basis": r.runtime.fit_margin_basis}


def check_json(r: Report) -> dict[str, Any]:
    """The contract's `check` answer (../shared/docs/contract.md): the sections every answer has, then those
    only some answers have (OPTIONAL_SECTIONS), in that order."""
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "model": {"id": r.model.id, "name": r.model.name, "params_total": r.model.params_total,
                  "params_active": r.model.params_active, "source": r.model_source},
        "quant": r.quant.id,
        "quant_chosen_by_advisor": r.quant_chosen,
        "workload": r.options.workload,
        "runtime": r.runtime.id,
        "split": r.split,
        "context_tokens": r.context_tokens,
        "kv_cache_type": r.options.kv_type,
        "concurrency": r.options.concurrency,
        "rig": rig_json(r),
        "fits": r.fits,
        "runs": r.runs,
        "tight": r.tight, "fit_margin": fit_margin_json(r),
        "placement": placement_json(r.placement),
        "memory": memory_json(r.placement),
        "max_context_tokens": r.max_context_tokens,
        "speed": speed_json(r),
        "interconnect": {
            "nvlink": r.interconnect.nvlink,
            "link_time_share": r.interconnect.link_time_share,
            "nvlink_speedup": r.interconnect.nvlink_speedup,
            "summary": r.interconnect.summary,
            "details": {k: v for k, v in r.interconnect.details},
        },
        "findings": [{"code": f.code, "severity": f.severity, "message": f.message} for f in r.findings],
    }
    for key, section in OPTIONAL_SECTIONS:
        value = section(r)
        if value is not None:
            out[key] = value
    return out


def placement_json(p: Any) -> dict[str, Any]:
    return {
        "strategy": p.strategy,
        "devices": [
            {"device": d.device, "name": d.name, "weights_bytes": d.weights_bytes,
             "kv_cache_bytes": d.kv_cache_bytes, "overhead_bytes": d.overhead_bytes,
             "total_bytes": d.total_bytes, "capacity_bytes": d.capacity_bytes, "layers": d.layers,
             "holds_output": d.holds_output}
            for d in p.devices
        ],
        "offloaded_bytes": p.offloaded_bytes,
        "host": {"weights_bytes": p.host.weights_bytes, "kv_cache_bytes": p.host.kv_cache_bytes,
                 "total_bytes": p.host.total_bytes, "capacity_bytes": p.host.capacity_bytes},
        "gpu_layers": p.gpu_layers,
        "cpu_expert_layers": p.cpu_expert_layers,
        "problem": p.problem or None,
    }


def memory_json(p: Any) -> dict[str, int]:
    """The placement's bytes summed over its devices and the host."""
    w = sum(d.weights_bytes for d in p.devices) + p.host.weights_bytes
    kv = sum(d.kv_cache_bytes for d in p.devices) + p.host.kv_cache_bytes
    o = sum(d.overhead_bytes for d in p.devices) + p.host.overhead_bytes
    return {"weights_bytes": w, "kv_cache_bytes": kv, "overhead_bytes": o, "total_bytes": w + kv + o}


def speed_json(r: Report) -> dict[str, Any]:
    return {
        "decode_tokens_per_s": r.speed.decode_tokens_per_s,
        "prefill_tokens_per_s": r.speed.prefill_tokens_per_s,
        "prompt_tokens": r.options.prompt_tokens,
        "decode_at_context_tokens_per_s": r.speed.decode_at_ctx_tokens_per_s,
        "aggregate_decode_tokens_per_s": r.speed.aggregate_decode_tokens_per_s,
        "per_stream_decode_tokens_per_s": r.speed.per_stream_decode_tokens_per_s,
        "basis": r.speed.basis,
        "error_band": error_band_json(r.speed.error_band),
        **calibration_json(r),
    }


def choice_policy_json(r: Report) -> dict[str, Any] | None:
    if r.policy is None:
        return None
    return {"why": r.choice_why or None, "policy": r.policy.text, "target_tokens_per_s": r.policy.target_tokens_per_s,
            "target_context_tokens": r.policy.target_context, "quality_floor": r.policy.floor.text}


def launch_json(r: Report) -> dict[str, Any] | None:
    lc = r.launch
    if lc is None:
        return None
    out: dict[str, Any] = {"command": lc.command or None, "runtime": lc.runtime, "launcher": lc.launcher,
                           "env": {k: v for k, v in lc.env}, "modelfile": lc.modelfile or None}
    if lc.note:
        out["note"] = lc.note
    if lc.nodes:
        from advisor.engine.launch import launch_steps

        out["order"] = lc.order
        out["nodes"] = [{"node": n.node, "host": n.host, "role": n.role, "command": n.commands[-1],
                         "commands": list(n.commands)} for n in lc.nodes]
        out["steps"] = [{"node": n.node, "host": n.host, "command": c} for n, c in launch_steps(lc)]
    return out


def split_choices_json(r: Report) -> list[dict[str, Any]] | None:
    """llama.cpp on several GPUs: -sm layer against -sm tensor (SPL002)."""
    if not r.split_choices:
        return None
    return [{"split": s.split, "runs": s.runs, "fits": s.fits, "decode_tokens_per_s": s.decode_tokens_per_s,
             "prefill_tokens_per_s": s.prefill_tokens_per_s, "link_time_share": s.link_time_share,
             "nvlink_speedup": s.nvlink_speedup, "problem": s.problem or None} for s in r.split_choices]


def training_json(r: Report) -> dict[str, Any] | None:
    t = r.training
    if t is None:
        return None
    return {
        "workload": t.workload, "strategy": t.strategy, "per_gpu_bytes": t.per_gpu_bytes,
        "weights_bytes": t.weights_bytes, "gradients_bytes": t.gradients_bytes,
        "optimizer_bytes": t.optimizer_bytes, "activations_bytes": t.activations_bytes, "fits": t.fits,
        "step_compute_s": t.step_compute_s, "step_comm_s": t.step_comm_s, "tokens_per_s": t.tokens_per_s,
        "basis": t.basis, "capacity_bytes": t.capacity_bytes, "trainable_params": t.trainable_params,
        "sharding": t.sharding, "assumptions": {k: v for k, v in t.assumptions},
    }


OPTIONAL_SECTIONS: tuple[tuple[str, Callable[[Report], Any]], ...] = (
    ("choice", choice_policy_json),
    ("choices", lambda r: [choice_json(c) for c in r.choices] if r.training is None else None),
    ("launch", launch_json),
    ("command_notes", lambda r: list(r.options.command_notes) or None),
    ("serving", lambda r: serving_json(r) if r.serving is not None else None),
    ("vision", lambda r: vision_json(r) if r.vision is not None else None),
    ("split_choices", split_choices_json),
    ("refusal", lambda r: r.refusal or None),
    ("training", training_json),
)
"""The sections only some answers have, each with what makes it (None: the answer has no such section)."""


def choice_json(c: Any) -> dict[str, Any]:
    """One row of the trade-off table (the contract's `choices`)."""
    return {"quant": c.quant.id, "kv_cache_type": c.kv_type, "max_context_tokens": c.max_context_tokens,
            "decode_tokens_per_s": c.decode_tokens_per_s, "prefill_tokens_per_s": c.prefill_tokens_per_s,
            "quality_loss": c.quality_loss, "where": c.where, "fits": c.fits, "below_floor": c.below_floor,
            "picked": c.picked, "why": c.why}


def rig_json(r: Report) -> dict[str, Any]:
    rig = r.rig
    return {
        "gpus": [{"id": g.spec.id, "name": g.name or g.spec.name, "vram_bytes": g.spec.vram_bytes,
                  "capacity_bytes": g.capacity_bytes, "pcie_gen": g.pcie_gen, "pcie_lanes": g.pcie_lanes}
                 for g in rig.gpus],
        "ram_bytes": rig.ram_bytes,
        "ram_bandwidth_gb_s": rig.ram_bandwidth_gb_s,
        "nvlink": rig.nvlink,
        "nvlink_pairs": [list(p) for p in rig.nvlink_pairs],
        "source": rig.source,
        "warnings": list(rig.warnings),
    }


def serving_json(r: Report) -> dict[str, Any]:
    """`serving`: a paged-KV runtime's pool (contract: kv_cache_tokens, kv_cache_bytes, max_concurrency, queued)."""
    s = r.serving
    assert s is not None
    return {
        "kv_cache_tokens": s.kv_cache_tokens, "kv_cache_bytes": s.kv_cache_bytes,
        "request_tokens": s.request_tokens, "max_concurrency": s.max_concurrency, "starts": s.starts,
        "requested": s.requested, "running": s.running, "queued": s.queued, "max_num_seqs": s.max_num_seqs,
        "memory_fraction": s.memory_fraction,
        "devices": [{"device": d.device, "pool_bytes": d.pool_bytes, "pool_tokens": d.pool_tokens} for d in s.devices],
        "request_length_tokens": s.request_length_tokens, "output_tokens": s.output_tokens,
        "ttft_s": s.ttft_s, "ttft_all_running_s": s.ttft_all_s, "ttft_p50_s": s.ttft_p50_s,
        "aggregate_decode_tokens_per_s": s.aggregate_decode_tokens_per_s,
        "per_stream_decode_tokens_per_s": s.per_stream_decode_tokens_per_s,
        "output_tokens_per_s": s.output_tokens_per_s,
        "remedies": [{"option": m.option, "starts": m.starts, "max_context_tokens": m.max_context_tokens,
                      "kv_cache_tokens": m.kv_cache_tokens} for m in s.remedies],
        "basis": s.basis,
    }


def vision_json(r: Report) -> dict[str, Any]:
    """`vision`: the vision tower the answer loads (in each holding device's overhead_bytes)."""
    v = r.vision
    t = v.tower
    return {"kind": t.kind or None, "source": t.source, "file": t.path or t.fetched or None, "params": t.params, "exact": t.exact,
            "weights_bytes": v.weights_bytes, "compute_bytes": v.compute_bytes,
            "devices": [f"gpu{i}" for i in v.devices] or ["cpu"], "images_profiled": v.images or None,
            "basis": v.basis}
