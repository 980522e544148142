"""Public llama.cpp measurements (tests/data/speed_measurements.csv) matched to the catalog.

Shared by bench/accuracy.py (the report), bench/calibrate.py (the fit) and tests/test_accuracy.py
(the guard). Each usable row becomes a `Case`: a rig, a model, a quant, the test (pp/tg with its
token counts) and what was measured (tokens/s, or out of memory).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, replace
from pathlib import Path

from advisor.catalog.load import load_catalog
from advisor.catalog.types import Catalog
from advisor.engine.check import resolve_quant
from advisor.engine.options import Options
from advisor.engine.placement import Placer
from advisor.engine.scenario import Scenario
from advisor.engine.rig import Rig
from advisor.probe.build import match_cpu, with_cpu
from advisor.probe.flags import rig_from_flags

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "tests" / "data" / "speed_measurements.csv"

# Source names -> catalog ids, where the source's wording is not a catalog alias.
GPU_NAMES = {
    "3070 8gb": "rtx-3070", "3080 10gb": "rtx-3080-10gb", "3080 ti 12gb": "rtx-3080-ti", "3090 24gb": "rtx-3090",
    "4070 ti 12gb": "rtx-4070-ti", "4080 16gb": "rtx-4080", "4090 24gb": "rtx-4090",
    "a100 pcie 80gb": "a100-pcie-80gb", "a100 sxm 80gb": "a100-sxm4-80gb", "a40 48gb": "a40",
    "h100 pcie 80gb": "h100-pcie", "l40s 48gb": "l40s", "rtx 4000 ada 20gb": "rtx-4000-ada",
    "rtx 5000 ada 32gb": "rtx-5000-ada", "rtx 6000 ada 48gb": "rtx-6000-ada", "rtx a6000 48gb": "rtx-a6000",
    "m1 7-core gpu 8gb": "m1-8gb", "m1 max 32-core gpu 64gb": "m1-max-64gb",
    "m2 ultra 76-core gpu 192gb": "m2-ultra-192gb", "m3 max 40-core gpu 64gb": "m3-max-64gb",
    "m1 max 24-core gpu 32gb": None, "a100 80gb": "a100-pcie-80gb",
    "nvidia a100 80gb (pcie or sxm not stated)": "a100-sxm4-80gb",
    "nvidia h100 80gb (form factor not stated in transcriptions)": "h100-sxm",
    "nvidia rtx pro 6000 blackwell (variant not specified)": "rtx-pro-6000",
    "nvidia tesla v100 32 gb": "v100-pcie-32gb", "nvidia dgx spark": "dgx-spark",
    "nvidia a100 80gb pcie": "a100-pcie-80gb",
    "nvidia dgx spark (nvidia-smi gpu name: nvidia gb10; memory-usage reported as not supported)": "dgx-spark",
    "m1 (7-core gpu)": "m1-8gb", "m1 max (32-core gpu)": "m1-max-64gb", "m1 ultra (64-core gpu)": "m1-ultra-128gb",
    "m2 max (38-core gpu)": "m2-max-96gb", "m2 ultra (76-core gpu)": "m2-ultra-192gb",
    "m3 max (40-core gpu)": "m3-max-128gb", "m4 max (40-core gpu)": "m4-max-128gb",
    "m3 ultra (80-core gpu)": "m3-ultra-512gb",
    # 2025-26 held-out rows (HELDOUT_DATASETS). A name that leaves the variant open maps to None:
    # not askable rather than guessed.
    "amd ryzen ai max+ 395 (radeon 8060s, gfx1151), 128 gb unified": "ryzen-ai-max-395-128gb",
    # ggerganov's M2 Ultra: 192 GB (ggml-org/ggml#381 "My 192GB M2 Ultra"), the 76-core row of #4167
    "apple m2 ultra (ggerganov's; gpu core count and memory not stated in the pr)": "m2-ultra-192gb",
    "nvidia gb10 (121.63 gb unified)": "dgx-spark", "nvidia geforce rtx 2080 (8.0 gb)": "rtx-2080",
    "nvidia geforce rtx 5070 (11.94 gb)": "rtx-5070", "nvidia geforce rtx 3090 (48.0 gb)": "rtx-3090",
    "tesla t4 (60.0 gb)": "t4", "nvidia h100 (form factor not stated)": "h100-sxm",
    # the 8060S is the Ryzen AI Max+ 395's GPU; its memory options share the GPU and the 256 GB/s
    "amd radeon 8060s (ryzen ai max+ 395; memory size not stated)": "ryzen-ai-max-395-128gb",
    "amd radeon rx 7900 xtx": "rx-7900-xtx",
    "amd ryzen ai max+ 395 (framework desktop pre-production, 128 gb lpddr5x-8000)": "ryzen-ai-max-395-128gb",
    "nvidia geforce rtx 3090 (power limit 220 w)": "rtx-3090",  # the advisor does not model power limits
    "apple m4 max (gpu cores and memory not stated)": None, "apple m3 ultra (256 gb; gpu core count not stated)": None,
}
MODELS = {"llama-2-7b": "llama-2-7b", "llama-3-8b": "llama-3-8b", "llama-3-70b": "llama-3-70b",
          "llama-3.1-8b": "llama-3.1-8b", "llama-2-13b": "llama-2-13b", "llama-2-70b": "llama-2-70b",
          "gpt-oss-20b": "gpt-oss-20b", "gpt-oss-120b": "gpt-oss-120b",
          "qwen3-coder-30b-a3b-instruct": "qwen3-coder-30b-a3b", "qwen2.5-coder-7b": "qwen2.5-coder-7b",
          "gemma-3-4b-it-qat": "gemma-3-4b", "tinyllama-1.1b": "tinyllama-1.1b"}
MODELS.update({m: m for m in (  # the held-out rows already name catalog ids
    "qwen3-30b-a3b", "qwen3-coder-30b-a3b", "qwen3-235b-a22b", "glm-4.5-air", "llama-4-scout", "llama-3.3-70b",
    "gemma-3-1b", "gemma-3-12b", "gemma-3-27b", "gemma-3-270m", "gemma-2-9b", "gemma-2-27b", "llama-3.2-1b", "llama-3.2-3b",
    "phi-3.5-mini", "phi-3-mini", "phi-4", "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b",
    "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-coder-32b", "qwq-32b",
    "mistral-7b", "mistral-nemo-12b", "mistral-small-24b", "codestral-22b", "deepseek-r1-distill-qwen-7b",
    "deepseek-r1-distill-qwen-14b", "deepseek-r1-distill-qwen-32b")})
BACKENDS = {"CUDA": "cuda", "Metal": "metal", "ROCm": "rocm", "Vulkan": "vulkan", "": ""}
"""The CSV's backend column -> the GPU backend (GpuSpec.backend) a row ran; rows on other backends (CPU
builds, SYCL, RPC) are not calibration rows."""
RUNTIMES = {"llama.cpp": "llama.cpp", "exllamav2": "exllamav2"}
"""Source runtime name -> catalog runtime id, for the calibration rows."""
HELDOUT_RUNTIMES = {**RUNTIMES, "ollama": "ollama", "mlx": "mlx", "rapid-mlx": "mlx", "vllm": "vllm"}
"""The same for the held-out rows: rapid-mlx is an MLX server (mlx-lm's kernels), asked as `mlx`."""
QUANTS = {"MLX 4-bit": "mlx-4bit", "MLX 8-bit": "mlx-8bit", "EXL2 2.5bpw": "exl2-2.5", "EXL2 3.0bpw": "exl2-3.0", "EXL2 4.0bpw": "exl2-4.0", "EXL2 5.0bpw": "exl2-5.0",
          "GPTQ 4-bit g128": "gptq"}
HELDOUT_DATASETS = frozenset({
    "strix_halo_kyuz0_toolboxes", "llamacpp_pr15616_m2ultra", "mlxlm_pr406_m4max", "mlx_pr3077_cuda", "mlxlm_pr1569_m3pro",
    "mlxlm_issue92", "rapidmlx_m3ultra", "strixhalo_homelab_issue11", "geerlingguy_aibench_issue23",
    "geerlingguy_aibench_issue25", "geerlingguy_aibench_issue43", "geerlingguy_aibench_issue51", "geerlingguy_pcie_issue766",
    "geerlingguy_sbc_issue107", "orionzhen_llamabench_amd", "rx7900xtx_1337hero_vulkan", "x3090_lottolotto_vllm",
    "strix_halo_lhl_llmbench"})
"""2025-26 public measurements added after the speed tables were fitted (tests/data/speed_measurements.md,
"2025-26 rows"), plus every `llmfit_community_*` dataset. Never fitted on: load_cases leaves them out and
bench/accuracy.py scores today's rules/speed.toml on them (load_heldout) as an out-of-sample check."""
SPEED_DATASETS = ("xiongjiedai_llama3", "cuda_scoreboard_15013", "apple_4167", "dgx_spark_bench",
                  "rocm_scoreboard_15021", "vulkan_scoreboard_10879", "vulkan_pr21024_3090", "rocm_pr26284_7900xtx",
                  "rocm_pr18537_7900xtx", "rocm_vulkan_pr18749_8060s", "hip_pr18666_8060s", "vulkan_issue22375_8060s",
                  "geerlingguy_aibench_issue21", "rocm_pr13324_7900xtx")
"""llama-bench tables: the speed fit and the headline error use these (the ROCm and Vulkan ones give those
backend families their own fractions; the Strix Halo and RX 7900 XTX ones give the AMD GPUs on Vulkan and the
strix-halo and rdna3 architectures theirs). Left out: the Dec 2023
`./main` timings (row split, prompt-eval numbers that do not behave like llama-bench pp) and the
MLC table whose llama.cpp column its own authors flag as broken (tests/data/speed_measurements.md)."""


@dataclass(frozen=True)
class Case:
    dataset: str
    gpu_id: str
    gpu_count: int
    split: str
    model_id: str
    quant: str
    test: str
    n_prompt: int
    n_gen: int
    measured: float | None
    """tokens/s, None for out of memory."""
    family: str
    source: str
    runtime: str = "llama.cpp"
    flash_attn: str = "off"
    """As the row ran: `on`/`off` where it says; `off` where it is blank (llama-bench's default until its
    2026 builds made it auto)."""
    depth: int = 0
    """Tokens already in the context when the test starts (llama-bench `@ dN`, a decode after a real prompt)."""
    backend: str = ""
    """The backend the row ran (`cuda`, `metal`, `rocm`, `vulkan`); empty: not stated (the GPU's own)."""
    cpu_id: str = ""
    """A CPU-only row (gpu_count 0): the catalog CPU its source names (hardware_db/cpus.toml); empty: the rig's
    CPU unknown (decode from RAM by bandwidth alone, as before the CPU catalog)."""

    @property
    def ctx(self) -> int:
        return max(self.depth + self.n_prompt + self.n_gen, 1)

    @property
    def label(self) -> str:
        return f"{self.gpu_count}x{self.gpu_id} {self.model_id} {self.quant} {self.test}{self.n_prompt or self.n_gen}"


def _gpu_id(catalog: Catalog, name: str) -> str | None:
    key = re.sub(r"\s+", " ", name.strip().lower())
    if key in GPU_NAMES:
        return GPU_NAMES[key]
    from advisor.probe.build import match_gpu

    return match_gpu(catalog, name)


def is_heldout(dataset: str) -> bool:
    return dataset in HELDOUT_DATASETS or dataset.startswith("llmfit_community_")


def load_cases(catalog: Catalog | None = None) -> list[Case]:
    catalog = catalog or load_catalog(user=False)
    cases = []
    with CSV.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if is_heldout(row["dataset"]):
                continue
            if row["runtime"] not in RUNTIMES or row["model"] not in MODELS or row["test"] not in ("pp", "tg"):
                continue
            if row["backend"] not in BACKENDS or not row["gpu_count"].isdigit():
                continue
            quant = QUANTS.get(row["quant"], row["quant"])
            gid = _gpu_id(catalog, row["gpu"])
            if gid is None or gid not in catalog.gpus:
                continue
            try:
                resolve_quant(catalog, quant)
            except Exception:  # noqa: BLE001 - a quant we do not model
                continue
            measured = float(row["tokens_per_s"]) if row["tokens_per_s"] else None
            if measured is None and "OOM" not in row["notes"]:
                continue
            spec = catalog.gpus[gid]
            cases.append(Case(
                dataset=row["dataset"], gpu_id=gid, gpu_count=int(row["gpu_count"]),
                split={"none": "layer", "layer": "layer", "row": "row", "tensor": "tensor"}.get(row["split"], "layer"),
                model_id=MODELS[row["model"]], quant=quant, test=row["test"],
                n_prompt=int(row["n_prompt"] or 0), n_gen=int(row["n_gen"] or 0) or (128 if row["test"] == "tg" else 0),
                measured=measured, family="apple" if spec.vendor == "apple" else spec.arch, source=row["source_url"],
                runtime=row["runtime"], flash_attn={"1": "on"}.get(row["flash_attn"], "off"),
                depth=int(row["depth"] or 0), backend=BACKENDS[row["backend"]]))
    return cases


def _heldout_case(catalog: Catalog, row: dict) -> Case | str:
    """A held-out row as the question a user would ask, or why it cannot be asked."""
    if row["runtime"] not in HELDOUT_RUNTIMES:
        return "runtime not in the catalog"
    runtime = HELDOUT_RUNTIMES[row["runtime"]]
    if not row["gpu_count"].isdigit() or (int(row["gpu_count"]) > 1 and row["split"] not in ("layer", "row", "tensor")):
        return "GPU count or multi-GPU split not stated"
    cpu_only = row["gpu_count"] == "0"
    gid = "" if cpu_only else _gpu_id(catalog, row["gpu"])
    cpu = match_cpu(catalog, row["gpu"]) if cpu_only else ""
    if cpu is None:
        return "CPU only, CPU not in the catalog"
    if gid is None or (gid and gid not in catalog.gpus):
        return "GPU or machine not in the catalog (or its variant not stated)"
    if row["model"] not in MODELS or MODELS[row["model"]] not in catalog.models:
        return "model not in the catalog"
    if not row["quant"]:
        return "quant not stated"
    quant = QUANTS.get(row["quant"], row["quant"])
    try:
        q = resolve_quant(catalog, quant)
    except Exception:  # noqa: BLE001 - a quant we do not model
        return "quant not modelled"
    if runtime not in q.runtimes:
        return "quant not modelled for this runtime"
    depth = int(row["depth"] or 0)
    if row["test"] == "pp" and not row["n_prompt"]:
        return "prompt length not stated"
    spec = catalog.gpus[gid] if gid else None
    return Case(dataset=row["dataset"], gpu_id=gid, gpu_count=int(row["gpu_count"]),
                split={"none": "layer", "layer": "layer", "row": "row", "tensor": "tensor"}[row["split"]],
                model_id=MODELS[row["model"]], quant=q.id, test=row["test"], n_prompt=int(row["n_prompt"] or 0),
                n_gen=int(row["n_gen"] or 0) or (128 if row["test"] == "tg" else 0), measured=float(row["tokens_per_s"]),
                family="cpu" if spec is None else "apple" if spec.vendor == "apple" else spec.arch,
                source=row["source_url"], runtime=runtime, depth=depth,
                flash_attn={"1": "on"}.get(row.get("flash_attn", ""), "off"), backend=BACKENDS.get(row["backend"], ""),
                cpu_id=cpu)


def load_heldout(catalog: Catalog | None = None) -> tuple[list[Case], dict[str, int], int]:
    """The 2025-26 held-out rows a user could ask about, why the others cannot be asked (reason -> rows),
    and how many held-out rows there are in all."""
    catalog = catalog or load_catalog(user=False)
    cases, skipped, total = [], {}, 0
    with CSV.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if not is_heldout(row["dataset"]) or not row["tokens_per_s"]:
                continue
            total += 1
            case = _heldout_case(catalog, row)
            if isinstance(case, str):
                skipped[case] = skipped.get(case, 0) + 1
            else:
                cases.append(case)
    return cases, skipped, total


def rig_for(catalog: Catalog, case: Case) -> Rig:
    """The row's GPUs with 128 GB of RAM, driven by the backend the row ran (a Vulkan build on any card); a
    CPU-only row: no GPU, the CPU its source names (its cores, and its memory interface as its vendor states
    it where the source does not give the RAM)."""
    if not case.gpu_count:
        return with_cpu(catalog, rig_from_flags(catalog, [], ram=128), case.cpu_id or None)
    rig = rig_from_flags(catalog, [f"{case.gpu_count}x{case.gpu_id}"], ram=128)
    if not case.backend or all(g.spec.backend == case.backend for g in rig.gpus):
        return rig
    gpus = tuple(replace(g, spec=replace(g.spec, backend=case.backend)) for g in rig.gpus)
    return replace(rig, gpus=gpus)


def placer_for(catalog: Catalog, case: Case) -> Placer:
    rig = rig_for(catalog, case)
    quant = resolve_quant(catalog, case.quant)
    opts = Options(quant=quant.id, ctx=case.ctx, prompt_tokens=max(case.n_prompt, 1), split=case.split,
                   runtime=case.runtime, flash_attn=case.flash_attn)
    return Placer(Scenario.of(catalog.models[case.model_id], quant, catalog.runtimes[case.runtime], rig, opts,
                              catalog.rules).at_context(case.ctx))
