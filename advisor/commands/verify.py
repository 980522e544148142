"""`advisor verify MODEL`: run the user's own benchmark (or read one run elsewhere) and hold the answer to it.

predicted against measured for decode, prefill and each device's memory, and whether the fit verdict held;
each comparison is stored (advisor/measure/store.py) and later answers on the same rig carry the calibration
fitted from them (advisor/engine/calibration.py). `--import FILE` reads results instead of running anything;
`--export` writes the stored runs in the project's measurement format.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from advisor.commands.output import EXIT_NO, EXIT_YES, emit, emit_json, fmt_of, say
from advisor.errors import AdvisorError, one_line
from advisor.record import Record, record

MAX_IMPORT_BYTES = 16 * 2**20
"""A benchmark output or log larger than this is not one."""
GIB = 2**30


@record
class Row(Record):
    """One comparison: a speed test or a device's memory, predicted against measured."""

    what: str
    predicted: float | None
    measured: float | None
    unit: str
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return round(self.measured / self.predicted, 3) if self.predicted and self.measured is not None else None


@record
class Verdict(Record):
    predicted_fits: bool
    """The answer's verdict: fully in GPU memory (a paged server: its pool starts; a CPU-only rig: it runs)."""
    measured: str
    """What the run showed, in words."""
    held: bool | None
    """None: the run does not say."""


def cmd_verify(args: argparse.Namespace) -> int:
    from advisor.catalog.load import load_catalog

    if args.export is not None and args.model is None and args.import_file is None:
        return _export_only(args)
    catalog = load_catalog()
    if args.import_file is not None:
        measured, source = _imported(args), str(args.import_file)
        rig, model, base = _inputs(args, catalog, measured)
    else:
        rig, model, base = _inputs(args, catalog, None)
        measured, source = _run_here(args, catalog, rig, model, base)
    report, rows, runs = _compare(catalog, (rig, model, base), measured, source)
    verdict = _verdict(report, measured)
    stored = None
    if runs and not args.no_save:
        from advisor.measure.store import append_runs

        stored = append_runs(runs)
    exported = None
    if args.export is not None:
        from advisor.measure.store import export_rows

        exported = export_rows(runs)
        if args.export != "-":
            _write_export(args, exported)
            exported = None
    _emit(args, report, measured, (rows, verdict, stored, runs), exported)
    return EXIT_NO if verdict.held is False else EXIT_YES


# -- inputs -------------------------------------------------------------------------------------------------

def _imported(args: argparse.Namespace):
    from advisor.files import read_limited
    from advisor.measure.parse import FORMATS, parse_output

    raw = read_limited(args.import_file, MAX_IMPORT_BYTES, "a benchmark result", f"give {FORMATS}")
    if b"\0" in raw[:65536]:
        raise AdvisorError(f"{one_line(str(args.import_file), 300)}: a binary file, not a benchmark result",
                           f"give {FORMATS}")
    return parse_output(raw.decode("utf-8", "replace"), one_line(str(args.import_file), 300))


def _rig_given(args: argparse.Namespace) -> bool:
    return bool(args.gpu or args.rig or args.nvlink or args.pcie or args.ram or getattr(args, "ram_bw", None)
                or getattr(args, "cpu", None))


def _rig_of(args: argparse.Namespace, catalog, measured):
    """The rig the results ran on: the one given (--gpu/--rig), else the GPUs the file names, else the CPU it
    names for a CPU run, else this machine (as `check` does)."""
    from advisor.commands.args import rig_from_args

    if _rig_given(args) or measured is None:
        return rig_from_args(args, catalog)
    if measured.gpus:
        from advisor.probe.build import match_gpu
        from advisor.probe.flags import rig_from_flags

        ids = [match_gpu(catalog, name) for name in measured.gpus]
        if None in ids:
            unknown = measured.gpus[ids.index(None)]
            raise AdvisorError(f"{measured.kind}: its GPU {unknown!r} is not in the catalog",
                               "say which rig it ran on with --gpu ID or --rig FILE")
        return rig_from_flags(catalog, ids)
    if measured.backend.upper() in ("CPU", "BLAS") and measured.cpu:
        from advisor.probe.flags import rig_from_flags

        return replace(rig_from_flags(catalog, []), cpu=measured.cpu)
    return rig_from_args(args, catalog)


