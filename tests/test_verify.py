"""`advisor verify`: real recorded benchmark outputs (tests/data/verify/SOURCES.md) read, replayed by a
stand-in `llama-bench` / `vllm` on PATH and by a local Ollama-shaped server; predicted against measured;
the store, the calibration a later `check` carries, --export; bad benchmarks as one line and exit 2."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.measure.parse import parse_output, quant_of

DATA = Path(__file__).parent / "data" / "verify"
SPEED_CSV = Path(__file__).parent / "data" / "speed_measurements.csv"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _json(capsys, *argv: str) -> dict:
    code, out, err = _run(capsys, *argv, "--json")
    assert code in (0, 1), err
    return json.loads(out)


# -- every recorded format reads as its source printed it ------------------------------------------------------

PARSED = [  # file, kind, runtime, {test label: tokens/s}, GPU names
    ("llama_bench_rtx4080.json", "llama-bench", "llama.cpp", {"pp512": 7100.002165, "tg128": 118.881588},
     ("NVIDIA GeForce RTX 4080",)),
    ("llama_bench_rtx3090ti.jsonl", "llama-bench", "llama.cpp", {"pp512": 2410.974041, "tg128": 130.965708},
     ("NVIDIA GeForce RTX 3090 Ti",)),
    ("llama_bench_rtx3090ti.csv", "llama-bench", "llama.cpp", {"pp512": 2413.341687, "tg128": 132.052051},
     ("NVIDIA GeForce RTX 3090 Ti",)),
    ("llama_bench_rx580_vulkan.md", "llama-bench", "llama.cpp", {"pp512": 346.76, "pp4096": 255.79, "tg128": 36.23},
     ("AMD Radeon RX 580 Series",)),
    ("llama_bench_depth.md", "llama-bench", "llama.cpp",
     {"pp512": 7340.20, "tg128": 120.60, "pp512 @ d512": 6425.91, "tg128 @ d512": 116.71}, ()),
    ("llama_server_timings_12237.log", "llama-server log", "llama.cpp", {"pp971": 111.17, "tg19": 17.66}, ()),
    ("ollama_verbose_12237.txt", "Ollama timings", "ollama", {"pp1119": 512.13, "tg9": 10.63}, ()),
    # 26 tokens in 325,953,000 ns; 290 tokens in 4,709,213,000 ns
    ("ollama_api_generate.json", "Ollama API", "ollama", {"pp26": 79.77, "tg290": 61.58}, ()),
    ("vllm_bench_serve_18566.txt", "vllm bench serve", "vllm", {}, ()),
]


@pytest.mark.parametrize(("name", "kind", "runtime", "tests", "gpus"), PARSED, ids=[p[0] for p in PARSED])
def test_recorded_outputs_read_as_printed(name, kind, runtime, tests, gpus):
    m = parse_output((DATA / name).read_text(), name)
    assert (m.kind, m.runtime, m.gpus) == (kind, runtime, gpus)
    assert {t.label: t.tokens_per_s for t in m.tests} == pytest.approx(tests, abs=0.006)


def test_combined_pp_tg_rows_are_not_taken_for_either():
    """The RX 580 table's `pp4096+tg128` row mixes prefill and decode in one rate: not a test to compare."""
    m = parse_output((DATA / "llama_bench_rx580_vulkan.md").read_text(), "md")
    assert [t.label for t in m.tests] == ["pp512", "pp4096", "tg128"]
    assert m.backend == "Vulkan" and m.build == "e598697d (4696)"


def test_device_lines_before_the_json_array_are_skipped():
    """llama.cpp#15554: the Vulkan backend prints its device lines on stdout before `-o json`'s array."""
    lines = ("ggml_vulkan: Found 1 Vulkan devices:\nggml_vulkan: 0 = AMD Radeon RX 580 Series (RADV POLARIS10) (radv) | "
             "uma: 0 | fp16: 0 | bf16: 0 | warp size: 64 | shared memory: 65536 | int dot: 0 | matrix cores: none\n")
    m = parse_output(lines + (DATA / "llama_bench_rtx4080.json").read_text(), "stdout")
    assert [t.label for t in m.tests] == ["pp512", "tg128"]


