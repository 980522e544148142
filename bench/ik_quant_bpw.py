"""Bits per weight of ik_llama.cpp's own quant types, as rules/quants.toml records them.

Two figures per type, both arithmetic on ggml's tables (advisor/modelfile/ggml_types.py, copied from
ikawrakow/ik_llama.cpp @ 8337e4cd ggml.h / ggml.c type_traits / ggml-common.h):
- block: bytes per block x 8 / weights per block (the type's own bpw, before its per-row scale);
- whole file on Llama 3.1 8B (the rules/quants.toml basis): every attention and FFN matrix in the type,
  with its per-row metadata on the real row counts, token_embd in the type too, output.weight in the
  type ik_llama.cpp's llama-quantize picks for that file type when the model has its own output
  tensor (src/llama-quantize.cpp llama_tensor_get_type: Q5_K for the 1-3 bit types, IQ6_K stays IQ6_K,
  Q6_K otherwise), norms F32. ik's default mixes also raise attn_v and some ffn_down tensors by a type,
  so the real default file is slightly larger: this is the floor of that mix, and what a pure
  (`--pure`) quantization with a Q5_K/Q6_K output spends.

    python bench/ik_quant_bpw.py        # prints the table
"""

from __future__ import annotations

from advisor.modelfile.ggml_types import GGML_TYPES

BY_NAME = {t.name: t for t in GGML_TYPES.values()}

# Llama 3.1 8B (config.json: hidden 4096, 32 layers, 32 heads / 8 KV heads of 128, FFN 14336, vocab 128256)
HIDDEN, LAYERS, KV, FFN, VOCAB = 4096, 32, 1024, 14336, 128256
PARAMS = 8_030_261_248
# (rows, row length) of each matrix of one layer, ggml order: ne0 = input dimension
LAYER_MATS = [(HIDDEN, HIDDEN), (KV, HIDDEN), (KV, HIDDEN), (HIDDEN, HIDDEN),  # q, k, v, o
              (FFN, HIDDEN), (FFN, HIDDEN), (HIDDEN, FFN)]                       # gate, up, down
NORMS = HIDDEN * (2 * LAYERS + 1)

# output.weight type for each file type (src/llama-quantize.cpp, has_output = true, ne0 % 256 == 0)
OUTPUT = {"IQ2_K": "Q5_K", "IQ3_K": "Q5_K", "IQ2_KS": "Q5_K", "IQ3_KS": "Q5_K", "IQ2_KL": "Q5_K",
          "IQ1_KT": "Q5_K", "IQ2_KT": "Q5_K", "IQ3_KT": "Q5_K",
          "IQ4_K": "Q6_K", "IQ4_KS": "Q6_K", "IQ4_KSS": "Q6_K", "IQ5_K": "Q6_K", "IQ5_KS": "Q6_K",
          "IQ4_KT": "Q6_K", "IQ6_K": "IQ6_K"}
# token_embd.weight: the file type's own type, except IQ3_KT -> IQ3_S (same function)
EMBED = {"IQ3_KT": "IQ3_S"}


def tensor_bytes(type_name: str, rows: int, ne0: int) -> int:
    t = BY_NAME[type_name]
    return rows * t.row_bytes(ne0)


def block_bpw(type_name: str) -> float:
    t = BY_NAME[type_name]
    return t.type_size * 8 / t.block


def file_bpw(type_name: str) -> float:
    total = sum(tensor_bytes(type_name, r, c) for r, c in LAYER_MATS) * LAYERS
    total += tensor_bytes(EMBED.get(type_name, type_name), VOCAB, HIDDEN)
    total += tensor_bytes(OUTPUT[type_name], VOCAB, HIDDEN)
    total += NORMS * 4
    return total * 8 / PARAMS


def main() -> None:
    for name in OUTPUT:
        t = BY_NAME[name]
        print(f"{name:8} block {block_bpw(name):.4f} bpw (+{t.row_meta} B/row)  "
              f"Llama-3.1-8B file {file_bpw(name):.4f} bpw  output {OUTPUT[name]}  embd {EMBED.get(name, name)}")


if __name__ == "__main__":
    main()
