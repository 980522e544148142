"""Benchmark outputs and logs, read into a `Measured`: nothing in them is executed, every number is bounded.

Formats (each as its program prints it; tests/data/verify/ holds a recorded example of each, with its source):
- llama-bench `-o json` (an array, possibly after the backend's device lines on stdout), `-o jsonl`, `-o csv`
  and the default markdown table (tools/llama-bench/llama-bench.cpp printers);
- llama-server / llama-cli logs: device lines, `offloaded N/M layers`, the model/KV/compute buffer lines
  and the `prompt eval time` / `eval time` timing lines (common/log, llama-context.cpp);
- vLLM start-up logs: `Model loading took W GiB` (older: `Loading model weights took W GB`), `GPU KV cache
  size: N tokens`, `# cuda blocks: 0`, `Maximum concurrency for N tokens per request: X` (vllm/v1);
- `vllm bench serve` results (`============ Serving Benchmark Result ============`);
- Ollama: `ollama run --verbose` timings, and an `/api/generate` response (its `*_count` and `*_duration` ns).
"""

from __future__ import annotations

import csv
import io
import json
import re

from advisor.errors import AdvisorError, one_line
from advisor.measure.results import DeviceMemory, Measured, Test

MIB = 2**20
GIB = 2**30
FORMATS = ("llama-bench JSON, JSONL, CSV or markdown; a llama-server or vLLM log; `vllm bench serve` output; "
           "Ollama --verbose timings or an /api/generate response")
MAX_TESTS = 10_000
"""More tests than any sweep prints: a longer file is not a benchmark output."""


def parse_output(text: str, where: str) -> Measured:
    """The benchmark output or log in `text` (from `where`, named in errors); AdvisorError when it is none."""
    for looks, read in _READERS:
        if looks(text):
            got = read(text, where)
            if got.tests or got.memory or got.started is not None or got.kv_cache_tokens is not None:
                return got
    raise AdvisorError(f"{where}: not a benchmark result or log this reads", f"give {FORMATS}")


def _fail(where: str, what: str) -> AdvisorError:
    return AdvisorError(f"{where}: {what}", f"give {FORMATS}")


def _num(value, where: str, what: str, lo: float = 0.0, hi: float = 1e12) -> float:
    """A finite number within [lo, hi] (a value read from a file is checked, never trusted)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise _fail(where, f"{what} is not a number ({one_line(str(value), 40)!r})") from None
    if not lo <= x <= hi:  # also refuses nan and inf
        raise _fail(where, f"{what} = {x:g} is out of range")
    return x


# -- llama-bench: JSON, JSONL, CSV ------------------------------------------------------------------------

def _bench_test(row: dict, where: str) -> Test | None:
    """One llama-bench result object as a test (None: a combined pp+tg test, `-pg`, which mixes both)."""
    n_prompt = int(_num(row.get("n_prompt", 0), where, "n_prompt", hi=1e8))
    n_gen = int(_num(row.get("n_gen", 0), where, "n_gen", hi=1e8))
    depth = int(_num(row.get("n_depth", 0) or 0, where, "n_depth", hi=1e8))
    ts = _num(row.get("avg_ts"), where, "avg_ts", hi=1e9)
    sd = row.get("stddev_ts")
    if n_prompt and n_gen or not (n_prompt or n_gen):
        return None
    return Test("pp" if n_prompt else "tg", n_prompt, n_gen, ts, depth,
                _num(sd, where, "stddev_ts", hi=1e9) if sd not in (None, "") else None)


def _flag(value) -> str:
    """llama-bench's flash_attn: bool (older), 0/1, -1 (auto, 2025 builds) or on/off/auto."""
    text = str(value).strip().lower()
    return {"true": "on", "1": "on", "false": "off", "0": "off", "-1": "auto"}.get(text, text if text in
                                                                                    ("on", "off", "auto") else "")


def _backend(row: dict) -> str:
    """`backends` (2024+) or the older `cuda`/`metal`/`gpu_blas` flags."""
    if row.get("backends"):
        return str(row["backends"])
    for key, name in (("cuda", "CUDA"), ("vulkan", "Vulkan"), ("metal", "Metal"), ("sycl", "SYCL"), ("kompute", "Kompute")):
        if str(row.get(key, "")).lower() in ("true", "1"):
            return name
    return "CPU"


