"""Score llama.cpp -sm tensor (its meta device) against public llama-bench tables of -sm layer vs -sm tensor.

    python bench/sm_tensor.py

Nothing is fitted here: the tensor-parallel link model (advisor.engine.interconnect, two all-reduces per layer
at rules/interconnect.toml's latencies, f32 activations for ggml) and the speed fractions (rules/speed.toml,
fitted on other runs) are held to tests/data/llamacpp_sm_tensor.csv, which no constant was fitted on. Each row
is asked as a user would (same GPUs, model, quant, test; flash attention on, as -sm tensor requires), once with
--split layer and once with --split tensor, at the row's depth for decode. Printed: the predicted and measured
tokens/s of -sm tensor and the tensor/layer ratio, and the median and worst errors.
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor.catalog.load import load_catalog  # noqa: E402
from advisor.engine.check import decode_seconds, evaluate  # noqa: E402
from advisor.engine.scenario import Scenario  # noqa: E402
from advisor.engine.options import Options  # noqa: E402
from advisor.probe.flags import rig_from_flags  # noqa: E402

ROWS = ROOT / "tests" / "data" / "llamacpp_sm_tensor.csv"


@dataclass
class Scored:
    label: str
    test: str
    depth: int
    measured_tensor: float
    measured_ratio: float
    predicted_tensor: float
    predicted_ratio: float

    @property
    def tensor_error(self) -> float:
        return self.predicted_tensor / self.measured_tensor - 1

    @property
    def ratio_error(self) -> float:
        return self.predicted_ratio / self.measured_ratio - 1


def _tps(catalog, row: dict, split: str) -> float:
    rig = rig_from_flags(catalog, [f"{row['gpu_count']}x{row['gpu']}"], ram=512)
    model = catalog.models[row["model"]]
    depth = int(row["depth"] or 0)
    prompt = int(row["n_prompt"]) if row["test"] == "pp" else 512
    ctx = max(4096, depth + int(row["n_gen"] or 0) + prompt)
    opts = Options(quant=row["quant"], split=split, ctx=ctx, prompt_tokens=prompt, flash_attn="on")
    r = evaluate(catalog, rig, model, opts, table=False)
    assert r.placement.runs, (row, split, r.placement.problem)
    if row["test"] == "pp":
        return r.speed.prefill_tokens_per_s
    if depth == 0:
        return r.speed.decode_tokens_per_s
    sc = Scenario(model, r.quant, r.runtime, rig, opts, catalog.rules, ctx, r.placement.layout)
    return 1 / decode_seconds(sc, r.placement, depth)


def scored(catalog=None) -> list[Scored]:
    catalog = catalog or load_catalog(False)
    out = []
    with ROWS.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            layer, tensor = _tps(catalog, row, "layer"), _tps(catalog, row, "tensor")
            m_layer, m_tensor = float(row["layer_tps"]), float(row["tensor_tps"])
            n = row["n_prompt"] if row["test"] == "pp" else row["n_gen"]
            label = f"{row['gpu_count']}x {row['gpu']} {row['model']} {row['quant']} {row['test']}{n}" + \
                (f" @ d{row['depth']}" if int(row["depth"] or 0) else "")
            out.append(Scored(label, row["test"], int(row["depth"] or 0), m_tensor, m_tensor / m_layer, tensor,
                              tensor / layer))
    return out


def summary(rows: list[Scored], test: str) -> tuple[float, float, float, float]:
    """(median |tensor error|, worst, median |ratio error|, worst) over the rows of one test (tg or pp)."""
    sel = [r for r in rows if r.test == test]
    t = [abs(r.tensor_error) for r in sel]
    q = [abs(r.ratio_error) for r in sel]
    return statistics.median(t), max(t), statistics.median(q), max(q)


def main() -> int:
    rows = scored()
    print(f"{'row':58} {'tensor meas':>11} {'pred':>8} {'err':>7}  {'t/l meas':>8} {'pred':>6} {'err':>7}")
    for r in rows:
        print(f"{r.label:58} {r.measured_tensor:11.1f} {r.predicted_tensor:8.1f} {r.tensor_error:+7.1%}  "
              f"{r.measured_ratio:8.2f} {r.predicted_ratio:6.2f} {r.ratio_error:+7.1%}")
    for test in ("tg", "pp"):
        t50, tmax, q50, qmax = summary(rows, test)
        print(f"{test}: -sm tensor tokens/s median |error| {t50:.1%} (worst {tmax:.1%}); "
              f"tensor/layer ratio median |error| {q50:.1%} (worst {qmax:.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
