"""rules/quants.toml against its schema, the contract's quant ids and the shared reference data;
tests/data/llamacpp_memory_logs.csv against its column contract."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from advisor.catalog.types import QuantSpec

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
QUANTS_TOML = ROOT / "rules" / "quants.toml"
LOGS_CSV = ROOT / "tests" / "data" / "llamacpp_memory_logs.csv"
SHARED = ROOT.parent / "shared"
QUANT_BPW_CSV = SHARED / "data" / "quant_bpw.csv"

# The contract's quantization ids ("Ids" section of docs/contract.md), printed exactly like this.
# exl2-<bpw> is parametric and synthesized by the code, so it has no entry.
CONTRACT_IDS = [
    "F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q5_0", "Q4_K_M", "Q4_K_S",
    "Q4_0", "IQ4_XS", "IQ4_NL", "Q3_K_L", "Q3_K_M", "Q3_K_S", "IQ3_M", "IQ3_XXS", "Q2_K", "IQ2_M",
    "IQ2_XXS", "IQ1_S", "MXFP4",
    "fp8", "int8", "awq", "gptq", "nf4", "mlx-4bit", "mlx-8bit",
]
ADDED_IDS = ["NVFP4", "W4A16", "autoround", "int4-g32-experts", "fp4-experts-fp8", "mxfp4-bf16", "nvfp4-experts",
             "nvfp4-mlp-fp8"]
"""Names repos use today (issue 16): checked in tests/test_quants_cmd.py against their layouts; NVIDIA's NVFP4
layouts of Qwen3.5 / 3.6 (issue 27) in tests/test_vllm_checkpoints.py against their recorded configs."""
IK_IDS = ["IQ6_K", "IQ5_K", "IQ5_KS", "IQ4_K", "IQ4_KS", "IQ4_KSS", "IQ4_KT", "IQ3_K", "IQ3_KS", "IQ3_KT",
          "IQ2_KL", "IQ2_K", "IQ2_KS", "IQ2_KT", "IQ1_KT"]
"""ik_llama.cpp's own types (issue 14): checked in tests/test_ik_quants.py against its block sizes."""
RUNTIMES = {"llama.cpp", "ollama", "vllm", "exllamav2", "mlx", "transformers", "ik_llama.cpp"}
KERNELS = {"f32", "f16", "q8", "kquant", "iquant", "legacy", "mxfp4", "fp8", "int8", "int4"}
FORMATS = {"gguf", "safetensors", "exl2", "mlx"}

LOG_COLUMNS = [
    "source_url", "model", "n_layer", "n_ctx", "n_batch", "n_ubatch", "flash_attn", "type_k",
    "type_v", "n_gpu_layers", "n_gpus", "model_buffer_mib", "kv_buffer_mib", "compute_buffer_mib",
    "gpu_name", "llama_cpp_build", "notes",
]


def _raw_quants() -> list[dict]:
    with QUANTS_TOML.open("rb") as f:
        data = tomllib.load(f)
    assert set(data) == {"quant"}, f"unexpected top-level tables: {sorted(data)}"
    return data["quant"]


@pytest.fixture(scope="module")
def quants() -> dict[str, QuantSpec]:
    adapter = TypeAdapter(QuantSpec)
    return {entry["id"]: adapter.validate_python(entry) for entry in _raw_quants()}


def test_every_entry_validates_against_the_schema() -> None:
    adapter = TypeAdapter(QuantSpec)
    for entry in _raw_quants():
        spec = adapter.validate_python(entry)
        assert spec.bpw_basis.strip(), f"{spec.id}: bits_per_weight needs its source"
        if spec.kld is not None or spec.ppl_delta_pct is not None:
            assert spec.quality_basis.strip(), f"{spec.id}: quality numbers need their source"


def test_every_contract_id_is_present_once() -> None:
    ids = [entry["id"] for entry in _raw_quants()]
    lowered = [i.lower() for i in ids]
    assert len(lowered) == len(set(lowered)), "ids must be unique case-insensitively"
    want = set(CONTRACT_IDS) | set(ADDED_IDS) | set(IK_IDS)
    assert set(ids) == want, f"missing {sorted(want - set(ids))}, extra {sorted(set(ids) - want)}"
    assert not any(i.lower().startswith("exl2") for i in ids), "exl2-<bpw> is synthesized, not listed"


def test_field_vocabularies(quants: dict[str, QuantSpec]) -> None:
    for q in quants.values():
        assert q.format in FORMATS, q.id
        assert q.kernel in KERNELS, q.id
        assert q.runtimes and set(q.runtimes) <= RUNTIMES, q.id
        assert 1.0 < q.bits_per_weight <= 32.0, q.id
        if q.kld is not None:
            assert q.kld >= 0.0, q.id
        if q.format == "gguf":
            assert "vllm" not in q.runtimes or q.id in {"F16", "BF16"}, (
                f"{q.id}: vLLM's GGUF loader is experimental; only the 16-bit ids double as safetensors"
            )
            assert {"llama.cpp", "ollama"} <= set(q.runtimes) or (q.id in IK_IDS and q.runtimes == ("ik_llama.cpp",)), q.id