def _from_bench_rows(rows: list, where: str) -> Measured:
    if not rows or len(rows) > MAX_TESTS or not all(isinstance(r, dict) and "avg_ts" in r for r in rows):
        raise _fail(where, "llama-bench output without results (each result has avg_ts)")
    tests = tuple(t for t in (_bench_test(r, where) for r in rows) if t is not None)
    first = rows[0]
    gpu = one_line(str(first.get("gpu_info") or ""), 300)
    ngl = first.get("n_gpu_layers")
    commit, number = first.get("build_commit", ""), first.get("build_number", "")
    build = f"{commit} ({number})" if commit and number else str(commit)
    return Measured(
        kind="llama-bench", runtime="llama.cpp", tests=tests, backend=one_line(_backend(first), 40),
        gpus=tuple(g.strip() for g in gpu.split(",") if g.strip()), cpu=one_line(str(first.get("cpu_info") or ""), 200),
        model_file=one_line(str(first.get("model_filename") or ""), 500),
        model_type=one_line(str(first.get("model_type") or ""), 200),
        n_gpu_layers=int(_num(ngl, where, "n_gpu_layers", lo=-1, hi=1e6)) if ngl not in (None, "") else None,
        flash_attn=_flag(first.get("flash_attn", "")), type_k=one_line(str(first.get("type_k") or ""), 20),
        started=True if tests else None, build=one_line(build, 60))


def _read_json(text: str, where: str) -> Measured:
    """`-o json`: the array from its first line that opens one (backends print device lines first)."""
    m = re.search(r"^\s*\[", text, re.M)
    if m is None:
        raise _fail(where, "no JSON array")
    try:
        rows = json.loads(text[m.start():])
    except (ValueError, RecursionError) as exc:
        raise _fail(where, f"broken JSON ({one_line(str(exc), 80)})") from None
    if not isinstance(rows, list):
        raise _fail(where, "the JSON is not an array of results")
    return _from_bench_rows(rows, where)


def _read_jsonl(text: str, where: str) -> Measured:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("{"):
            try:
                rows.append(json.loads(line))
            except (ValueError, RecursionError):
                raise _fail(where, f"line {n} is not a JSON object") from None
    return _from_bench_rows(rows, where)


def _read_csv(text: str, where: str) -> Measured:
    start = text.find("build_commit")
    reader = csv.DictReader(io.StringIO(text[text.rfind("\n", 0, start) + 1:]))
    rows = []
    for n, row in enumerate(reader, 2):
        if None in row or None in row.values():  # csv's marks for more values, or fewer, than columns
            values = sum(v is not None for k, v in row.items() if k is not None) + len(row.get(None) or ())
            raise _fail(where, f"line {n} has {values} values for {len(reader.fieldnames or ())} columns: "
                               f"the header and the rows disagree")
        rows.append(row)
        if len(rows) > MAX_TESTS:
            raise _fail(where, "more rows than a benchmark prints")
    return _from_bench_rows(rows, where)


# -- llama-bench: the markdown table ----------------------------------------------------------------------