def test_llama_log_buffers_per_device():
    """llama.cpp#9881: CUDA0 4155.99 MiB of weights and 1024.00 MiB of KV, CPU 281.81 MiB, 33/33 layers."""
    m = parse_output((DATA / "llama_server_load_9881.log").read_text(), "log")
    gpu, cpu = m.memory
    assert (gpu.device, round(gpu.weights_bytes / 2**20, 2), gpu.kv_cache_bytes / 2**20) == ("gpu0", 4155.99, 1024.0)
    assert (cpu.device, round(cpu.weights_bytes / 2**20, 2)) == ("cpu", 281.81)
    assert m.offloaded == (33, 33) and m.flash_attn == "off"


def test_vllm_log_that_did_not_start():
    m = parse_output((DATA / "vllm_startup_13882.log").read_text(), "log")
    assert m.started is False and m.kv_cache_tokens == 0
    assert m.memory[0].weights_bytes == int(5.2032 * 2**30)
    assert "0.00x" in m.failure


@pytest.mark.parametrize(("model_type", "quant"), [
    ("qwen2 7B Q4_K - Medium", "Q4_K_M"), ("llama 7B mostly Q4_0", "Q4_0"), ("granite 3B IQ4_XS - 4.25 bpw", "IQ4_XS"),
    ("llama 13B Q6_K", "Q6_K"), ("gpt-oss 20B MXFP4 MoE", "MXFP4"), ("llama 3B Q2_K - Medium", "Q2_K"),
    ("llama ?B Q9_Z", None)])
def test_llama_cpp_type_names(model_type, quant):
    assert quant_of(model_type) == quant


# -- bad input: one line, exit 2 -----------------------------------------------------------------------------

@pytest.mark.parametrize(("content", "message"), [
    ("hello, this is not a benchmark\n", "not a benchmark result or log"),
    ((DATA / "llama_bench_rtx4080_mismatched.csv").read_text(), "has 41 values for 42 columns"),
    ('[{"avg_ts": "fast", "n_prompt": 512, "n_gen": 0}]', "avg_ts is not a number"),
    ('[{"avg_ts": 1e400, "n_prompt": 512, "n_gen": 0}]', "out of range"),
    ("[" * 100_000 + '"avg_ts"', "broken JSON"),
])
def test_garbage_is_one_line_and_exit_2(capsys, tmp_path, content, message):
    f = tmp_path / "results.txt"
    f.write_text(content)
    code, out, err = _run(capsys, "verify", "qwen2.5-7b", "--gpu", "rtx-4080", "--import", str(f))
    assert code == 2 and out == "" and message in err and err.count("\n") == 1


def test_unknown_gpu_in_the_results_asks_for_the_rig(capsys):
    code, _, err = _run(capsys, "verify", "llama-3.2-3b", "--import", str(DATA / "llama_bench_rx580_vulkan.md"))
    assert code == 2 and "RX 580" in err and "--gpu" in err


def test_results_without_a_quantization_ask_for_it(capsys):
    code, _, err = _run(capsys, "verify", "qwen2.5-7b", "--runtime", "vllm", "--gpu", "rtx-4060",
                        "--import", str(DATA / "vllm_startup_13882.log"))
    assert code == 2 and "--quant" in err


# -- the comparison, the store, the calibration ---------------------------------------------------------------

