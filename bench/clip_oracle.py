"""Regenerate tests/data/clip_oracle.json: the compute buffer llama.cpp's clip reserves for an mmproj.

    ORACLE_PY=/path/to/venv/bin/python python bench/clip_oracle.py [--write]

`ORACLE_PY` is a Python with ../shared/tools/llamacpp-oracle's wheel (llama-cpp-python 0.3.36 with
libmtmd, CPU backend), `gguf` and `numpy`. For each vision tower below (the shapes real mmproj files
have: Gemma 3's SigLIP, Qwen3-VL's two towers) it writes a zero-weight mmproj GGUF of those shapes
(sparse: tensor data are file holes) and a one-layer text model whose width is the projection size,
calls `mtmd_init_from_file` with warm-up on, and records the warm-up image and the compute buffer
llama.cpp logs, with flash attention on and off. tests/test_vision.py holds
advisor.engine.vision.clip_compute_bytes to them. Without --write it prints the rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORACLE = ROOT.parent / "shared" / "tools" / "llamacpp-oracle"
OUT = ROOT / "tests" / "data" / "clip_oracle.json"

# (label, projector, n_embd, n_ff, n_head, n_layer, image_size, patch_size, projection_dim): the mmproj
# keys of google/gemma-3-*-it (SigLIP 27 x 1152, ff 4304, 896 px / 14) and Qwen/Qwen3-VL-8B and -4B
# (27 x 1152 / ff 4304 and 24 x 1024 / ff 4096, patch 16, merge 2), as their config.json vision_config says.
TOWERS = [
    ("gemma-3-4b", "gemma3", 1152, 4304, 16, 27, 896, 14, 2560),
    ("gemma-3-27b", "gemma3", 1152, 4304, 16, 27, 896, 14, 5376),
    ("qwen3-vl-8b", "qwen3vl_merger", 1152, 4304, 16, 27, 768, 16, 4096),
    ("qwen3-vl-4b", "qwen3vl_merger", 1024, 4096, 16, 24, 768, 16, 2560),
]

PROBE = r'''
import ctypes, json, re, sys
sys.path.insert(0, sys.argv[3])
import gen, llama_cpp
from gguf import GGMLQuantizationType as T
from llama_cpp import mtmd_cpp

LOG = []
@llama_cpp.llama_log_callback
def _cb(level, text, user_data):
    LOG.append(text.decode("utf-8", "replace"))
llama_cpp.llama_log_set(_cb, ctypes.c_void_p(0))
mtmd_cpp.mtmd_log_set(_cb, ctypes.c_void_p(0))

def mmproj(path, proj, n_embd, n_ff, n_head, n_layer, image, patch, proj_dim):
    s = gen.Sparse(path, "clip"); w = s.w; F, H = T.F32, T.F16
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.projector_type", proj)
    for k, v in (("image_size", image), ("patch_size", patch), ("embedding_length", n_embd),
                 ("feed_forward_length", n_ff), ("projection_dim", proj_dim), ("attention.head_count", n_head),
                 ("block_count", n_layer)):
        w.add_uint32("clip.vision." + k, v)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5]); w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    w.add_bool("clip.use_gelu", True)
    qwen = proj == "qwen3vl_merger"
    if qwen:
        w.add_uint32("clip.vision.spatial_merge_size", 2)
    s.t("v.patch_embd.weight", [patch, patch, 3, n_embd], H)
    if qwen:
        s.t("v.patch_embd.weight.1", [patch, patch, 3, n_embd], H)
    s.t("v.patch_embd.bias", [n_embd], F)
    s.t("v.position_embd.weight", [n_embd, 2304 if qwen else (image // patch) ** 2], F)
    for i in range(n_layer):
        p = f"v.blk.{i}."
        if qwen:
            s.t(p + "attn_qkv.weight", [n_embd, 3 * n_embd], H); s.t(p + "attn_qkv.bias", [3 * n_embd], F)
        else:
            for t in ("attn_q", "attn_k", "attn_v"):
                s.t(p + t + ".weight", [n_embd, n_embd], H); s.t(p + t + ".bias", [n_embd], F)
        s.t(p + "attn_out.weight", [n_embd, n_embd], H); s.t(p + "attn_out.bias", [n_embd], F)
        for t in ("ln1", "ln2"):
            s.t(p + t + ".weight", [n_embd], F); s.t(p + t + ".bias", [n_embd], F)
        s.t(p + "ffn_up.weight", [n_embd, n_ff], H); s.t(p + "ffn_up.bias", [n_ff], F)
        s.t(p + "ffn_down.weight", [n_ff, n_embd], H); s.t(p + "ffn_down.bias", [n_embd], F)
    s.t("v.post_ln.weight", [n_embd], F); s.t("v.post_ln.bias", [n_embd], F)
    if qwen:
        m = 4 * n_embd
        s.t("mm.0.weight", [m, m], H); s.t("mm.0.bias", [m], F)
        s.t("mm.2.weight", [m, proj_dim], H); s.t("mm.2.bias", [proj_dim], F)
    else:
        s.t("mm.input_projection.weight", [proj_dim, n_embd], H); s.t("mm.soft_emb_norm.weight", [n_embd], F)
    s.close()

def text_model(path, n_embd):
    s = gen.Sparse(path, "llama")
    gen.common(s, "llama", n_vocab=256, n_embd=n_embd, n_layer=1, n_head=8, n_head_kv=8, head_dim=n_embd // 8,
               n_ff=256, ctx=4096, rope_base=10000.0, eps=1e-5)
    s.w.add_rope_dimension_count(n_embd // 8)
    for name, ne in (("token_embd.weight", [n_embd, 256]), ("output_norm.weight", [n_embd]), ("output.weight", [n_embd, 256]),
                     ("blk.0.attn_norm.weight", [n_embd]), ("blk.0.attn_q.weight", [n_embd, n_embd]),
                     ("blk.0.attn_k.weight", [n_embd, n_embd]), ("blk.0.attn_v.weight", [n_embd, n_embd]),
                     ("blk.0.attn_output.weight", [n_embd, n_embd]), ("blk.0.ffn_norm.weight", [n_embd]),
                     ("blk.0.ffn_gate.weight", [n_embd, 256]), ("blk.0.ffn_up.weight", [n_embd, 256]),
                     ("blk.0.ffn_down.weight", [256, n_embd])):
        s.t(name, ne)
    s.close()

cfg, fa, _, folder = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
mp, tp = folder + "/mmproj.gguf", folder + "/text.gguf"
mmproj(mp, *cfg); text_model(tp, cfg[-1])
llama_cpp.llama_backend_init()
mpar = llama_cpp.llama_model_default_params(); mpar.n_gpu_layers = 0
model = llama_cpp.llama_model_load_from_file(tp.encode(), mpar)
cp = mtmd_cpp.mtmd_context_params_default()
cp.use_gpu = False; cp.n_threads = 2; cp.warmup = True; cp.flash_attn_type = {"on": 1, "off": 0}[fa]
LOG.clear()
ctx = mtmd_cpp.mtmd_init_from_file(mp.encode(), model, cp)
text = "".join(LOG)
print(json.dumps({"ok": bool(ctx), "compute_mib": [float(x) for x in re.findall(r"compute buffer size = +([\d.]+) MiB", text)],
                  "warmup": re.findall(r"warmup with image size = (\d+) x \d+", text)[:1],
                  "flash_attention": re.findall(r"flash attention is (\w+)", text)[:1]}))
'''


def main() -> None:
    py = os.environ.get("ORACLE_PY")
    if not py:
        raise SystemExit("set ORACLE_PY to a Python with the oracle's wheel, gguf and numpy (see the docstring)")
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for label, *cfg in TOWERS:
            for fa in ("on", "off"):
                out = subprocess.run([py, "-c", PROBE, json.dumps(cfg), fa, str(ORACLE), folder],
                                     capture_output=True, text=True, timeout=900)
                got = json.loads(out.stdout.strip().splitlines()[-1])
                if not got["ok"] or not got["compute_mib"]:
                    raise SystemExit(f"{label} fa={fa}: llama.cpp did not initialise the mmproj: {out.stderr[-2000:]}")
                proj, e, ff, heads, layers, image, patch, pdim = cfg
                rows.append({"tower": label, "projector": proj, "n_embd": e, "n_ff": ff, "n_head": heads,
                             "n_layer": layers, "image_size": image, "patch_size": patch, "projection_dim": pdim,
                             "flash_attention": fa, "warmup_side_px": int(got["warmup"][0]),
                             "compute_mib": got["compute_mib"][0]})
                print(json.dumps(rows[-1]))
    if "--write" in sys.argv:
        OUT.write_text(json.dumps({"llama.cpp": "llama-cpp-python 0.3.36 (CPU backend), ../shared/tools/llamacpp-oracle",
                                   "script": "bench/clip_oracle.py", "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