_MD_TEST = re.compile(r"^(pp|tg)\s*(\d+)(?:\s*@\s*d(\d+))?$")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _read_markdown(text: str, where: str) -> Measured:
    """The default `-o md` table: one row per test, `t/s` as `mean ± sd`; device lines above it name the GPUs."""
    lines = text.splitlines()
    head = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("|") and "t/s" in ln and "test" in ln), None)
    if head is None:
        raise _fail(where, "no llama-bench table")
    cols = _cells(lines[head])
    tests, first = [], None
    for ln in lines[head + 2:]:
        if not ln.lstrip().startswith("|"):
            break
        row = dict(zip(cols, _cells(ln)))
        first = first or row
        m = _MD_TEST.match(row.get("test", ""))
        rate = re.match(r"([\d.]+)\s*(?:±\s*([\d.]+))?", row.get("t/s", ""))
        if m and rate:
            n = int(m.group(2))
            pp = m.group(1) == "pp"
            tests.append(Test(m.group(1), n if pp else 0, 0 if pp else n, _num(rate.group(1), where, "t/s", hi=1e9),
                              int(m.group(3) or 0), float(rate.group(2)) if rate.group(2) else None))
        if len(tests) > MAX_TESTS:
            raise _fail(where, "more rows than a benchmark prints")
    first = first or {}
    ngl = first.get("ngl", "")
    build = re.search(r"^build: (\w+) \((\d+)\)", text, re.M)
    return Measured(kind="llama-bench", runtime="llama.cpp", tests=tuple(tests),
                    backend=one_line(first.get("backend", ""), 40), gpus=_device_names(text),
                    model_type=one_line(first.get("model", ""), 200),
                    n_gpu_layers=int(ngl) if re.fullmatch(r"-?\d+", ngl) else None,
                    flash_attn=_flag(first.get("fa", "")), type_k=one_line(first.get("type_k", ""), 20),
                    started=True if tests else None,
                    build=f"{build.group(1)} ({build.group(2)})" if build else "")


def _device_names(text: str) -> tuple[str, ...]:
    """GPU names from ggml's device lines: CUDA (`Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6`),
    Vulkan (`ggml_vulkan: 0 = AMD Radeon RX 580 Series (RADV POLARIS10) (radv) | uma: 0`), llama.cpp's model
    loader (`using device CUDA0 (NVIDIA GeForce RTX 4090) - 23000 MiB free`)."""
    names: dict[str, str] = {}
    for m in re.finditer(r"^\s*Device (\d+): ([^,\n]+),", text, re.M):
        names.setdefault(f"cuda{m.group(1)}", one_line(m.group(2), 200))
    for m in re.finditer(r"^ggml_vulkan: (\d+) = ([^|\n(]+)", text, re.M):
        names.setdefault(f"vulkan{m.group(1)}", one_line(m.group(2), 200).strip())
    for m in re.finditer(r"using device (\w+?)(\d+) \(([^)\n]+)\)", text):
        names.setdefault(f"{m.group(1).lower()}{m.group(2)}", one_line(m.group(3), 200))
    return tuple(names.values())[:64]


# -- llama-server / llama-cli logs ------------------------------------------------------------------------

_BUFFER = re.compile(r"(\w+?)(\d*)\s+(model|KV|compute|output)?\s*buffer size =\s*([\d.]+) MiB")
_TIMING = re.compile(r"(prompt eval|eval) time =\s*([\d.]+) ms /\s*(\d+) (?:tokens|runs)")
_OOM = re.compile(r"^.*(?:out of memory|failed to allocate|unable to allocate|cudaMalloc failed|"
                  r"failed to load model|OutOfMemoryError|No available memory for the cache blocks).*$",
                  re.M | re.I)
_GPU_BUFFERS = ("CUDA", "ROCm", "Vulkan", "MTL", "Metal", "SYCL", "CANN")
"""ggml backend buffer names that are a GPU's memory (the others, CPU / CPU_Mapped / CUDA_Host, are the host's)."""


def _buffers(text: str) -> tuple[DeviceMemory, ...]:
    """Per-device model / KV / compute MiB from the buffer lines (the first load in the log)."""
    per: dict[str, dict[str, float]] = {}
    seen: set[tuple[str, str]] = set()
    for m in _BUFFER.finditer(text):
        name, idx, kind, mib = m.group(1), m.group(2), m.group(3) or "model", float(m.group(4))
        gpu = name in _GPU_BUFFERS and idx != ""
        dev = f"gpu{int(idx)}" if gpu else "cpu"
        if (f"{name}{idx}", kind) in seen:
            break  # a second load (llama-bench per test, a reload): the first one's buffers are the answer
        seen.add((f"{name}{idx}", kind))
        slot = {"model": "weights", "KV": "kv", "compute": "compute", "output": "compute"}[kind]
        per.setdefault(dev, {"weights": 0.0, "kv": 0.0, "compute": 0.0})[slot] += mib
    return tuple(DeviceMemory(d, int(v["weights"] * MIB), int(v["kv"] * MIB), int(v["compute"] * MIB))
                 for d, v in sorted(per.items(), key=lambda kv: (kv[0] == "cpu", kv[0])))