def test_bits_ordering(quants: dict[str, QuantSpec]) -> None:
    b = {k: v.bits_per_weight for k, v in quants.items()}
    assert b["F32"] > b["F16"]
    assert b["F16"] == b["BF16"]
    chain = ["F16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K", "IQ1_S"]
    for hi, lo in zip(chain, chain[1:]):
        assert b[hi] > b[lo], f"{hi} ({b[hi]}) should exceed {lo} ({b[lo]})"
    assert b["Q5_K_M"] > b["Q5_K_S"] and b["Q4_K_M"] > b["Q4_K_S"]
    assert b["Q3_K_L"] > b["Q3_K_M"] > b["Q3_K_S"]
    assert b["mlx-8bit"] > b["mlx-4bit"]


def test_quality_ordering(quants: dict[str, QuantSpec]) -> None:
    k = {q.id: q.kld for q in quants.values() if q.kld is not None}
    chain = ["Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K", "IQ1_S"]
    for better, worse in zip(chain, chain[1:]):
        assert k[better] < k[worse], f"{better} should lose less than {worse}"


def _norm(quant: str) -> str:
    return quant.strip().upper()


@pytest.fixture(scope="module")
def reference_rows() -> list[dict]:
    if not QUANT_BPW_CSV.exists():
        pytest.skip(f"shared reference data not present at {QUANT_BPW_CSV}")
    with QUANT_BPW_CSV.open(newline="") as f:
        return list(csv.DictReader(f))


def test_gguf_bpw_matches_llamacpp_readme_for_llama31_8b(
    quants: dict[str, QuantSpec], reference_rows: list[dict]
) -> None:
    readme = {
        _norm(r["quant"]): float(r["bits_per_weight"])
        for r in reference_rows
        if "tools/quantize/README.md" in r["source"]
        and r["model"] == "meta-llama/Llama-3.1-8B"
        and r["bits_per_weight"]
    }
    assert readme, "no Llama-3.1-8B rows found in quant_bpw.csv"
    compared = 0
    for q in quants.values():
        if q.format != "gguf" or _norm(q.id) not in readme:
            continue
        assert q.bits_per_weight == pytest.approx(readme[_norm(q.id)], abs=1e-4), q.id
        compared += 1
    assert compared >= 15, f"only {compared} GGUF entries were checked against the README table"


def test_derived_gguf_bpw_match_llama3_8b_sizes(
    quants: dict[str, QuantSpec], reference_rows: list[dict]
) -> None:
    """Quants missing from the README table are derived from the scoreboard's GiB sizes."""
    params = 8_030_261_248
    sizes = {
        _norm(r["quant"]): float(r["size"])
        for r in reference_rows
        if "LLaMA 3 8b Scoreboard" in r["source"] and r["size_unit"] == "GiB" and r["size"]
    }
    for qid in ("Q3_K_M", "Q5_0", "Q4_0"):
        derived = sizes[_norm(qid)] * 2**30 * 8 / params
        assert quants[qid].bits_per_weight == pytest.approx(derived, abs=1e-3), qid


def test_kld_matches_the_scoreboard(quants: dict[str, QuantSpec], reference_rows: list[dict]) -> None:
    kld: dict[str, set[float]] = {}
    for r in reference_rows:
        if "LLaMA 3 8b Scoreboard" in r["source"] and r["kld"]:
            kld.setdefault(_norm(r["quant"]), set()).add(float(r["kld"]))
    for q in quants.values():
        if q.format != "gguf" or q.kld is None or q.id in {"F32", "F16", "BF16"}:
            continue
        assert any(abs(q.kld - v) < 1e-6 for v in kld[_norm(q.id)]), (q.id, q.kld, kld[_norm(q.id)])


_DEVICE_LIST = re.compile(r"^[A-Za-z_][\w\[\].:-]*:\d+(\.\d+)?(;[A-Za-z_][\w\[\].:-]*:\d+(\.\d+)?)*$")


def test_llamacpp_memory_logs_csv_parses() -> None:
    with LOGS_CSV.open(newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == LOG_COLUMNS
        rows = list(reader)
    assert len(rows) >= 25
    for i, row in enumerate(rows, start=2):
        assert None not in row, f"line {i}: more cells than columns"
        assert row["source_url"].strip() and row["model"].strip(), f"line {i}"
        assert row["flash_attn"] in {"0", "1", "unknown", ""}, f"line {i}: flash_attn={row['flash_attn']}"
        for col in ("model_buffer_mib", "kv_buffer_mib", "compute_buffer_mib"):
            cell = row[col].strip()
            assert cell == "" or _DEVICE_LIST.match(cell), f"line {i}: {col}={cell!r}"
        for col in ("n_layer", "n_ctx", "n_batch", "n_ubatch", "n_gpus"):
            cell = row[col].strip()
            assert cell == "" or cell.isdigit(), f"line {i}: {col}={cell!r}"
    assert sum(1 for r in rows if r["compute_buffer_mib"].strip()) >= 20
