"""Guard the accuracy the project has reached on public llama.cpp measurements (bench/accuracy.py).

Bounds sit just above the last report; a change that makes predictions worse fails here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from accuracy import predict, summary  # noqa: E402
from measurements import load_cases  # noqa: E402

FIT_AGREEMENT_MIN = 0.995   # reached: 1104/1108
DECODE_MEDIAN_MAX = 0.065   # reached: 5.8%
PREFILL_MEDIAN_MAX = 0.15   # reached: 13.5%


@pytest.fixture(scope="module")
def result():
    return summary(predict(load_cases()))


def test_fit_or_oom_is_predicted_right(result):
    assert result["fit_rows"] > 1000
    assert result["fit_right"] / result["fit_rows"] >= FIT_AGREEMENT_MIN


def test_decode_error(result):
    assert result["tg_rows"] > 400
    assert result["tg_median"] <= DECODE_MEDIAN_MAX


def test_prefill_error(result):
    assert result["pp_rows"] > 400
    assert result["pp_median"] <= PREFILL_MEDIAN_MAX


def test_speed_is_null_when_it_does_not_run(catalog):
    from advisor.engine.check import evaluate
    from advisor.engine.options import Options
    from advisor.probe.flags import rig_from_flags

    r = evaluate(catalog, rig_from_flags(catalog, ["rtx-3060-12gb"], ram=16), catalog.models["llama-3.1-405b"], Options(quant="F16"))
    assert not r.runs and r.speed.decode_tokens_per_s is None and r.speed.prefill_tokens_per_s is None