def test_import_then_check_carries_the_calibration(capsys):
    """The RTX 4080 llama-bench JSON: the plain model's decode moves to the measured 118.9 tok/s after the import,
    and --no-calibration still gives the plain model."""
    plain = _json(capsys, "check", "qwen2.5-7b", "--gpu", "rtx-4080", "--quant", "Q4_K_M")
    assert "calibration" not in plain["speed"]
    got = _json(capsys, "verify", "qwen2.5-7b", "--import", str(DATA / "llama_bench_rtx4080.json"))
    rows = {r["what"]: r for r in got["comparisons"]}
    assert rows["tg128"]["predicted"] == plain["speed"]["decode_tokens_per_s"]
    assert rows["tg128"]["measured"] == pytest.approx(118.881588)
    assert got["fit"] == {"predicted_fits": True, "measured": "ran with every layer on the GPU(s)", "held": True}
    assert got["stored"]["runs"] == 2
    after = _json(capsys, "check", "qwen2.5-7b", "--gpu", "rtx-4080", "--quant", "Q4_K_M")
    cal = after["speed"]["calibration"]
    assert (cal["device"], cal["backend"], cal["placement"], cal["runs"]) == ("rtx-4080", "llama.cpp/cuda", "one GPU", 1)
    assert cal["decode_factor"] == pytest.approx(118.881588 / plain["speed"]["decode_tokens_per_s"], rel=1e-3)
    assert after["speed"]["decode_tokens_per_s"] == pytest.approx(118.9, abs=0.11)
    assert after["speed"]["prefill_tokens_per_s"] == pytest.approx(7100.0, abs=1)
    assert cal["plain_decode_tokens_per_s"] == plain["speed"]["decode_tokens_per_s"]
    again = _json(capsys, "check", "qwen2.5-7b", "--gpu", "rtx-4080", "--quant", "Q4_K_M", "--no-calibration")
    assert again["speed"] == plain["speed"]
    code, text, _ = _run(capsys, "check", "qwen2.5-7b", "--gpu", "rtx-4080", "--quant", "Q4_K_M")
    assert "calibrated on this rig from 1 run" in text and "error on public measurements" in text


def test_calibration_stays_on_its_own_rig(capsys):
    _json(capsys, "verify", "qwen2.5-7b", "--import", str(DATA / "llama_bench_rtx4080.json"))
    for other in (["--gpu", "rtx-4090"], ["--gpu", "2xrtx-4080"], ["--gpu", "rtx-4080", "--runtime", "vllm", "--quant", "awq"]):
        assert "calibration" not in _json(capsys, "check", "qwen2.5-7b", *other)["speed"], other


def test_two_runs_average_as_ratios(capsys):
    """The geometric mean of measured/predicted: the 3090 Ti's JSONL and CSV of the same README, two runs."""
    for name in ("llama_bench_rtx3090ti.jsonl", "llama_bench_rtx3090ti.csv"):
        got = _json(capsys, "verify", "llama-2-7b", "--import", str(DATA / name))
    pred = {r["what"]: r["predicted"] for r in got["comparisons"]}
    cal = _json(capsys, "check", "llama-2-7b", "--gpu", "rtx-3090-ti", "--quant", "Q4_0")["speed"]["calibration"]
    assert cal["decode_runs"] == 2
    assert cal["decode_factor"] == pytest.approx((130.965708 * 132.052051) ** 0.5 / pred["tg128"], rel=1e-3)


def test_memory_per_device_from_a_llama_server_log(capsys):
    got = _json(capsys, "verify", "llama-3.1-8b", "--quant", "Q4_0", "--ctx", "8192", "--gpu", "rtx-4090",
                "--import", str(DATA / "llama_server_load_9881.log"))
    rows = {r["what"]: r for r in got["comparisons"]}
    assert rows["gpu0 KV cache"]["ratio"] == 1.0  # 8192 cells x 32 layers x 2 x 1024 x 2 bytes: 1024 MiB exactly
    assert rows["gpu0 weights"]["ratio"] == pytest.approx(1.0, abs=0.01)
    assert got["stored"] is None  # a load log has no speed test: nothing to calibrate with