def _model_of(args: argparse.Namespace, catalog, measured):
    """MODEL as check reads it; for results run elsewhere, the model file they name when it is here."""
    import os

    from advisor.commands.args import resolve_model, wants_mmproj

    ref = args.model
    if ref is None and measured is not None and measured.model_file and os.path.isfile(measured.model_file):
        ref = measured.model_file
    if ref is None:
        said = f" (the results say {measured.model_type!r})" if measured is not None and measured.model_type else ""
        raise AdvisorError(f"advisor verify: name the MODEL the results are for{said}",
                           "advisor verify MODEL --import FILE, MODEL as for check (catalog id, .gguf file, ollama:NAME)")
    return resolve_model(catalog, ref, mmproj=wants_mmproj(args))


def _inputs(args: argparse.Namespace, catalog, measured):
    """(rig, model, Options) for the predictions: check's options, with what the results state filling in
    what the command line leaves open (runtime, quantization, flash attention, KV type, context)."""
    from advisor.commands.args import command_inputs, options_from

    rig = _rig_of(args, catalog, measured)
    if args.cmd:
        model, options = command_inputs(catalog, args, rig)
    else:
        model, options = _model_of(args, catalog, measured), options_from(args)
    if measured is None:
        return rig, model, options
    changes: dict = {}
    if args.runtime.lower() == "llama.cpp" and measured.runtime != "llama.cpp":
        changes["runtime"] = measured.runtime  # Ollama timings are Ollama's, a vLLM log vLLM's
    if options.quant is None and getattr(model, "layout", None) is None:
        from advisor.measure.parse import quant_of

        changes["quant"] = quant_of(measured.model_type)
        if changes["quant"] is None:  # a comparison is with the quantization that ran, never one chosen for it
            raise AdvisorError(f"{measured.kind}: the results do not say the quantization",
                               "give the one that ran with --quant (e.g. --quant Q4_K_M, --quant awq)")
    if options.flash_attn == "auto" and measured.flash_attn in ("on", "off") and not args.cmd:
        changes["flash_attn"] = measured.flash_attn
    if args.kv_cache is None and measured.type_k and not args.cmd:
        changes["kv_type"], changes["kv_fixed"] = measured.type_k.lower(), True
    return rig, model, replace(options, **changes)


# -- running the benchmark here -------------------------------------------------------------------------------

def _run_here(args: argparse.Namespace, catalog, rig, model, options):
    """Run the benchmark the answer's runtime has (its launch rules' benchmark program on PATH, the local
    Ollama, or `vllm bench serve` against --base-url), bounded by --timeout; what it measured."""
    from advisor.engine.check import evaluate
    from advisor.measure import run as runner
    from advisor.measure.parse import parse_output

    # the placement llama-bench's own context allows (n_prompt + n_gen), unless --ctx says otherwise
    report = evaluate(catalog, rig, model, replace(options, ctx=options.ctx or options.prompt_tokens + GEN_TOKENS))
    if report.launch is None or not report.runs:
        raise AdvisorError(f"{report.model.name} does not run on this rig as asked: nothing to measure",
                           "see `advisor check` for why")
    style = catalog.rules.launch.launcher[report.launch.launcher].style
    if args.base_url:
        argv, what = _vllm_bench_argv(args, report), "vllm bench serve"
        out = runner.run_program(argv, args.timeout, what)
    elif style == "modelfile":
        name = args.served_model or getattr(model, "ollama", "") or (args.model or "").removeprefix("ollama:")
        runs = [parse_output(runner.ollama_generate(name, options.prompt_tokens, GEN_TOKENS, report.context_tokens,
                                                    args.timeout), "Ollama's answer") for _ in range(args.repetitions)]
        return _averaged(runs), f"Ollama /api/generate x{args.repetitions}"
    else:
        argv, what = _bench_argv(args, catalog, report)
        with runner.PeakMemory() as peak:
            out = runner.run_program(argv, args.timeout, what)
        measured = parse_output(out, f"{what} output")
        return _with_peaks(measured, peak.taken()), " ".join(argv)
    return parse_output(out, f"{what} output"), what


def _averaged(runs: list):
    """Repeated requests as one result: each test's rate the mean over the repetitions (as llama-bench's avg_ts)."""
    from advisor.measure.results import Test

    by: dict[str, list] = {}
    for m in runs:
        for t in m.tests:
            by.setdefault(t.test, []).append(t)
    tests = tuple(Test(k, round(sum(t.n_prompt for t in ts) / len(ts)), round(sum(t.n_gen for t in ts) / len(ts)),
                       round(sum(t.tokens_per_s for t in ts) / len(ts), 2)) for k, ts in by.items())
    return replace(runs[0], tests=tests)


