"""Regenerate tests/data/llamacpp_oracle.json: what llama.cpp itself allocates, per setting.

    ORACLE_PY=/path/to/venv/bin/python python bench/llamacpp_oracle.py [--write]

`ORACLE_PY` is a Python with ../shared/tools/llamacpp-oracle's wheel (llama-cpp-python, CPU backend),
`gguf` and `numpy` installed (see that folder's README). For each architecture family the oracle can
write (llama dense, llama MoE, qwen3, qwen3moe, gemma3 with sliding-window layers, deepseek2 with
MLA) it writes a zero-weight GGUF of real per-layer shapes, reads it with the advisor's own GGUF
reader (the model the engine sees), and asks llama.cpp for its model, KV, compute and output buffers
over a grid of context x flash attention x KV type x n_ubatch x slots (n_seq_max, unified or not).

tests/test_llamacpp_oracle.py holds the engine to the result: weights and KV exact, compute buffers
within 3%. Without --write it prints the rows and changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORACLE = ROOT.parent / "shared" / "tools" / "llamacpp-oracle"
OUT = ROOT / "tests" / "data" / "llamacpp_oracle.json"

ARCHS = ["llama", "qwen3", "gemma3", "qwen3moe", "deepseek2"]
CTXS = [4096, 32768, 131072]
KV = [("f16", "f16"), ("q8_0", "q8_0"), ("q4_0", "q4_0")]
UBATCH = [512, 2048]
SLOTS = [(1, False), (4, False), (4, True)]


def _oracle_py() -> str:
    py = os.environ.get("ORACLE_PY")
    if not py:
        raise SystemExit("set ORACLE_PY to a Python with the oracle's wheel, gguf and numpy (see the docstring)")
    return py


def probe(py: str, path: Path, cfg: dict) -> dict:
    r = subprocess.run([py, str(ORACLE / "probe.py"), str(path), json.dumps(cfg)], capture_output=True, text=True,
                       timeout=120, check=False)
    if r.returncode != 0 and not r.stdout.strip():
        raise SystemExit(f"probe failed for {path.name} {cfg}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def versions(py: str) -> dict:
    code = ("import llama_cpp, importlib.metadata as m, pathlib;"
            "lib = pathlib.Path(llama_cpp.__file__).parent / 'lib';"
            "print(llama_cpp.__version__, sorted(p.name for p in lib.glob('lib*.so.*.*.*')))")
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, check=True).stdout.split(" ", 1)
    return {"llama_cpp_python": out[0], "libraries": out[1].strip(), "backend": "CPU"}


def spec_dict(path: Path) -> tuple[dict, int]:
    from advisor.modelfile import read_model

    lm = read_model(str(path))
    spec = {k: v for k, v in asdict(lm.spec).items() if k not in ("sources", "aliases", "notes")}
    return spec, lm.layout.total_bytes


def main(argv: list[str]) -> int:
    py = _oracle_py()
    folder = Path(tempfile.mkdtemp(prefix="advisor-oracle-"))
    env = dict(os.environ, ORACLE_MODELS=str(folder))
    subprocess.run([py, str(ORACLE / "gen.py"), *ARCHS], env=env, check=True, capture_output=True)
    sys.path.insert(0, str(ROOT))
    models = {}
    rows = []
    for arch in ARCHS:
        path = folder / f"{arch}.gguf"
        spec, file_bytes = spec_dict(path)
        loaded = probe(py, path, {"n_ctx": 4096, "fa": "auto", "load_mode": 0})  # real load: the model buffer
        models[arch] = {"spec": spec, "file_tensor_bytes": file_bytes,
                        "model_buffer_mib": loaded["model_mib"], "fa_auto_cpu": loaded["fa_resolved"]}
        print(arch, "model buffer", loaded["model_mib"], "MiB; advisor reads", round(file_bytes / 2**20, 2), "MiB",
              file=sys.stderr)
        for ctx in CTXS:
            for fa in ("on", "off"):
                for tk, tv in KV:
                    if fa == "off" and tv != "f16":
                        continue  # llama.cpp refuses a quantized V cache without flash attention
                    for ub in UBATCH:
                        for n_seq, unified in SLOTS:
                            cfg = {"n_ctx": ctx, "fa": fa, "type_k": tk, "type_v": tv, "n_ubatch": ub,
                                   "n_batch": max(ub, 2048), "n_seq_max": n_seq, "kv_unified": unified,
                                   "swa_full": False, "no_alloc": True, "load_mode": 0}
                            r = probe(py, path, cfg)
                            if "error" in r:
                                raise SystemExit(f"{arch} {cfg}: {r['error']}")
                            kv = sum(_mib(line) for line in r["kv_sizes"])
                            cells = [_cells(line) for line in r["kv_sizes"]]
                            rows.append({"arch": arch, **{k: cfg[k] for k in ("n_ctx", "fa", "type_k", "type_v",
                                                                            "n_ubatch", "n_seq_max", "kv_unified")},
                                         "kv_mib": kv, "kv_cells": cells, "compute_mib": r["compute_mib"],
                                         "output_mib": r["output_mib"]})
                            print(json.dumps(rows[-1]), file=sys.stderr)
    fixture = {"generated_by": "bench/llamacpp_oracle.py", "oracle": "../shared/tools/llamacpp-oracle (gen.py, probe.py)",
               "llama_cpp": versions(py), "models": models, "rows": rows}
    if "--write" in argv:
        OUT.write_text(json.dumps(fixture, indent=1) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}: {len(rows)} rows", file=sys.stderr)
    return 0


def _mib(line: str) -> float:
    return float(line.split("=", 1)[1].split("MiB", 1)[0])


def _cells(line: str) -> list[int]:
    """(cells, layers) of one KV cache line: `size = 64.00 MiB (8192 cells, 1 layers, 1/1 seqs)`."""
    inner = line.split("(", 1)[1]
    parts = [p.strip() for p in inner.split(",")]
    return [int(parts[0].split()[0]), int(parts[1].split()[0])]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
