"""ggml tensor types and llama.cpp file types, as tables (no dependency on the `gguf` package).

Block sizes and bytes per block are ggml's (`ggml/src/ggml-common.h`, mirrored by gguf-py's
`GGML_QUANT_SIZES`); file types are llama.cpp's `llama_ftype` (gguf-py `LlamaFileType`). A tensor
of `n` elements of a type with block `b` and `s` bytes per block takes `n / b * s` bytes; the
first dimension must be a whole number of blocks.

ik_llama.cpp (github.com/ikawrakow/ik_llama.cpp @ 8337e4cd) keeps ggml's ids 0-30 and 39 and adds its
own: `ggml/include/ggml.h` enum ggml_type (IQ2_K = 137 ... IQ1_KT = 158, the repacked *_R4/_R8 from
202), block sizes, bytes per block and per-row metadata from `ggml/src/ggml.c` type_traits
(`blck_size`, `type_size`, `row_meta_size`) with the block structs' static_asserts in
`ggml/src/ggml-common.h`. Its row-scaled types (IQ4_KS, IQ2_KS, IQ*_KT, ...) store `row_meta` bytes
(a float or half scale) in front of every row: ggml_row_size = row_meta + ne0 / block x type_size.
Each type names the type table that defines it (`table`): "ggml" for both projects, "llama.cpp" for
ids only mainline defines (TQ1_0, TQ2_0, NVFP4), "ik_llama.cpp" for ik_llama.cpp's own; a runtime
lists the tables it reads (rules/runtimes.toml `ggml_tables`).
"""

from __future__ import annotations

from typing import NamedTuple

QK_K = 256
IK = "ik_llama.cpp"