GEN_TOKENS = 128
"""Tokens decoded per test: llama-bench's default `-n 128` (tools/llama-bench/README.md)."""


def _bench_argv(args: argparse.Namespace, catalog, report) -> tuple[list[str], str]:
    """The answer's own launch line, said as its runtime's benchmark program (the launcher of rules/launch.toml
    that states n_prompt and n_gen): the same offload, split, cache and flash attention flags."""
    import shlex
    import shutil

    from advisor.engine.launch import launchers_for, parse_command, render

    rules = catalog.rules.launch
    bench = next((lid for lid in launchers_for(rules, report.runtime.id)
                  if {"n_prompt", "n_gen"} <= set(rules.launcher[lid].emit)), None)
    if bench is None:
        raise AdvisorError(f"{report.runtime.name} has no benchmark program the advisor runs",
                           "run your benchmark and give its output with --import FILE")
    if not getattr(report.launch, "command", "") or report.model_source == "catalog":
        raise AdvisorError(f"{rules.launcher[bench].program} needs the model's file: give its path (.gguf) as MODEL",
                           "or run the benchmark elsewhere and give its output with --import FILE")
    program = shutil.which(rules.launcher[bench].program)
    if program is None:
        raise AdvisorError(f"{rules.launcher[bench].program} is not on PATH",
                           "install llama.cpp (its llama-bench), or give results run elsewhere with --import FILE")
    values = dict(parse_command(rules, report.launch.command, runtime=report.runtime.id).settings)
    values.update(n_prompt=str(report.options.prompt_tokens), n_gen=str(GEN_TOKENS))
    words = shlex.split(render(rules, bench, values).command)  # our own rendering of our own values
    return [program, *words[1:], "-r", str(args.repetitions), "-o", "json"], rules.launcher[bench].program


def _vllm_bench_argv(args: argparse.Namespace, report) -> list[str]:
    """`vllm bench serve` against the server at --base-url: one request at a time, random prompts of the
    answer's prompt length, GEN_TOKENS out (vllm/benchmarks/serve.py options)."""
    import shutil

    program = shutil.which("vllm")
    if program is None:
        raise AdvisorError("vllm is not on PATH", "run `vllm bench serve` where vLLM is installed and --import its output")
    model = args.served_model or report.model.id
    return [program, "bench", "serve", "--base-url", args.base_url, "--model", model, "--dataset-name", "random",
            "--random-input-len", str(report.options.prompt_tokens), "--random-output-len", str(GEN_TOKENS),
            "--num-prompts", str(args.repetitions), "--max-concurrency", "1", "--ignore-eos"]


def _with_peaks(measured, taken: dict[int, int]):
    from advisor.measure.results import DeviceMemory

    if not taken:
        return measured
    return replace(measured, memory=tuple(DeviceMemory(f"gpu{i}", nvml_bytes=b) for i, b in sorted(taken.items())),
                   notes=measured.notes + ("memory: each GPU's peak use above idle, read through NVML while it ran",))


# -- the comparison -----------------------------------------------------------------------------------------------

def _predict(catalog, inputs, test):
    """The plain model's Report for one test: its prompt, and a context as long as the test's."""
    from advisor.engine.check import evaluate

    rig, model, base = inputs
    ctx = base.ctx or max(test.depth + test.n_prompt + test.n_gen, 1)
    opts = replace(base, ctx=ctx, prompt_tokens=test.n_prompt if test.test == "pp" else base.prompt_tokens)
    return evaluate(catalog, rig, model, opts)


def _compare(catalog, inputs, measured, source: str):
    """The main Report (the asked options), the rows, and the runs to store for the calibration."""
    from advisor.engine.check import evaluate

    rig, model, base = inputs
    # the verdict and the memory are the run's: at the context it allocated (the longest test's for a benchmark)
    longest = max((t.depth + t.n_prompt + t.n_gen for t in measured.tests), default=None)
    report = evaluate(catalog, rig, model, replace(base, ctx=base.ctx or measured.n_ctx or longest))
    rows, runs = [], []
    for t in measured.tests:
        if t.test == "pp" and t.depth:
            rows.append(Row(t.label, None, t.tokens_per_s, "tok/s", "prefill after a filled context: not modelled"))
            continue
        r = _predict(catalog, inputs, t)
        s = r.speed
        predicted = s.prefill_tokens_per_s if t.test == "pp" else (s.decode_at_ctx_tokens_per_s if t.depth
                                                                  else s.decode_tokens_per_s)
        rows.append(Row(t.label, predicted, t.tokens_per_s, "tok/s"))
        if predicted and r.runtime.id == measured.runtime:
            runs.append(_run_record(r, measured, t, predicted, source))
    rows += _memory_rows(report, measured)
    return report, rows, runs