def _timings(text: str, where: str) -> tuple[Test, ...]:
    """The timing lines, summed per kind over the requests in the log (tokens over time: each request weighs
    by its length)."""
    sums = {"prompt eval": [0.0, 0], "eval": [0.0, 0]}
    for m in _TIMING.finditer(text):
        ms, n = _num(m.group(2), where, "timing ms", hi=1e10), int(m.group(3))
        if n > 0 and ms > 0:
            sums[m.group(1)][0] += ms
            sums[m.group(1)][1] += n
    out = []
    (pp_ms, pp_n), (tg_ms, tg_n) = sums["prompt eval"], sums["eval"]
    if pp_n:
        out.append(Test("pp", int(pp_n), 0, round(pp_n / (pp_ms / 1000), 2)))
    if tg_n:
        out.append(Test("tg", 0, int(tg_n), round(tg_n / (tg_ms / 1000), 2)))
    return tuple(out)


def _read_llama_log(text: str, where: str) -> Measured:
    off = re.search(r"offloaded (\d+)/(\d+) layers to GPU", text)
    ftype = re.search(r"(?:file type|model ftype)\s*=\s*(.+)$", text, re.M)
    name = re.search(r"general\.name\s+(?:str\s+)?=\s*(.+)$", text, re.M)
    fa = re.search(r"flash_attn\s*=\s*(\w+)", text)
    oom = _OOM.search(text)
    memory = _buffers(text)
    tests = _timings(text, where)
    loaded = bool(tests) or "compute buffer size" in text or "model loaded" in text
    build = re.search(r"build[:=]\s*(\d+) \((\w+)\)", text)
    ctx = re.search(r"\bn_ctx\s*=\s*(\d+)", text)
    model_type = " ".join(x for x in (one_line(name.group(1), 120) if name and re.search(r"\w", name.group(1)) else "",
                                      one_line(ftype.group(1), 60) if ftype else "") if x)
    return Measured(kind="llama-server log", runtime="llama.cpp", tests=tests, gpus=_device_names(text),
                    model_type=model_type, offloaded=(int(off.group(1)), int(off.group(2))) if off else None,
                    flash_attn=_flag(fa.group(1)) if fa else "", memory=memory,
                    started=False if oom else (True if loaded else None),
                    failure=one_line(oom.group(0).strip(), 300) if oom else "",
                    n_ctx=int(_num(ctx.group(1), where, "n_ctx", 1, 1e8)) if ctx else None,
                    build=f"{build.group(2)} ({build.group(1)})" if build else "")


# -- vLLM -------------------------------------------------------------------------------------------------

def _read_vllm_log(text: str, where: str) -> Measured:
    """A vLLM start-up log: weights, the KV pool, whether it started. vLLM's "GB" in `Loading model weights
    took W GB` (before v0.7) is the same GiB it prints as GiB later (it divides by 2**30 in both)."""
    w = re.search(r"(?:Model loading took|Loading model weights took|model weights take)\s*([\d.]+)\s*Gi?B", text)
    kv = re.search(r"GPU KV cache size:\s*([\d,]+) tokens", text)
    blocks = re.search(r"# (?:cuda|GPU) blocks:\s*(\d+)", text)
    conc = re.search(r"Maximum concurrency for ([\d,]+) tokens per request:\s*([\d.]+)x", text)
    oom = _OOM.search(text)
    kv_tokens = int(kv.group(1).replace(",", "")) if kv else (0 if blocks and blocks.group(1) == "0" else None)
    no_room = kv_tokens == 0 or (conc is not None and float(conc.group(2)) < 1.0)
    started = False if (oom or no_room) else (True if kv_tokens or "Starting vLLM API server" in text else None)
    failure = one_line(oom.group(0).strip(), 300) if oom else (
        f"Maximum concurrency for {conc.group(1)} tokens per request: {conc.group(2)}x" if no_room and conc else "")
    memory = (DeviceMemory("gpu0", weights_bytes=int(_num(w.group(1), where, "weights GiB", hi=1e5) * GIB)),) if w else ()
    version = re.search(r"vLLM (?:API server )?version ([\w.+-]+)|LLM engine \(v([\w.+-]+)\)", text)
    n_ctx = int(_num(conc.group(1).replace(",", ""), where, "tokens per request", 1, 1e8)) if conc else None
    return Measured(kind="vLLM log", runtime="vllm", memory=memory, kv_cache_tokens=kv_tokens, started=started, n_ctx=n_ctx,
                    failure=failure, build=(version.group(1) or version.group(2)) if version else "",
                    notes=("weights are GPU 0's (tensor parallel ranks each hold their share)",) if w else ())