class GgmlType(NamedTuple):
    name: str
    block: int
    type_size: int
    kernel: str
    """Kernel class for the speed rules (rules/quants.toml `kernel`)."""
    table: str = "ggml"
    """The type table that defines this id: "ggml" (both projects), "llama.cpp" or "ik_llama.cpp"."""
    row_meta: int = 0
    """Bytes stored in front of every row (ik_llama.cpp's row-scaled types)."""

    def row_bytes(self, ne0: int) -> int:
        """Bytes of one row of `ne0` elements (ggml_row_size)."""
        return self.row_meta + ne0 // self.block * self.type_size


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
    34: GgmlType("TQ1_0", QK_K, 2 + 4 * 13, "iquant", "llama.cpp"),
    35: GgmlType("TQ2_0", QK_K, 2 + 64, "iquant", "llama.cpp"),
    39: GgmlType("MXFP4", 32, 1 + 16, "mxfp4"),
    40: GgmlType("NVFP4", 64, 4 + 32, "mxfp4", "llama.cpp"),
    41: GgmlType("Q1_0", 128, 2 + 16, "legacy"),  # ik_llama.cpp's Q1_0_G128: the same 18-byte block of 128
    # -- ik_llama.cpp's own types (ggml.h ids, ggml.c type_traits, ggml-common.h block sizes) ---------------
    # Q4_0 interleaved for ARM: mainline dropped these ids (its ggml.c lists them as removed).
    31: GgmlType("Q4_0_4_4", 32, 2 + 16, "legacy", IK),
    32: GgmlType("Q4_0_4_8", 32, 2 + 16, "legacy", IK),
    33: GgmlType("Q4_0_8_8", 32, 2 + 16, "legacy", IK),
    133: GgmlType("Q6_0", 32, 2 + 16 + 8, "legacy", IK),
    134: GgmlType("IQ1_BN", 64, 13, "iquant", IK, 2),
    135: GgmlType("IQ2_BN", 64, 16, "iquant", IK, 4),
    137: GgmlType("IQ2_K", QK_K, 2 + 2 + QK_K // 32 + QK_K // 4, "iquant", IK),
    138: GgmlType("IQ3_K", QK_K, 2 + 2 * 2 + QK_K // 32 + QK_K // 4 + QK_K // 8, "iquant", IK),
    139: GgmlType("IQ4_K", QK_K, 2 + 2 + QK_K // 2 + 3 * QK_K // 64, "iquant", IK),
    140: GgmlType("IQ5_K", QK_K, 2 + 2 + QK_K // 2 + QK_K // 8 + 3 * QK_K // 64, "iquant", IK),
    141: GgmlType("IQ6_K", QK_K, 2 + 2 + QK_K // 2 + QK_K // 4 + QK_K // 16, "iquant", IK),
    144: GgmlType("IQ4_KS", QK_K, QK_K // 32 + QK_K // 2, "iquant", IK, 4),
    145: GgmlType("IQ2_KS", QK_K, 2 + QK_K // 64 + QK_K // 4, "iquant", IK, 2),
    146: GgmlType("IQ4_KSS", QK_K, QK_K // 8 * 4, "iquant", IK, 4),
    151: GgmlType("Q8_KV", 32, 32, "q8", IK, 8),
    152: GgmlType("IQ5_KS", QK_K, QK_K // 32 + QK_K // 2 + QK_K // 8, "iquant", IK, 4),
    153: GgmlType("IQ2_KT", QK_K, QK_K // 4 + QK_K // 64, "iquant", IK, 4),
    154: GgmlType("IQ3_KT", QK_K, QK_K // 4 + QK_K // 8 + QK_K // 64, "iquant", IK, 4),
    155: GgmlType("IQ4_KT", QK_K, QK_K // 2, "iquant", IK, 4),
    156: GgmlType("IQ3_KS", QK_K, 2 + QK_K // 64 + QK_K // 4 + QK_K // 8, "iquant", IK, 2),
    157: GgmlType("IQ2_KL", QK_K, 2 + QK_K // 64 + QK_K // 4 + QK_K // 16, "iquant", IK, 2),
    158: GgmlType("IQ1_KT", QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32, "iquant", IK, 4),
    # Repacked (rows interleaved in groups of 4, 8 or 16 for the CPU kernels; offline with
    # `llama-quantize --repack`, or at load time with -rtr): the bytes of the base type, except where
    # type_traits say otherwise (IQ1_S_R4/IQ1_M_R4: blocks of 32 with a per-row half scale).
    202: GgmlType("Q4_0_R8", 32, 2 + 16, "legacy", IK),
    206: GgmlType("Q5_0_R4", 32, 2 + 4 + 16, "legacy", IK),
    208: GgmlType("Q8_0_R8", 32, 2 + 32, "q8", IK),
    210: GgmlType("Q2_K_R4", QK_K, 2 + 2 + QK_K // 16 + QK_K // 4, "kquant", IK),
    211: GgmlType("Q3_K_R4", QK_K, 2 + QK_K // 4 + QK_K // 8 + 12, "kquant", IK),
    212: GgmlType("Q4_K_R4", QK_K, 2 + 2 + QK_K // 2 + 12, "kquant", IK),
    213: GgmlType("Q5_K_R4", QK_K, 2 + 2 + QK_K // 2 + QK_K // 8 + 12, "kquant", IK),
    214: GgmlType("Q6_K_R4", QK_K, 2 + QK_K // 2 + QK_K // 4 + QK_K // 16, "kquant", IK),
    216: GgmlType("IQ2_XXS_R4", QK_K, 2 + QK_K // 4, "iquant", IK),
    217: GgmlType("IQ2_XS_R4", QK_K, 2 + QK_K // 4 + QK_K // 32, "iquant", IK),
    218: GgmlType("IQ3_XXS_R4", QK_K, 2 + QK_K // 4 + QK_K // 8, "iquant", IK),
    219: GgmlType("IQ1_S_R4", 32, 24 // 4, "iquant", IK, 2),
    220: GgmlType("IQ4_NL_R4", 32, 2 + 16, "iquant", IK),
    221: GgmlType("IQ3_S_R4", QK_K, 2 + QK_K // 4 + QK_K // 8 + QK_K // 32 + 4, "iquant", IK),
    222: GgmlType("IQ2_S_R4", QK_K, 2 + QK_K // 4 + QK_K // 16, "iquant", IK),
    223: GgmlType("IQ4_XS_R8", QK_K, 2 + 2 + QK_K // 2 + QK_K // 64, "iquant", IK),
    229: GgmlType("IQ1_M_R4", 32, 28 // 4, "iquant", IK, 2),
    230: GgmlType("BF16_R16", 1, 2, "f16", IK),
    233: GgmlType("Q6_0_R4", 32, 2 + 16 + 8, "legacy", IK),
    335: GgmlType("IQ2_BN_R4", 64, 16, "iquant", IK, 4),
    337: GgmlType("IQ2_K_R4", QK_K, 2 + 2 + QK_K // 32 + QK_K // 4, "iquant", IK),
    338: GgmlType("IQ3_K_R4", QK_K, 2 + 2 * 2 + QK_K // 32 + QK_K // 4 + QK_K // 8, "iquant", IK),
    339: GgmlType("IQ4_K_R4", QK_K, 2 + 2 + QK_K // 2 + 3 * QK_K // 64, "iquant", IK),
    340: GgmlType("IQ5_K_R4", QK_K, 2 + 2 + QK_K // 2 + QK_K // 8 + 3 * QK_K // 64, "iquant", IK),
    344: GgmlType("IQ4_KS_R4", QK_K, QK_K // 32 + QK_K // 2, "iquant", IK, 4),
    352: GgmlType("IQ5_KS_R4", QK_K, QK_K // 32 + QK_K // 2 + QK_K // 8, "iquant", IK, 4),
    353: GgmlType("MXFP4_R8", 32, 1 + 16, "mxfp4", IK),
    398: GgmlType("Q8_KV_R8", 32, 32, "q8", IK, 4),
    399: GgmlType("Q8_K_R8", QK_K, (8 * 2 + 8 * QK_K) // 8, "q8", IK),
}

TABLE_OF: dict[str, str] = {t.name: t.table for t in GGML_TYPES.values()}
"""ggml type name -> the table that defines it."""

# llama_ftype -> quantization id as the contract prints it (MOSTLY_MXFP4_MOE is "MXFP4").
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M",
    30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4", 39: "NVFP4",
    40: "Q1_0",
    # ik_llama.cpp's llama_ftype (include/llama.h): its own ids from 135, the repacked from 202.
    33: "Q4_0_4_4", 34: "Q4_0_4_8", 35: "Q4_0_8_8",
    135: "Q6_0", 136: "IQ1_BN", 137: "IQ2_BN", 138: "IQ2_K", 139: "IQ3_K", 140: "IQ4_K", 141: "IQ5_K",
    142: "IQ6_K", 145: "IQ4_KS", 146: "IQ3_KL", 147: "IQ2_KS", 148: "IQ4_KSS", 149: "Q8_KV", 150: "IQ5_KS",
    151: "IQ2_KT", 152: "IQ3_KT", 153: "IQ4_KT", 154: "IQ3_KS", 155: "IQ2_KL", 156: "IQ1_KT",
    202: "Q4_0_R8", 207: "Q8_0_R8", 208: "Q5_0_R4", 210: "Q2_K_R4", 211: "Q3_K_R4", 214: "Q4_K_R4",
    216: "Q5_K_R4", 218: "Q6_K_R4", 219: "IQ2_XXS_R4", 220: "IQ2_XS_R4", 223: "IQ3_XXS_R4", 224: "IQ1_S_R4",
    225: "IQ4_NL_R4", 226: "IQ3_S_R4", 229: "IQ2_M_R4", 230: "IQ4_XS_R8", 231: "IQ1_M_R4", 232: "BF16_R16",
    335: "Q6_0_R4", 337: "IQ2_BN_R4", 338: "IQ2_K_R4", 339: "IQ3_K_R4", 340: "IQ4_K_R4", 341: "IQ5_K_R4",
    345: "IQ4_KS_R4", 350: "IQ5_KS_R4", 351: "MXFP4_R8", 398: "Q8_KV_R8", 399: "Q8_K_R8",
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