def test_vllm_verdict_that_did_not_hold_or_held(capsys):
    """vLLM#13882: Qwen2.5-7B AWQ on an 8 GiB RTX 4060 at 0.70 did not start; the advisor says it does not."""
    got = _json(capsys, "verify", "qwen2.5-7b", "--runtime", "vllm", "--quant", "awq", "--gpu", "rtx-4060",
                "--gpu-memory-utilization", "0.7", "--ctx", "4096", "--import", str(DATA / "vllm_startup_13882.log"))
    assert got["fit"]["predicted_fits"] is False and got["fit"]["held"] is True
    rows = {r["what"]: r for r in got["comparisons"]}
    assert rows["gpu0 weights"]["ratio"] == pytest.approx(1.0, abs=0.02)


def test_loaded_server_numbers_are_not_compared(capsys):
    got = _json(capsys, "verify", "llama-3.1-8b", "--runtime", "vllm", "--gpu", "h100-sxm", "--quant", "BF16",
                "--import", str(DATA / "vllm_bench_serve_18566.txt"))
    assert got["comparisons"] == [] and got["stored"] is None
    assert "not single-stream" in got["measured_by"]["notes"][0]


def test_broken_store_check_warns_and_answers_plain(capsys, _isolated_user_dir):
    (_isolated_user_dir / "measurements.json").write_text("{not json")
    code, out, err = _run(capsys, "check", "qwen2.5-7b", "--gpu", "rtx-4080", "--json")
    assert code == 0 and "calibration" not in json.loads(out)["speed"] and "warning" in err
    code, _, err = _run(capsys, "verify", "qwen2.5-7b", "--import", str(DATA / "llama_bench_rtx4080.json"))
    assert code == 2 and "not a measurement store" in err


def test_export_rows_have_the_measurement_format(capsys, tmp_path):
    _json(capsys, "verify", "qwen2.5-7b", "--import", str(DATA / "llama_bench_rtx4080.json"))
    code, out, _ = _run(capsys, "verify", "--export")
    rows = list(csv.DictReader(io.StringIO(out)))
    with SPEED_CSV.open(newline="") as fh:
        assert list(rows[0]) == next(csv.reader(fh))  # the project's columns, in its order
    tg = next(r for r in rows if r["test"] == "tg")
    assert (tg["runtime"], tg["backend"], tg["gpu_count"], tg["model"], tg["quant"], tg["n_gen"]) == \
        ("llama.cpp", "CUDA", "1", "qwen2.5-7b", "Q4_K_M", "128")
    assert float(tg["tokens_per_s"]) == pytest.approx(118.881588) and "rig:" in tg["notes"]
    target = tmp_path / "rows.csv"
    assert main(["verify", "--export", str(target)]) == 0 and target.read_text() == out.rstrip("\n") + "\n"


def test_export_never_overwrites_the_import(capsys, tmp_path):
    f = tmp_path / "r.json"
    f.write_text((DATA / "llama_bench_rtx4080.json").read_text())
    code, _, err = _run(capsys, "verify", "qwen2.5-7b", "--import", str(f), "--export", str(f))
    assert code == 2 and "not overwriting" in err and json.loads(f.read_text())


# -- running the benchmark here: stand-ins on PATH --------------------------------------------------------------