def _metric(text: str, label: str, where: str) -> float | None:
    m = re.search(rf"^\s*{re.escape(label)}:\s*([\d.]+)", text, re.M)
    return _num(m.group(1), where, label, hi=1e12) if m else None


def _read_vllm_bench(text: str, where: str) -> Measured:
    """`vllm bench serve`: with one request at a time, 1000 / mean TPOT is single-stream decode and the mean
    prompt over the mean TTFT its prefill; with more at once the numbers are a server's, not compared here."""
    conc = _metric(text, "Maximum request concurrency", where)
    n = _metric(text, "Successful requests", where)
    tpot, ttft = _metric(text, "Mean TPOT (ms)", where), _metric(text, "Mean TTFT (ms)", where)
    inp, gen = _metric(text, "Total input tokens", where), _metric(text, "Total generated tokens", where)
    tests: list[Test] = []
    if conc == 1 and n and tpot and ttft and inp and gen:
        tests = [Test("pp", int(inp / n), 0, round(inp / n / (ttft / 1000), 2)),
                 Test("tg", 0, int(gen / n), round(1000 / tpot, 2))]
    note = () if tests else (f"{'no' if conc is None else int(conc)} request concurrency limit: a loaded server's "
                             f"numbers, not single-stream speed; not compared (run with --max-concurrency 1)",)
    return Measured(kind="vllm bench serve", runtime="vllm", tests=tuple(tests), started=True,
                    concurrency=int(conc) if conc else None, notes=note)


# -- Ollama -----------------------------------------------------------------------------------------------

def _read_ollama_verbose(text: str, where: str) -> Measured:
    """`ollama run --verbose`: `prompt eval count: N token(s)`, `prompt eval rate: R tokens/s`, `eval ...`."""
    def pair(prefix: str) -> tuple[int, float] | None:
        count = re.search(rf"^{prefix} count:\s*(\d+) token", text, re.M)
        rate = re.search(rf"^{prefix} rate:\s*([\d.]+) tokens/s", text, re.M)
        return (int(count.group(1)), _num(rate.group(1), where, f"{prefix} rate", hi=1e9)) if count and rate else None

    pp, tg = pair("prompt eval"), pair("eval")
    tests = ([Test("pp", pp[0], 0, pp[1])] if pp and pp[0] else []) + ([Test("tg", 0, tg[0], tg[1])] if tg and tg[0] else [])
    return Measured(kind="Ollama timings", runtime="ollama", tests=tuple(tests), started=True if tests else None)


