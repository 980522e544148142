"""ggml tensor types and llama.cpp file types, as tables (no dependency on the `gguf` package).

Block sizes and bytes per block are ggml's (`ggml/src/ggml-common.h`, mirrored by gguf-py's
`GGML_QUANT_SIZES`); file types are llama.cpp's `llama_ftype` (gguf-py `LlamaFileType`). A tensor
of `n` elements of a type with block `b` and `s` bytes per block takes `n / b * s` bytes; the
first dimension must be a whole number of blocks.
"""

from __future__ import annotations

from typing import NamedTuple

QK_K = 256


class GgmlType(NamedTuple):
    name: str
    block: int
    type_size: int
    kernel: str
    """Kernel class for the speed rules (rules/quants.toml `kernel`)."""


GGML_TYPES: dict[int, GgmlType] = {
    0: GgmlType("F32", 1, 4, "f32"),
    1: GgmlType("F16", 1, 2, "f16"),
    2: GgmlType("Q4_0", 32, 2 + 16, "legacy"),
    3: GgmlType("Q4_1", 32, 2 + 2 + 16, "legacy"),
    6: GgmlType("Q5_0", 32, 2 + 4 + 16, "legacy"),
    7: GgmlType("Q5_1", 32, 2 + 2 + 4 + 16, "legacy"),
    8: GgmlType("Q8_0", 32, 2 + 32, "q8"),
    9: GgmlType("Q8_1", 32, 4 + 4 + 32, "q8"),
    10: GgmlType("Q2_K", QK_K, 2 + 2 + QK_K // 16 + QK_K // 4, "kquant"),
    11: GgmlType("Q3_K", QK_K, 2 + QK_K // 4 + QK_K // 8 + 12, "kquant"),
    12: GgmlType("Q4_K", QK_K, 2 + 2 + QK_K // 2 + 12, "kquant"),
    13: GgmlType("Q5_K", QK_K, 2 + 2 + QK_K // 2 + QK_K // 8 + 12, "kquant"),
    14: GgmlType("Q6_K", QK_K, 2 + QK_K // 2 + QK_K // 4 + QK_K // 16, "kquant"),
    15: GgmlType("Q8_K", QK_K, 4 + QK_K + QK_K // 8, "q8"),
    16: GgmlType("IQ2_XXS", QK_K, 2 + QK_K // 4, "iquant"),
    17: GgmlType("IQ2_XS", QK_K, 2 + QK_K // 4 + QK_K // 32, "iquant"),
    18: GgmlType("IQ3_XXS", QK_K, 2 + QK_K // 4 + QK_K // 8, "iquant"),
    19: GgmlType("IQ1_S", QK_K, 2 + QK_K // 8 + QK_K // 16, "iquant"),
    20: GgmlType("IQ4_NL", 32, 2 + 16, "iquant"),
    21: GgmlType("IQ3_S", QK_K, 2 + QK_K // 4 + QK_K // 8 + QK_K // 32 + 4, "iquant"),
    22: GgmlType("IQ2_S", QK_K, 2 + QK_K // 4 + QK_K // 16, "iquant"),
    23: GgmlType("IQ4_XS", QK_K, 2 + 2 + QK_K // 2 + QK_K // 64, "iquant"),
    24: GgmlType("I8", 1, 1, "f32"),
    25: GgmlType("I16", 1, 2, "f32"),
    26: GgmlType("I32", 1, 4, "f32"),
    27: GgmlType("I64", 1, 8, "f32"),
    28: GgmlType("F64", 1, 8, "f32"),
    29: GgmlType("IQ1_M", QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32, "iquant"),
    30: GgmlType("BF16", 1, 2, "f16"),
    34: GgmlType("TQ1_0", QK_K, 2 + 4 * 13, "iquant"),
    35: GgmlType("TQ2_0", QK_K, 2 + 64, "iquant"),
    39: GgmlType("MXFP4", 32, 1 + 16, "mxfp4"),
    40: GgmlType("NVFP4", 64, 4 + 32, "mxfp4"),
    41: GgmlType("Q1_0", 128, 2 + 16, "legacy"),
}

# llama_ftype -> quantization id as the contract prints it (MOSTLY_MXFP4_MOE is "MXFP4").
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M",
    30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4", 39: "NVFP4",
    40: "Q1_0",
}

# safetensors dtype -> (bits per element, kernel class)
ST_DTYPES: dict[str, tuple[int, str]] = {
    "BOOL": (8, "int8"), "U8": (8, "int8"), "I8": (8, "int8"),
    "F8_E5M2": (8, "fp8"), "F8_E4M3": (8, "fp8"), "F8_E8M0": (8, "fp8"),
    "I16": (16, "f16"), "U16": (16, "f16"), "F16": (16, "f16"), "BF16": (16, "f16"),
    "I32": (32, "int4"), "U32": (32, "int4"), "F32": (32, "f32"),
    "I64": (64, "f32"), "U64": (64, "f32"), "F64": (64, "f32"),
    "F4": (4, "mxfp4"), "F6_E2M3": (6, "fp8"), "F6_E3M2": (6, "fp8"),
}
"""I32/U32 weights in a checkpoint are packed 4-bit (GPTQ/AWQ `qweight`), hence `int4`."""