def _memory_rows(report, measured) -> list[Row]:
    p = report.placement
    devices = {d.device: d for d in p.devices} | {"cpu": p.host}
    rows = []
    for m in measured.memory:
        d = devices.get(m.device)
        if d is None:
            rows.append(Row(f"{m.device} memory", None, m.total_bytes / GIB, "GiB", "the answer places nothing there"))
            continue
        if m.nvml_bytes:
            rows.append(Row(f"{m.device} in use (NVML)", d.total_bytes / GIB, m.nvml_bytes / GIB, "GiB"))
            continue
        for what, pred, got in (("weights", d.weights_bytes, m.weights_bytes), ("KV cache", d.kv_cache_bytes,
                                m.kv_cache_bytes), ("compute buffers", d.overhead_bytes, m.compute_bytes)):
            if got:
                rows.append(Row(f"{m.device} {what}", pred / GIB, got / GIB, "GiB",
                                "overhead: compute buffers plus the CUDA context the log does not print"
                                if what == "compute buffers" else ""))
    if measured.kv_cache_tokens is not None and report.serving is not None:
        rows.append(Row("KV pool", report.serving.kv_cache_tokens, measured.kv_cache_tokens, "tokens"))
    return rows


def _verdict(report, measured) -> Verdict:
    """Did the fit verdict hold? A run that failed for memory against one predicted to fit; a run with every
    layer on the GPUs against one predicted not to (a paged server: whether its pool starts); a run the
    results say less of, against whether the answer runs at all."""
    fits = report.serving.starts if report.serving is not None else report.fits
    if measured.started is False:
        return Verdict(fits, f"did not start ({measured.failure or 'out of memory'})", not fits)
    layers = report.model.layers
    off = measured.offloaded
    full = (off is not None and off[0] == off[1]) or \
        (measured.kind == "llama-bench" and measured.backend.upper() not in ("CPU", "BLAS", "")
         and (measured.n_gpu_layers is None or measured.n_gpu_layers < 0 or measured.n_gpu_layers > layers))
    if measured.started and measured.runtime == "vllm":
        return Verdict(fits, "started", fits)
    if measured.started and full:
        return Verdict(fits, "ran with every layer on the GPU(s)", fits)
    if measured.started and report.rig.is_cpu_only:
        return Verdict(report.runs, "ran on the CPU", report.runs)
    if measured.started:
        return Verdict(fits, "ran (whether every layer was on the GPUs is not stated; held means it runs, "
                             "as the answer says)", report.runs)
    said = f"offloaded {off[0]}/{off[1]} layers, " if off else ""
    return Verdict(fits, f"{said}not stated whether it went on to run", None)


def _run_record(report, measured, test, predicted: float, source: str) -> dict:
    """One stored run: the key the calibration groups by, the plain prediction, the measurement and the rig."""
    import datetime

    from advisor import __version__
    from advisor.engine.calibration import key_of

    device, backend, placement = key_of(report)
    rig = report.rig
    return {
        "when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "advisor": __version__, "kind": measured.kind, "source": one_line(source, 300), "model": report.model.id,
        "quant": report.quant.id, "runtime": report.runtime.id, "device": device, "backend": backend,
        "placement": placement, "test": test.test, "n_prompt": test.n_prompt, "n_gen": test.n_gen,
        "depth": test.depth, "flash_attn": measured.flash_attn, "predicted": float(predicted),
        "measured": float(test.tokens_per_s), "gpus": [g.name or g.spec.name for g in rig.gpus],
        "gpu_count": len(rig.gpus), "split": report.split if len(rig.gpus) > 1 else "none", "cpu": rig.cpu or measured.cpu,
        "ram_gib": round(rig.ram_bytes / GIB, 1), "ram_bandwidth_gb_s": float(rig.ram_bandwidth_gb_s),
        "ram_bandwidth_basis": rig.ram_bandwidth_basis, "build": measured.build,
        "params_b": round(report.model.params_total / 1e9, 2),
        "model_size_gib": round(report.placement.layout.total_bytes / GIB, 2) if report.placement.layout else 0.0,
    }