def _read_ollama_api(text: str, where: str) -> Measured:
    """An `/api/generate` response (the last object of a stream): counts, and durations in nanoseconds."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    try:  # a stream is one object a line, the last with the totals; a plain response is one object
        last = json.loads(lines[-1] if len(lines) > 1 and lines[0].startswith('{"') else text)
    except (ValueError, RecursionError):
        raise _fail(where, "broken JSON") from None
    if not isinstance(last, dict):
        raise _fail(where, "not an Ollama response object")
    tests = []
    for test, count, dur in (("pp", "prompt_eval_count", "prompt_eval_duration"), ("tg", "eval_count", "eval_duration")):
        n, ns = last.get(count), last.get(dur)
        if n and ns:
            n, ns = int(_num(n, where, count, hi=1e9)), _num(ns, where, dur, hi=1e16)
            if ns > 0:
                tests.append(Test(test, n if test == "pp" else 0, n if test == "tg" else 0, round(n / (ns / 1e9), 2)))
    return Measured(kind="Ollama API", runtime="ollama", tests=tuple(tests),
                    model_type=one_line(str(last.get("model") or ""), 200), started=True if tests else None)


_READERS = (
    (lambda t: t.lstrip().startswith("{") and '"eval_count"' in t, _read_ollama_api),
    (lambda t: re.search(r"^\s*\[", t, re.M) is not None and '"avg_ts"' in t, _read_json),
    (lambda t: re.search(r'^\s*\{.*"avg_ts"', t, re.M) is not None, _read_jsonl),
    (lambda t: "build_commit" in t and "avg_ts" in t and "," in t, _read_csv),
    (lambda t: re.search(r"^\s*\|.*\btest\b.*t/s", t, re.M) is not None, _read_markdown),
    (lambda t: "Serving Benchmark Result" in t, _read_vllm_bench),
    (lambda t: re.search(r"GPU KV cache size|Model loading took|Loading model weights took|# (?:cuda|GPU) blocks|"
                         r"vLLM API server|LLM engine \(v", t) is not None, _read_vllm_log),
    (lambda t: re.search(r"^eval rate:", t, re.M) is not None, _read_ollama_verbose),
    (lambda t: re.search(r"buffer size =|eval time =|offloaded \d+/\d+ layers", t) is not None, _read_llama_log),
)
"""(does it look like this format, its reader), most specific first."""


FTYPE_NAMES = {
    "all F32": "F32", "F16": "F16", "BF16": "BF16", "Q4_0": "Q4_0", "Q4_1": "Q4_1", "Q5_0": "Q5_0", "Q5_1": "Q5_1",
    "Q8_0": "Q8_0", "MXFP4 MoE": "MXFP4", "Q2_K - Medium": "Q2_K", "Q2_K - Small": "Q2_K_S", "Q3_K - Small": "Q3_K_S",
    "Q3_K - Medium": "Q3_K_M", "Q3_K - Large": "Q3_K_L", "Q4_K - Small": "Q4_K_S", "Q4_K - Medium": "Q4_K_M",
    "Q5_K - Small": "Q5_K_S", "Q5_K - Medium": "Q5_K_M", "Q6_K": "Q6_K", "TQ1_0 - 1.69 bpw ternary": "TQ1_0",
    "TQ2_0 - 2.06 bpw ternary": "TQ2_0", "IQ2_XXS - 2.0625 bpw": "IQ2_XXS", "IQ2_XS - 2.3125 bpw": "IQ2_XS",
    "IQ2_S - 2.5 bpw": "IQ2_S", "IQ2_M - 2.7 bpw": "IQ2_M", "IQ3_XS - 3.3 bpw": "IQ3_XS",
    "IQ3_XXS - 3.0625 bpw": "IQ3_XXS", "IQ1_S - 1.5625 bpw": "IQ1_S", "IQ1_M - 1.75 bpw": "IQ1_M",
    "IQ4_NL - 4.5 bpw": "IQ4_NL", "IQ4_XS - 4.25 bpw": "IQ4_XS", "IQ3_S - 3.4375 bpw": "IQ3_S",
    "IQ3_S mix - 3.66 bpw": "IQ3_M",
}
"""llama.cpp's names of its file types (src/llama-model-loader.cpp, llama_model_ftype_name), as llama-bench's
`model_type` and the loaders' `file type` line end with them (before 2024 with `mostly ` in front), to the
catalog's quantization ids (advisor/modelfile/ggml_types.py FILE_TYPES names the same types by number)."""


def quant_of(model_type: str) -> str | None:
    """The quantization id a llama.cpp model description ends with (`qwen2 7B Q4_K - Medium` -> `Q4_K_M`)."""
    text = re.sub(r"\bmostly ", "", model_type or "").strip()
    for name in sorted(FTYPE_NAMES, key=len, reverse=True):
        if text == name or text.endswith(" " + name):
            return FTYPE_NAMES[name]
    return None
