"""This rig's own correction of the speed model, learnt from `advisor verify` runs on it.

The fitted fractions of rules/speed.toml are the same for every card of an architecture; a user's card
is not every card (thermals, driver, build flags, power limit, RAM timings). Each `advisor verify` run
stores what the plain model predicted and what the benchmark measured (advisor/measure/store.py); the
correction for a device, backend and placement is the geometric mean of measured / predicted over those
runs, separately for decode and prefill. Decode time per token is the bytes read over the fitted share of
the bandwidth (plus fixed costs), so scaling the predicted rate by the factor is scaling that fitted share;
prefill likewise for the compute share.

Pure: stored runs in, a frozen `Calibration` out (`fit`); a finished `Report` and a `Calibration` in, the
same Report with its speeds rescaled and the note saying so out (`apply`). No I/O here.
"""

from __future__ import annotations

import math
from dataclasses import replace

from advisor.engine.result import Report, Speed
from advisor.engine.rig import gpu_backend
from advisor.engine.strategies import words_of
from advisor.record import Record, record


@record
class Run(Record):
    """One stored comparison, as the fit reads it."""

    device: str
    backend: str
    placement: str
    test: str
    """`tg` (decode) or `pp` (prefill)."""
    predicted: float
    """tokens/s the plain model (no calibration) predicted for this test."""
    measured: float
    """tokens/s the benchmark measured."""


@record
class Factor(Record):
    """The correction for one device, backend and placement: measured / predicted (geometric mean)."""

    device: str
    """The rig's GPUs (`rtx-3090`, `2x rtx-3090`) or its CPU (`cpu: AMD Ryzen 9 7950X`)."""
    backend: str
    """Runtime and compute backend, `llama.cpp/cuda`, `llama.cpp/cpu`, `vllm/cuda`."""
    placement: str
    """Where the model sat (the error band's placement words): `one GPU`, `CPU only`, `GPU + system RAM`..."""
    decode: float | None
    decode_runs: int
    prefill: float | None
    prefill_runs: int

    @property
    def runs(self) -> int:
        return max(self.decode_runs, self.prefill_runs)


@record
class Calibration(Record):
    """Every factor the stored runs support, and where they were read from."""

    factors: tuple[Factor, ...]
    source: str
    """The measurement store the runs came from."""

    def find(self, key: tuple[str, str, str]) -> Factor | None:
        return next((f for f in self.factors if (f.device, f.backend, f.placement) == key), None)


@record
class CalibrationUse(Record):
    """What one answer carries: the factor applied and the plain model's numbers it replaced."""

    factor: Factor
    source: str
    plain_decode_tokens_per_s: float | None
    plain_prefill_tokens_per_s: float | None

    @property
    def text(self) -> str:
        f = self.factor
        parts = []
        if f.decode is not None:
            parts.append(f"decode x{f.decode:.2f} ({f.decode_runs} run{'s' if f.decode_runs != 1 else ''})")
        if f.prefill is not None:
            parts.append(f"prefill x{f.prefill:.2f} ({f.prefill_runs} run{'s' if f.prefill_runs != 1 else ''})")
        plain = ", ".join(f"{name} {v:g} tok/s" for name, v in (("decode", self.plain_decode_tokens_per_s),
                                                                 ("prefill", self.plain_prefill_tokens_per_s))
                          if v is not None)
        return (f"calibrated on this rig from {f.runs} run{'s' if f.runs != 1 else ''} of advisor verify "
                f"({f.device}, {f.backend}, {f.placement}): {'; '.join(parts)} measured/predicted"
                + (f"; the plain model says {plain} (--no-calibration)" if plain else ""))


@record
class CalibratedSpeed(Speed):
    """A Speed rescaled by this rig's calibration (the plain model's numbers are in `calibration`)."""

    calibration: CalibrationUse | None = None


def device_of(report: Report) -> str:
    """The rig's devices as a calibration key: its GPUs by catalog id, else its CPU by name."""
    rig = report.rig
    if not rig.gpus or report.placement.strategy == "cpu_only":
        return f"cpu: {rig.cpu or 'unknown CPU'}"
    counts: dict[str, int] = {}
    for g in rig.gpus:
        counts[g.spec.id] = counts.get(g.spec.id, 0) + 1
    return " + ".join(f"{n}x {gid}" if n > 1 else gid for gid, n in counts.items())


def key_of(report: Report) -> tuple[str, str, str]:
    """(device, backend, placement): what a stored run and a later answer must share to correct it."""
    rig = report.rig
    cpu = not rig.gpus or report.placement.strategy == "cpu_only"
    backend = f"{report.runtime.id}/{'cpu' if cpu else gpu_backend(rig.gpus[0].spec)}"
    return device_of(report), backend, words_of(report.placement.strategy).kind


def fit(runs: list[Run] | tuple[Run, ...], source: str) -> Calibration:
    """One factor per (device, backend, placement): the geometric mean of measured / predicted, per test.

    A geometric mean because the errors are ratios (a run twice as fast and one half as fast cancel)."""
    logs: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    for r in runs:
        if r.predicted > 0 and r.measured > 0 and r.test in ("tg", "pp"):
            by_test = logs.setdefault((r.device, r.backend, r.placement), {"tg": [], "pp": []})
            by_test[r.test].append(math.log(r.measured / r.predicted))

    def mean(xs: list[float]) -> float | None:
        return round(math.exp(sum(xs) / len(xs)), 4) if xs else None

    factors = tuple(Factor(d, b, p, mean(t["tg"]), len(t["tg"]), mean(t["pp"]), len(t["pp"]))
                    for (d, b, p), t in sorted(logs.items()))
    return Calibration(factors=factors, source=source)


def _scaled(value: float | None, factor: float | None) -> float | None:
    return value if value is None or factor is None else round(value * factor, 1)


def apply(report: Report, calibration: Calibration | None) -> Report:
    """The Report with its speeds rescaled by the factor for its device, backend and placement, and the
    note saying so; unchanged when there is none (or the answer has no speed to correct)."""
    if calibration is None or report.speed.decode_tokens_per_s is None or report.training is not None:
        return report
    factor = calibration.find(key_of(report))
    if factor is None:
        return report
    s, d, p = report.speed, factor.decode, factor.prefill
    use = CalibrationUse(factor, calibration.source, s.decode_tokens_per_s, s.prefill_tokens_per_s)
    speed = CalibratedSpeed(
        _scaled(s.decode_tokens_per_s, d), _scaled(s.prefill_tokens_per_s, p), _scaled(s.decode_at_ctx_tokens_per_s, d),
        _scaled(s.aggregate_decode_tokens_per_s, d), _scaled(s.per_stream_decode_tokens_per_s, d),
        basis=s.basis, error_band=s.error_band, calibration=use)
    choices = tuple(replace(c, decode_tokens_per_s=_scaled(c.decode_tokens_per_s, d),
                            prefill_tokens_per_s=_scaled(c.prefill_tokens_per_s, p))
                    if getattr(c, "strategy", None) == report.placement.strategy else c
                    for c in report.choices)
    return replace(report, speed=speed, choices=choices)


def calibration_of(report: Report) -> CalibrationUse | None:
    """The calibration an answer carries (None: the plain model)."""
    return getattr(report.speed, "calibration", None)
