"""A Report as text for a terminal, or as markdown: one document model, two formatters."""

from __future__ import annotations

import os
import sys

from advisor.record import Record, record
from advisor.catalog.types import GIB
from advisor.engine.result import Report
from advisor.engine.strategies import words_of
from advisor.report.wrap import shell_lines, table_lines, wrap_line



@record
class Section(Record):
    title: str
    rows: tuple[tuple[str, ...], ...]
    header: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()



def max_context_words(r, label: str, unit: str = "", offload_label: str | None = None) -> tuple[str, str]:
    """The largest context with everything on the GPUs; for an offloaded run, the context it runs at
    instead (the text report and the app say it the same way)."""
    if r.max_context_tokens:
        return label, f"{r.max_context_tokens:,}{unit}"
    if r.runs and not r.fits:
        return offload_label or label, f"{r.context_tokens:,} offloaded (none fits all on GPU)"
    return label, "none"

def gib(n: int | float) -> str:
    return f"{n / GIB:.1f} GiB"


def rate(x: float | None) -> str:
    return "—" if x is None else f"{x:,.1f} tok/s"


def headline(r: Report) -> str:
    rig = ", ".join(_rig_words(r)) or "CPU only"
    if r.training is not None:
        t = r.training
        return (f"{r.model.name} · {t.workload} · {r.options.batch_size} x {r.options.seq_len:,} tokens on {rig}: "
                f"{'FITS' if t.fits else 'DOES NOT FIT'}")
    verdict = ("FITS, TIGHT" if r.tight else "FITS") if r.fits else ("RUNS ON THE CPU" if r.runs and r.rig.is_cpu_only
                                     else "RUNS WITH OFFLOAD" if r.runs else "DOES NOT RUN")
    return f"{r.model.name} · {r.quant.id} · {r.context_tokens:,} ctx on {rig}: {verdict}"


def _rig_words(r: Report) -> list[str]:
    names: dict[str, int] = {}
    for g in r.rig.gpus:
        names[g.name or g.spec.name] = names.get(g.name or g.spec.name, 0) + 1
    words = [f"{n}× {k}" if n > 1 else k for k, n in names.items()]
    if r.rig.nvlink:
        words.append("NVLink")
    return words


def training_document(r: Report) -> list[Section]:
    """A training question: its answer, memory per GPU by piece, the assumptions, the link verdict."""
    t = r.training
    assert t is not None
    secs = [Section("Answer", (
        ("fits in GPU memory", "yes" if t.fits else "no"),
        ("workload", t.workload),
        ("strategy", t.strategy),
        ("per GPU", f"{gib(t.per_gpu_bytes)} of {gib(t.capacity_bytes)} usable"),
        ("model from", r.model_source),
    ))]
    secs.append(Section(f"Training ({t.workload})", (
        ("weights", gib(t.weights_bytes)), ("gradients", gib(t.gradients_bytes)),
        ("optimizer state", gib(t.optimizer_bytes)), ("activations", gib(t.activations_bytes)),
        *t.assumptions,
        ("step compute / communication",
         f"{t.step_compute_s:.2f} s / {t.step_comm_s:.2f} s" if t.step_compute_s is not None else "—"),
        ("tokens/s", f"{t.tokens_per_s:,.0f}" if t.tokens_per_s else "—"),
    ), lines=(t.basis + ".",)))
    i = r.interconnect
    secs.append(Section("Interconnect", (("NVLink", i.nvlink.replace("_", " ")),
                                         ("link time share", f"{i.link_time_share:.1%}"),
                                         speedup_row(r),
                                         *i.details), lines=(i.summary,)))
    secs.append(Section("Findings", tuple((f.code, f.severity, f.message) for f in r.findings)))
    return secs


def speedup_row(r: Report) -> tuple[str, str]:
    """NVLink against PCIe, said of the rig as it is: a rig with bridges keeps what it would lose without them."""
    label = "NVLink over PCIe (bridges in this rig)" if r.rig.nvlink else "speedup with NVLink"
    return (label, f"{r.interconnect.nvlink_speedup:.2f}×")