# -- output ----------------------------------------------------------------------------------------------------

def _emit(args: argparse.Namespace, report, measured, parts, exported: str | None) -> None:
    """The comparison; with a bare --export, this run's rows in the measurement format after it."""
    if fmt_of(args) == "json":
        out = _json(report, measured, parts)
        if exported is not None:
            out["export_csv"] = exported
        emit_json(out)
        return
    emit(_text(report, measured, parts) + (f"\n\n{exported}" if exported is not None else ""))


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "—"
    return f"{v:,.0f} {unit}" if unit == "tokens" else f"{v:.2f} {unit}" if unit == "GiB" else f"{v:,.1f} {unit}"


def _text(report, measured, parts) -> str:
    rows, verdict, stored, runs = parts
    where = ", ".join(g.name or g.spec.name for g in report.rig.gpus) or f"CPU ({report.rig.cpu or 'not read'})"
    lines = [f"advisor verify: {report.model.name} {report.quant.id} on {where} ({report.runtime.id}) — "
             f"{measured.kind}" + (f", build {measured.build}" if measured.build else ""), ""]
    width = max([len(r.what) for r in rows] + [10])
    lines.append(f"{'':{width}}  {'predicted':>14}  {'measured':>14}  measured/predicted")
    for r in rows:
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else "—"
        lines.append(f"{r.what:{width}}  {_fmt(r.predicted, r.unit):>14}  {_fmt(r.measured, r.unit):>14}  {ratio}"
                     + (f"  ({r.note})" if r.note else ""))
    held = {True: "held", False: "did NOT hold", None: "not known"}[verdict.held]
    yes, no = (("runs on the CPU", "does not run") if report.rig.is_cpu_only else
               ("fits in GPU memory", "does not fit in GPU memory") if report.serving is None else
               ("starts (its KV pool holds a request)", "does not start (its KV pool holds no request)"))
    lines += ["", f"fit verdict {held}: predicted it {yes if verdict.predicted_fits else no}; the run {verdict.measured}"]
    lines += [f"note: {n}" for n in measured.notes]
    lines.append(report.speed.error_band.text + ".")
    if stored is not None:
        path, count = stored
        lines.append(f"stored {len(runs)} run(s) in {path} ({count} in all): later answers on this rig carry the "
                     f"calibration (--no-calibration shows the plain model)")
    elif not runs:
        lines.append("nothing stored: no speed test of this rig and runtime to calibrate with")
    return "\n".join(lines)


def _json(report, measured, parts) -> dict:
    rows, verdict, stored, runs = parts
    from advisor.report.jsonout import rig_json

    return {
        "model": report.model.id, "quant": report.quant.id, "runtime": report.runtime.id, "rig": rig_json(report),
        "measured_by": {"kind": measured.kind, "build": measured.build or None, "backend": measured.backend or None,
                        "gpus": list(measured.gpus), "notes": list(measured.notes)},
        "comparisons": [{"what": r.what, "predicted": r.predicted, "measured": r.measured, "unit": r.unit,
                         "ratio": r.ratio, "note": r.note or None} for r in rows],
        "fit": {"predicted_fits": verdict.predicted_fits, "measured": verdict.measured, "held": verdict.held},
        "stored": {"path": str(stored[0]), "runs": len(runs), "total": stored[1]} if stored else None,
    }


# -- export -----------------------------------------------------------------------------------------------------

def _export_only(args: argparse.Namespace) -> int:
    """`advisor verify --export [FILE]` alone: every stored run in the measurement format."""
    from advisor.measure.store import export_rows, load_runs, store_path

    runs = load_runs()
    if not runs:
        raise AdvisorError(f"no stored runs in {store_path()}", "run `advisor verify MODEL` (or --import FILE) first")
    if args.export == "-":
        emit(export_rows(runs))
    else:
        _write_export(args, export_rows(runs))
    return EXIT_YES


def _write_export(args: argparse.Namespace, text: str) -> None:
    """The rows written to a file, atomically (never over the --import input)."""
    import os

    from advisor.files import write_atomic

    target = args.export
    if args.import_file is not None and os.path.exists(target) and os.path.samefile(target, args.import_file):
        raise AdvisorError(f"--export {one_line(target, 300)}: that is the --import input; not overwriting it",
                           "export to another file")
    write_atomic(target, text)
    say(f"advisor verify: wrote {text.count(chr(10)) - 1} row(s) to {one_line(target, 300)}")