def _stand_in(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _replay(bin_dir: Path, name: str, recorded: Path) -> None:
    """A `name` that records its argv and prints a recorded output (or fails, or hangs: see the tests)."""
    _stand_in(bin_dir, name, f"import json, sys\nopen({str(bin_dir / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
                             f"sys.stdout.write(open({str(recorded)!r}).read())\n")


@pytest.fixture
def gguf_file(tmp_path):
    """A small Llama-shaped GGUF (zero weights) named with characters a shell would act on."""
    pytest.importorskip("gguf")
    from tests.test_verify_e2e import write_gguf

    path = tmp_path / "my model $(touch pwned) Q8_0.gguf"
    write_gguf(path, random=False)
    return path


def test_llama_bench_runs_with_the_answers_flags_as_an_argument_list(capsys, tmp_path, monkeypatch, gguf_file):
    bin_dir = tmp_path / "bin"
    _replay(bin_dir, "llama-bench", DATA / "llama_bench_rtx4080.json")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    got = _json(capsys, "verify", str(gguf_file), "--gpu", "rtx-4080", "--prompt-tokens", "256", "--no-save")
    argv = json.loads((bin_dir / "argv.json").read_text())
    assert argv[argv.index("-m") + 1] == str(gguf_file)  # one word, as given: no shell saw it
    assert not (tmp_path / "pwned").exists()
    assert argv[argv.index("-p") + 1] == "256" and argv[argv.index("-n") + 1] == "128"
    assert argv[argv.index("-ngl") + 1] == "5"  # 4 layers + the output layer, as the launch line says
    assert argv[-4:] == ["-r", "3", "-o", "json"]
    assert {r["what"] for r in got["comparisons"]} == {"pp512", "tg128"}


@pytest.mark.parametrize(("body", "timeout", "message"), [
    ("import sys\nsys.stderr.write('main: error: failed to load model\\n')\nsys.exit(1)\n", "60",
     "llama-bench failed (exit 1): main: error: failed to load model"),
    ("import time\ntime.sleep(60)\n", "1", "did not finish within 1 s"),
    ("print('Segmentation fault? no: just words')\n", "60", "not a benchmark result"),
])
def test_a_benchmark_that_fails_hangs_or_prints_garbage(capsys, tmp_path, monkeypatch, gguf_file, body, timeout, message):
    bin_dir = tmp_path / "bin"
    _stand_in(bin_dir, "llama-bench", body)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    code, out, err = _run(capsys, "verify", str(gguf_file), "--gpu", "rtx-4080", "--timeout", timeout)
    assert code == 2 and out == "" and message in err
    assert [ln for ln in err.splitlines() if ln.startswith("advisor:")] == [err.splitlines()[-1]]


def test_no_llama_bench_on_path(capsys, tmp_path, monkeypatch, gguf_file):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, _, err = _run(capsys, "verify", str(gguf_file), "--gpu", "rtx-4080")
    assert code == 2 and "llama-bench is not on PATH" in err and "--import" in err


def test_a_catalog_model_has_no_file_to_run(capsys):
    code, _, err = _run(capsys, "verify", "qwen2.5-7b", "--gpu", "rtx-4080")
    assert code == 2 and "needs the model's file" in err


def test_vllm_bench_against_a_running_server(capsys, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    _replay(bin_dir, "vllm", DATA / "vllm_bench_serve_18566.txt")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    got = _json(capsys, "verify", "llama-3.1-8b", "--runtime", "vllm", "--gpu", "h100-sxm", "--quant", "BF16",
                "--base-url", "http://127.0.0.1:8000", "--served-model", "meta-llama/Llama-3.1-8B-Instruct")
    argv = json.loads((bin_dir / "argv.json").read_text())
    assert argv[:4] == ["bench", "serve", "--base-url", "http://127.0.0.1:8000"]
    assert argv[argv.index("--max-concurrency") + 1] == "1"
    assert argv[argv.index("--model") + 1] == "meta-llama/Llama-3.1-8B-Instruct"
    assert got["measured_by"]["kind"] == "vllm bench serve"


class _Ollama(BaseHTTPRequestHandler):
    body = b""
    seen: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        n = int(self.headers.get("Content-Length", 0))
        type(self).seen.append((self.path, json.loads(self.rfile.read(n))))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, *args):
        pass


def test_ollama_generate_on_the_local_server(capsys, monkeypatch):
    """A local server answering /api/generate with Ollama's documented response (docs/api.md)."""
    _Ollama.body, _Ollama.seen = (DATA / "ollama_api_generate.json").read_bytes(), []
    server = HTTPServer(("127.0.0.1", 0), _Ollama)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{server.server_port}")
        got = _json(capsys, "verify", "llama-3.2-3b", "--runtime", "ollama", "--quant", "Q4_K_M", "--gpu", "rtx-4090",
                    "--served-model", "llama3.2", "--no-save")
    finally:
        server.shutdown()
    path, request = _Ollama.seen[0]
    assert path == "/api/generate" and request["model"] == "llama3.2" and request["stream"] is False
    assert len(_Ollama.seen) == 3 and len({r["prompt"] for _, r in _Ollama.seen}) == 3  # no prompt-cache hit
    assert request["options"]["num_predict"] == 128
    assert {r["what"]: r["measured"] for r in got["comparisons"]} == pytest.approx({"pp26": 79.77, "tg290": 61.58})


def test_ollama_elsewhere_is_refused(capsys, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "http://10.1.2.3:11434")
    code, _, err = _run(capsys, "verify", "llama-3.2-3b", "--runtime", "ollama", "--quant", "Q4_K_M", "--gpu", "rtx-4090")
    assert code == 2 and "not this machine" in err


# -- detect --measure -------------------------------------------------------------------------------------------

def test_copy_test_is_bounded_and_says_how(monkeypatch):
    import time

    from advisor.probe.system import measure_ram_bandwidth

    t0 = time.monotonic()
    gb_s, basis = measure_ram_bandwidth(mib=32, seconds=0.2, threads=2)
    assert gb_s > 0.1 and time.monotonic() - t0 < 30
    assert "measured here" in basis and "32 MiB" in basis and "2 thread" in basis


def test_detect_measure_saves_the_bandwidth_with_its_basis(capsys, tmp_path, monkeypatch):
    from advisor.commands import detect as detect_cmd
    from advisor.probe.types import Detection, SystemInfo

    monkeypatch.setattr("advisor.probe.detect", lambda *a, **k: Detection(
        source="none", gpus=(), system=SystemInfo(ram_bytes=16 * 2**30, cpu="Test CPU", ram_bandwidth_basis="unknown")))
    monkeypatch.setattr("advisor.probe.system.measure_ram_bandwidth", lambda: (12.5, "measured here by a copy test"))
    assert detect_cmd  # the module the command runs
    rig = tmp_path / "rig.toml"
    code, out, _ = _run(capsys, "detect", "--measure", "--save", str(rig))
    assert code == 0 and "12.5 GB/s (measured here by a copy test)" in " ".join(out.split())  # text wraps at 80
    assert "ram_bandwidth_gb_s = 12.5  # measured here by a copy test" in rig.read_text()


def test_the_verdict_is_at_the_context_the_run_allocated(capsys):
    """llama-bench allocates n_prompt + n_gen cells: Llama 3.1 8B Q8_0 on 16 GB fits there, not at its full
    131,072 (16 GiB of f16 KV alone), so the verdict for the recorded run is judged at 512 tokens."""
    assert _json(capsys, "check", "llama-3.1-8b", "--gpu", "rtx-4080", "--quant", "Q8_0", "--ctx", "131072")["fits"] is False
    got = _json(capsys, "verify", "llama-3.1-8b", "--quant", "Q8_0", "--import", str(DATA / "llama_bench_rtx4080.json"),
                "--no-save")
    assert got["fit"]["predicted_fits"] is True and got["fit"]["held"] is True


def test_calibration_fit_is_a_geometric_mean_per_key_and_test():
    from advisor.engine.calibration import Run, fit

    key = ("rtx-3090", "llama.cpp/cuda", "one GPU")
    cal = fit([Run(*key, "tg", 100.0, 200.0), Run(*key, "tg", 100.0, 50.0), Run(*key, "pp", 1000.0, 1500.0),
               Run("rtx-4090", "llama.cpp/cuda", "one GPU", "tg", 100.0, 90.0), Run(*key, "pg", 1.0, 2.0)], "store")
    f = cal.find(key)
    assert (f.decode, f.decode_runs, f.prefill, f.prefill_runs, f.runs) == (1.0, 2, 1.5, 1, 2)
    assert cal.find(("rtx-4090", "llama.cpp/cuda", "one GPU")).prefill is None
    assert cal.find(("rtx-3090", "vllm/cuda", "one GPU")) is None