def tight_words(r: Report) -> str:
    """The answer when it fits with less free than the runtime's fit margin, and the margin that decides it."""
    d = r.tight_device
    return f"tight: {gib(d.free_bytes)} free on {d.device}, under the {gib(r.fit_margin_bytes)} fit margin (FIT005)"


def document(r: Report) -> list[Section]:
    if r.training is not None:
        return training_document(r)
    p = r.placement
    secs = []
    quant_note = ("" if not r.quant_chosen else " (chosen: best that fits)" if r.fits else " (chosen)" if r.runs
                  else " (no quant runs)")
    secs.append(Section("Answer", (
        ("fits in GPU memory", tight_words(r) if r.tight else "yes" if r.fits else "no"),
        ("runs", "yes" if r.runs else "no"),
        ("placement", words_of(p.strategy).words + (f" ({p.gpu_layers}/{r.model.layers} layers on GPU)"
                                                                    if p.strategy == "cpu_offload" else "")),
        ("quantization", r.quant.id + quant_note),
        ("model from", r.model_source),
        ("runtime / split", f"{r.runtime.name} / {r.split}"),
        ("context", f"{r.context_tokens:,} tokens, {r.options.kv_type} KV"
                    + (f", {_streams(r)}" if _streams(r) else "")),
        max_context_words(r, "largest context that fits", " tokens"),
    )))
    rows = []
    for d in p.devices:
        rows.append((d.device, d.name, gib(d.weights_bytes), gib(d.kv_cache_bytes), gib(d.overhead_bytes),
                     gib(d.total_bytes), gib(d.capacity_bytes), str(d.layers)))
    if p.host.total_bytes:
        rows.append(("cpu", "system RAM", gib(p.host.weights_bytes), gib(p.host.kv_cache_bytes), "—",
                     gib(p.host.total_bytes), gib(p.host.capacity_bytes), str(r.model.layers - p.gpu_layers)))
    secs.append(Section("Memory", tuple(rows),
                        header=("device", "name", "weights", "KV cache", "overhead", "total", "usable", "layers")))
    s = r.speed
    speed_rows = [("decode (1 stream, short context)", rate(s.decode_tokens_per_s)),
                  (f"decode at {r.context_tokens:,} context", rate(s.decode_at_ctx_tokens_per_s)),
                  (f"prefill ({r.options.prompt_tokens} tokens)", rate(s.prefill_tokens_per_s))]
    if s.aggregate_decode_tokens_per_s:
        speed_rows.append((f"decode, {_streams(r)}",
                           f"{rate(s.aggregate_decode_tokens_per_s)} total, {rate(s.per_stream_decode_tokens_per_s)} each"))
    cal = getattr(s, "calibration", None)  # advisor/engine/calibration.py: this rig's verify runs
    secs.append(Section("Speed", tuple(speed_rows), lines=(s.basis + ".", s.error_band.text + ".")
                        + ((cal.text + ".",) if cal is not None else ()) if s.decode_tokens_per_s else ()))
    if r.serving is not None and r.serving.starts:
        v = r.serving
        srows = [("KV pool", f"{v.kv_cache_tokens:,} tokens ({gib(v.kv_cache_bytes)} over {len(v.devices)} GPU"
                             f"{'s' if len(v.devices) > 1 else ''}, {v.memory_fraction:g} of each)"),
                 (f"requests of {v.request_tokens:,} tokens at once", f"{v.max_concurrency:.2f}"),
                 ("requested / running / queued", f"{v.requested} / {v.running} / {v.queued}")]
        prompt = v.request_length_tokens - v.output_tokens  # a request mix's mean prompt (--request-mix)
        if r.options.output_tokens is not None or r.options.request_mix:
            mix = f" (mean of {r.options.request_mix})" if r.options.request_mix else ""
            srows.insert(2, (f"request length{mix}", f"{v.request_length_tokens:,} tokens ({prompt:,} "
                                                     f"prompt + {v.output_tokens:,} output)"))
        if v.ttft_s is not None:
            srows.append((f"time to first token ({prompt:,} tokens)",
                          f"{v.ttft_s:.2f} s alone, {v.ttft_all_s:.2f} s for the last of {v.running}"))
        if v.ttft_p50_s is not None and v.requested > 1:
            srows.append((f"median TTFT, {v.requested} clients", f"{v.ttft_p50_s:.2f} s"))
        if v.aggregate_decode_tokens_per_s:
            srows.append((f"decode, {v.running} running", f"{rate(v.aggregate_decode_tokens_per_s)} total, "
                                                          f"{rate(v.per_stream_decode_tokens_per_s)} each"))
        if v.output_tokens_per_s and v.requested > 1:
            srows.append(("output token throughput", f"{rate(v.output_tokens_per_s)} (TTFT included)"))
        secs.append(Section("Serving", tuple(srows), lines=(v.basis + ".",)))
    i = r.interconnect
    secs.append(Section("Interconnect", (("NVLink", i.nvlink.replace("_", " ")),
                                         ("link time share", f"{i.link_time_share:.1%}"),
                                         speedup_row(r),
                                         *i.details), lines=(i.summary,)))
    if r.choices and r.training is None:
        secs.append(choices_section(r))
    if r.launch is not None:
        secs.append(Section("Run it", (), lines=run_it_lines(r)))
    secs.append(Section("Findings", tuple((f.code, f.severity, f.message) for f in r.findings)))
    return secs


