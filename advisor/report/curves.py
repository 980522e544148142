"""Speed against context: decode speed and time to first token of one answer's configuration as the
context grows, for the app's chart and its markdown export.

Each point is the engine asked again (`evaluate`) with the answer's quantization and KV cache type held
and the context (and the prompt, for time to first token) set to that many tokens, so the curve shows
what the engine says at every length, including where the model leaves the GPUs (a point that does not
fit is offloaded, and slower). Contexts are powers of two from 1k up to the model's maximum, plus the
answer's own context and largest fitting context. Decode is one stream with that many tokens already in
its KV cache; time to first token is that many prompt tokens over the prefill rate at that length.
"""

from __future__ import annotations

import dataclasses

from advisor.engine.check import evaluate
from advisor.engine.findings import ktok
from advisor.engine.result import Report
from advisor.errors import AdvisorError
from advisor.record import Record, record

FIRST = 1024
"""The shortest context charted: a short chat turn."""
MOST_POINTS = 12
"""At most this many points (about 0.1 s of engine time each)."""


@record
class CurvePoint(Record):
    context_tokens: int
    fits: bool
    """All on the GPUs at this context."""
    decode_tokens_per_s: float | None
    """One stream with this many tokens in its KV cache; None: it does not run."""
    ttft_s: float | None
    """A prompt of this many tokens, alone; None: it does not run."""


def contexts(r: Report) -> list[int]:
    """The contexts to chart for a report, ascending."""
    top = max(r.model.max_context, FIRST)
    powers = [FIRST << k for k in range(32) if FIRST << k <= top]
    if len(powers) > MOST_POINTS:  # a million-token model: every other power of two
        powers = powers[::-(-len(powers) // MOST_POINTS)] + [powers[-1]]
    extra = {n for n in (r.context_tokens, r.max_context_tokens) if FIRST <= n <= top}
    return sorted(set(powers) | extra)


def speed_curve(catalog, model, r: Report, cancelled=lambda: False) -> tuple[CurvePoint, ...]:
    """The report's configuration at each of `contexts(r)` (empty for training or an answer that does not
    run). `model` is what the report was evaluated on (a catalog entry or a model read from its file);
    `cancelled()` true stops it between points (the app's input changed: the curve is for an old answer)."""
    if r.training is not None or not r.runs or r.speed.decode_tokens_per_s is None:
        return ()
    held = dataclasses.replace(r.options, quant=r.quant.id, kv_fixed=True)
    out = []
    for n in contexts(r):
        if cancelled():
            return ()
        try:
            x = evaluate(catalog, r.rig, model, dataclasses.replace(held, ctx=n, prompt_tokens=n))
        except AdvisorError:  # a context the runtime refuses: the curve ends there
            break
        pre = x.speed.prefill_tokens_per_s
        out.append(CurvePoint(x.context_tokens, x.fits, x.speed.decode_at_ctx_tokens_per_s,
                              round(x.context_tokens / pre, 2) if pre else None))
    return tuple(out)


def curve_markdown(points: tuple[CurvePoint, ...], title: str = "Speed against context") -> str:
    """The curve for a markdown file: two line charts (mermaid, which GitHub and most viewers draw) and the
    numbers as a table. Empty when there is no curve."""
    if not points:
        return ""

    def chart(name: str, unit: str, values: list[float | None]) -> list[str]:
        shown = [(p, v) for p, v in zip(points, values) if v is not None]  # a context that does not run: no point
        return ["```mermaid", "xychart-beta", f'    title "{name}"',
                f"    x-axis [{', '.join(chr(34) + ktok(p.context_tokens) + chr(34) for p, _ in shown)}]",
                f'    y-axis "{unit}"', f"    line [{', '.join(f'{v:g}' for _, v in shown)}]", "```", ""]

    rows = [f"| {p.context_tokens:,} | {'yes' if p.fits else 'no'} | "
            f"{'—' if p.decode_tokens_per_s is None else f'{p.decode_tokens_per_s:,.1f}'} | "
            f"{'—' if p.ttft_s is None else f'{p.ttft_s:,.2f}'} |" for p in points]
    return "\n".join([f"### {title}", "", *chart("decode against context", "tokens/s",
                                                   [p.decode_tokens_per_s for p in points]),
                      *chart("time to first token against prompt length", "seconds", [p.ttft_s for p in points]),
                      "| context | fits on GPUs | decode tok/s | time to first token s |", "|---|---|---|---|",
                      *rows, "", "Decode: one stream with the context already in its KV cache; time to first "
                      "token: a prompt of that length, alone; each point the engine with this quantization "
                      "and KV cache type held.", ""])