def choices_section(r: Report) -> Section:
    """The trade-off table: each viable quantization x KV cache type, the pick marked (*) and why."""
    rows = []
    for c in r.choices:
        loss = "—" if c.quality_loss is None else f"{c.quality_loss:.4f}"
        rows.append(("*" if c.picked else "", c.quant.id, c.kv_type, f"{c.max_context_tokens:,}" if c.max_context_tokens else "—",
                     "—" if c.decode_tokens_per_s is None else f"{c.decode_tokens_per_s:,.1f}",
                     "—" if c.prefill_tokens_per_s is None else f"{c.prefill_tokens_per_s:,.0f}", loss, c.where))
    lines = []
    if r.choice_why:
        lines.append(f"* {r.quant.id} with {r.options.kv_type} KV: {r.choice_why}.")
    if r.policy is not None and r.policy.chosen:
        lines.append(f"policy: {r.policy.text}.")
    lines.append("quality loss: published KL divergence vs 16-bit (Llama 3 8B; rules/quants.toml) plus what the "
                 "KV cache type adds (rules/quality.toml); largest context: fully on the GPUs.")
    return Section("Choices", tuple(rows), header=("", "quant", "KV", "max ctx", "decode", "prefill", "KLD", "where"),
                   lines=tuple(lines))


def run_it_lines(r: Report) -> tuple[str, ...]:
    """The command that realises the answer (and an Ollama Modelfile with its settings)."""
    lc = r.launch
    if lc is None:
        return ()
    if lc.modelfile:
        return ("Modelfile:", *(f"  {line}" for line in lc.modelfile.splitlines()), lc.command)
    if lc.nodes and lc.command:
        from advisor.engine.launch import launch_steps

        steps = [(f"  {k}. machine {n.node} ({n.host}{', serves the model' if n.role == 'head' else ''}):",
                  f"       {c}") for k, (n, c) in enumerate(launch_steps(lc), 1)]
        return (lc.command, f"on {len(lc.nodes)} machines, in this order:", *(x for step in steps for x in step))
    return (lc.command,) if lc.command else (lc.note,)


def _streams(r: Report) -> str:
    """`--concurrency N` as it runs: N streams, or, on a paged runtime whose pool holds fewer requests of the
    context at once, how many run together and how many wait (the engine's serving.running / queued)."""
    n = r.options.concurrency
    if n <= 1:
        return ""
    v = r.serving
    if v is not None and v.starts and v.queued > 0:
        return f"{n} streams requested: {v.running} at once, {v.queued} queue"
    return f"{n} streams"


def use_color(stream=None) -> bool:
    stream = stream or sys.stdout
    return stream.isatty() and "NO_COLOR" not in os.environ


def render_text(r: Report, color: bool = False, width: int | None = None) -> str:
    """The report for a terminal; with `width`, every line wrapped to it (tables wrap their text columns,
    the command is continued with a backslash)."""
    verdict = _verdict(headline(r))
    head = headline(r)[: -len(verdict)] + verdict.replace(" ", "\0") if verdict else headline(r)
    out = [line.replace("\0", " ") for line in _wrapped([head], width)] + [""]
    titles = []
    for sec in document(r):
        titles.append(len(out))
        out.append(sec.title)
        if sec.header:
            out += _table([sec.header, *sec.rows], width)
        elif sec.title == "Findings":
            out += _wrapped([f"  {code} {sev:<7}  {msg}" for code, sev, msg in sec.rows] or ["  none"], width)
        else:
            w = max((len(k) for k, *_ in sec.rows), default=0)
            out += _wrapped([f"  {k:<{w}}  {v}" for k, v in sec.rows], width)
        out += _section_lines(r, sec, width)
        out.append("")
    if color:
        out = _colored(out, titles, verdict)
    return "\n".join(out).rstrip() + "\n"


_TONE = {"FITS": "32", "RUNS WITH OFFLOAD": "33", "RUNS ON THE CPU": "33", "DOES NOT RUN": "31", "DOES NOT FIT": "31"}


def _verdict(head: str) -> str:
    return next((word for word in _TONE if head.endswith(word)), "")


def _colored(out: list[str], titles: list[int], verdict: str) -> list[str]:
    """Section titles in bold, the verdict (the end of the headline's last line) in its colour."""
    out = [f"\x1b[1m{line}\x1b[0m" if i in titles else line for i, line in enumerate(out)]
    last = out.index("") - 1
    if verdict and out[last].endswith(verdict):
        out[last] = out[last][: -len(verdict)] + f"\x1b[1;{_TONE[verdict]}m{verdict}\x1b[0m"
    return out


def _wrapped(lines: list[str], width: int | None) -> list[str]:
    return lines if width is None else [w for line in lines for w in wrap_line(line, width)]


def _section_lines(r: Report, sec: Section, width: int | None) -> list[str]:
    """A section's notes, two spaces in; the launch commands (each machine's too) continued with a backslash
    rather than cut, at their own indent."""
    commands = _commands(r) if sec.title == "Run it" else set()
    out = []
    for line in sec.lines:
        if width is not None and line.strip() in commands:
            out += shell_lines(line.strip(), width, 2 + len(line) - len(line.lstrip()))
        else:
            out += _wrapped([f"  {line}"], width)
    return out


def _commands(r: Report) -> set[str]:
    lc = r.launch
    if lc is None:
        return set()
    from advisor.engine.launch import launch_steps

    return {lc.command, *(c for _, c in launch_steps(lc))} - {""}


def _table(rows: list[tuple[str, ...]], width: int | None = None) -> list[str]:
    return table_lines(rows, tuple(i >= 2 for i in range(len(rows[0]))), width)


def render_markdown(r: Report) -> str:
    out = [f"## {headline(r)}", ""]
    for sec in document(r):
        out.append(f"### {sec.title}")
        out.append("")
        header = sec.header or (("code", "severity", "message") if sec.title == "Findings" else ("", ""))
        rows = sec.rows
        if sec.title == "Run it":
            out += ["```", *sec.lines, "```", ""]
            continue
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * len(header))
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        out += [""] + [f"{line}" for line in sec.lines]
        out.append("")
    return "\n".join(out).rstrip() + "\n"
