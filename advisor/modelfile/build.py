"""Assemble a `LoadedModel` from a GGUF file, a safetensors folder or a bare config.json."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from advisor.catalog.types import ModelSpec, QuantSpec
from advisor.engine.memory import weights_layout
from advisor.modelfile import gguf_arch, hf_config, limits, vision
from advisor.modelfile.fields import family_of, get_int, slug, text_value
from advisor.modelfile.ggml_types import FILE_TYPES, TABLE_OF
from advisor.modelfile.gguf_file import GgufFile, Tensor, read_gguf
from advisor.modelfile.layout import Tally, tally
from advisor.modelfile.limits import bad_file
from advisor.engine.loaded import LoadedModel
from advisor.modelfile.safetensors_file import read_safetensors

GGUF_RUNTIMES = ("llama.cpp", "ollama")
ST_RUNTIMES = ("vllm", "transformers")
_SPLIT = re.compile(r"^(?P<stem>.*)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$")


def from_gguf(path: Path, *, source: str = "gguf file", name: str | None = None,
              sources: tuple[str, ...] | None = None) -> LoadedModel:
    """A .gguf file (every part of a split one). `name` stands for the file name (Ollama's NAME:TAG)."""
    import os
    from dataclasses import replace

    parts = split_parts(path)
    loaded = from_gguf_files([read_gguf(p) for p in parts], [p.name for p in parts], source=source, name=name,
                             sources=sources or (str(parts[0]),))
    return replace(loaded, path=os.path.abspath(parts[0]))  # llama.cpp is given a split set's first part


def from_gguf_files(files: list[GgufFile], names: list[str], *, source: str, name: str | None,
                    sources: tuple[str, ...]) -> LoadedModel:
    """A model from the parsed headers of a GGUF file or of every part of a split set, local or remote
    (`names` are the parts' file names, in order)."""
    first = files[0].path
    meta = files[0].metadata
    tensors = _merge([f.tensors for f in files], first)
    if len(files) > 1:
        _check_split(meta, len(files), len(tensors), first)
    arch, f, notes = gguf_arch.architecture(meta, tensors, first)
    t = tally(tensors, f["layers"], "gguf")
    quant_id = FILE_TYPES.get(get_int(meta, "general.file_type", first, "any", -1), "mixed")
    label = names[0] + (f" and its {len(files) - 1} other parts" if len(files) > 1 else "")
    if name:
        label = f"{name} ({label})"
    stem = m.group("stem") if (m := _SPLIT.match(names[0])) else names[0].removesuffix(".gguf")
    spec = _spec(slug(name or stem), text_value(meta.get("general.name")) or name or stem, arch, f, t, notes,
                 sources, why=f"read from {label}: {len(tensors)} tensors, architecture {arch}")
    tables = tuple(sorted({TABLE_OF.get(x.dtype, "ggml") for x in tensors} - {"ggml"}))
    quant = QuantSpec(id=quant_id, format="gguf", bits_per_weight=_bpw(t, first),
                      bpw_basis=f"exact: tensor types and shapes read from {label}",
                      # a table is named for the project that defines it; mainline's runs in Ollama too
                      runtimes=GGUF_RUNTIMES if set(tables) <= {GGUF_RUNTIMES[0]} else tables, kernel=t.kernel,
                      ggml_tables=tables)
    return LoadedModel(spec=spec, quant=quant, layout=t.layout, source=source, exact=True)


def split_parts(path: Path) -> list[Path]:
    """All parts of a split GGUF (`name-00001-of-00003.gguf`), or just the file."""
    m = _SPLIT.match(path.name)
    if not m:
        return [path]
    n = int(m.group("n"))
    if not 1 <= int(m.group("i")) <= n or n > limits.MAX_SPLITS:
        bad_file(path, f"split name says part {int(m.group('i'))} of {n}", "keep the parts' names as llama.cpp wrote them")
    parts = [path.with_name(f"{m.group('stem')}-{k:05d}-of-{n:05d}.gguf") for k in range(1, n + 1)]
    missing = [p.name for p in parts if not p.is_file()]
    if missing:
        bad_file(path, f"split GGUF is missing {len(missing)} of its {n} parts ({', '.join(missing[:3])})",
                 "download every part into the same folder")
    return parts


def _check_split(meta: dict[str, Any], n_parts: int, n_tensors: int, where: Path) -> None:
    count = get_int(meta, "split.count", where, "any", n_parts)
    if count != n_parts:
        bad_file(where, f"split.count says {count} parts, the file names say {n_parts}")
    declared = get_int(meta, "split.tensors.count", where, "any", n_tensors)
    if declared != n_tensors:
        bad_file(where, f"split.tensors.count says {declared} tensors, the parts hold {n_tensors}")


def from_folder(folder: Path, *, source: str = "safetensors folder", name: str | None = None,
                sources: tuple[str, ...] | None = None) -> LoadedModel:
    """A model folder: config.json + *.safetensors; config.json alone; or one GGUF model."""
    cfg_path = folder / "config.json"
    shards = _shards(folder)
    if not shards:
        ggufs = [p for p in sorted(folder.glob("*.gguf")) if "mmproj" not in p.name.lower()
                 and (not (m := _SPLIT.match(p.name)) or m.group("i") == "00001")]
        if len(ggufs) == 1:
            return from_gguf(ggufs[0], source="gguf file" if source == "safetensors folder" else source,
                             name=name, sources=sources)
        if len(ggufs) > 1:
            bad_file(folder, f"holds {len(ggufs)} GGUF models ({', '.join(p.name for p in ggufs[:3])})", "pass one .gguf file")
    if not cfg_path.is_file():
        bad_file(folder, "no config.json and no model weights in this folder",
                 "pass a .gguf file, or a model folder as downloaded from Hugging Face")
    if not shards:
        return from_config(cfg_path, name=name, sources=sources)
    cfg = limits.read_json(cfg_path, limits.MAX_SMALL_JSON, "config.json")
    groups = [_checked_shard(s, names) for s, names in shards.items()]
    return from_safetensors(cfg, cfg_path, groups, folder, name=name or folder.name, source=source,
                            sources=sources or (str(folder),))


def from_safetensors(cfg: Any, cfg_where: Path, groups: list[tuple[Tensor, ...]], where: Path, *, name: str,
                     source: str, sources: tuple[str, ...]) -> LoadedModel:
    """A model from its config.json object and the tensors of each safetensors file (local or remote)."""
    model_type, f, notes = hf_config.architecture(cfg, cfg_where)
    tensors, vis = vision.split_tensors(_merge(groups, where), vision.rules())
    if not tensors:
        bad_file(where, "holds only vision-tower tensors", "pass the whole model's weights")
    tower = vision.from_tensors(vis, cfg, cfg_where, vision.rules())
    if tower is None and isinstance(cfg, dict) and isinstance(cfg.get("vision_config"), dict):
        notes.append("config.json describes a vision tower but the files hold none of its tensors: not counted")
    f = _with_tower(f, tower)
    t = tally(tensors, f["layers"], "safetensors")
    c = hf_config.text_config(cfg, cfg_where)
    qcfg = c.get("quantization_config") if isinstance(c.get("quantization_config"), dict) else None
    if qcfg is None and isinstance(cfg, dict) and isinstance(cfg.get("quantization_config"), dict):
        qcfg = cfg["quantization_config"]  # multimodal configs keep it at the top level
    quant_id, kernel = _st_quant(qcfg, t)
    if _declared_quant(c, qcfg):  # DeepSeek V4: fp8 quantization_config, but MXFP4 routed experts
        quant_id, kernel = _declared_quant(c, qcfg), "mxfp4"
    label = f"{name} ({len(groups)} safetensors file{'s' if len(groups) > 1 else ''})"
    basis = f"exact: tensor types and shapes read from {label}"
    if qcfg is not None:  # packed weights: elements are not parameters
        params, active = hf_config.estimate_params(cfg, f, cfg_where)
        t = Tally(t.layout, t.output_present, params, t.expert_params, t.kernel, t.dominant_dtype, t.dominant_share)
        basis += "; parameters counted from config.json shapes (the tensors are packed)"
        f = {**f, "_active": active}
    spec = _spec(slug(name), name, model_type, f, t, notes, sources,
                 why=f"read from {label}: {len(tensors)} tensors, model_type {model_type}")
    # EXL2/EXL3 checkpoints load in the runtimes whose formats name them (rules/runtimes.toml), not vLLM's.
    fmt = quant_id.split("-", 1)[0] if quant_id.startswith(("exl2-", "exl3-")) else "safetensors"
    quant = QuantSpec(id=quant_id, format=fmt, bits_per_weight=_bpw(t, where), bpw_basis=basis,
                      runtimes=ST_RUNTIMES if fmt == "safetensors" else (), kernel=kernel)
    return LoadedModel(spec=spec, quant=quant, layout=t.layout, source=source, exact=True, vision=tower)


def _with_tower(f: dict[str, Any], tower) -> dict[str, Any]:
    """The architecture fields with the tower's parameters and what was assumed about it."""
    if tower is None:
        return f
    return {**f, "vision_params": tower.params, "assumptions": tuple(f.get("assumptions", ())) + tower.assumptions}


def _shards(folder: Path) -> dict[Path, set[str] | None]:
    """Shard files, each with the tensor names the index assigns to it (None without an index)."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        from advisor.modelfile.safetensors_file import index_shards

        out: dict[Path, set[str] | None] = {folder / fname: names for fname, names in
                                            index_shards(limits.read_json(index, limits.MAX_INDEX_JSON,
                                                                          "safetensors index"), index).items()}
        missing = [p.name for p in out if not p.is_file()]
        if missing:
            bad_file(index, f"lists {len(missing)} shard files that are not there ({', '.join(missing[:3])})",
                     "the download is incomplete: fetch every *.safetensors file")
        return out
    files = sorted(folder.glob("*.safetensors"))
    if any(not p.name.startswith("consolidated") for p in files):  # Mistral repos ship both formats
        files = [p for p in files if not p.name.startswith("consolidated")]
    if len(files) > limits.MAX_SPLITS:
        bad_file(folder, f"holds {len(files)} .safetensors files (over {limits.MAX_SPLITS})")
    return {p: None for p in files}


def _checked_shard(shard: Path, names: set[str] | None) -> tuple[Tensor, ...]:
    tensors, _meta = read_safetensors(shard)
    if names is not None:
        have = {t.name for t in tensors}
        lost = names - have
        if lost:
            bad_file(shard, f"the index puts {len(lost)} tensors here that the file lacks (e.g. {sorted(lost)[0][:100]!r})")
    return tensors


def from_config(path: Path, *, name: str | None = None, sources: tuple[str, ...] | None = None) -> LoadedModel:
    cfg = limits.read_json(path, limits.MAX_SMALL_JSON, "config.json")
    model_type, f, notes = hf_config.architecture(cfg, path)
    total, active = hf_config.estimate_params(cfg, f, path)
    tower = vision.from_config(cfg, path, vision.rules())
    f = _with_tower(f, tower)
    folder = path.resolve().parent.name or "model"
    spec = ModelSpec(id=slug(name or folder), name=name or folder, family=family_of(model_type), params_total=total,
                     params_active=active, sources=sources or (str(path),),
                     notes="; ".join([f"architecture from {path.name} (model_type {model_type}); parameters counted from its shapes", *notes]),
                     **f)
    quant = QuantSpec(id="BF16", format="safetensors", bits_per_weight=16.0,
                      bpw_basis=f"estimate: parameters counted from {path.name} shapes, stored at 16 bits (BF16)",
                      runtimes=ST_RUNTIMES, kernel="f16")
    c = hf_config.text_config(cfg, path)
    declared = _declared_quant(c, c.get("quantization_config") if isinstance(c.get("quantization_config"), dict) else None)
    if declared:  # the format the config says its weights ship in, sized per tensor class (rules/quants.toml)
        from dataclasses import replace

        from advisor.catalog.load import load_catalog

        native = load_catalog().quants[declared]
        quant = replace(native, bpw_basis=f"estimate: parameters counted from {path.name} shapes, stored as its "
                                          f"expert_dtype and quantization_config declare ({native.bpw_basis})")
        spec = replace(spec, native_quant=declared)
    return LoadedModel(spec=spec, quant=quant, layout=weights_layout(spec, quant), source="config.json", exact=False,
                       vision=tower)


def _declared_quant(c: dict[str, Any], qcfg: dict[str, Any] | None) -> str:
    """A published mixed format a config.json declares beside its quantization_config: DeepSeek V4's
    `expert_dtype: fp4` with an fp8 quantization_config is MXFP4 routed experts and FP8 elsewhere
    (rules/quants.toml fp4-experts-fp8). "" when there is none."""
    method = str(qcfg.get("quant_method", "")).lower() if qcfg is not None else ""
    return "fp4-experts-fp8" if c.get("expert_dtype") == "fp4" and method == "fp8" else ""


def _merge(groups: list[tuple[Tensor, ...]], where: Path) -> tuple[Tensor, ...]:
    out: list[Tensor] = []
    seen: set[str] = set()
    for group in groups:
        for t in group:
            if t.name in seen:
                bad_file(where, f"tensor {t.name[:100]!r} is in more than one file")
            seen.add(t.name)
            out.append(t)
        if len(out) > limits.MAX_TENSORS:
            bad_file(where, f"more than {limits.MAX_TENSORS} tensors")
    if not out:
        bad_file(where, "holds no tensors", "pass the model's weights, not an adapter or tokenizer file")
    return tuple(out)


def _bpw(t: Tally, where: Path) -> float:
    if t.params <= 0:
        bad_file(where, "its tensors hold no weights")
    return t.layout.total_bytes * 8 / t.params


def _st_quant(qcfg: dict[str, Any] | None, t: Tally) -> tuple[str, str]:
    """(quant id, kernel class) of a safetensors checkpoint, named as its `quantization_config` says
    (the ids of rules/quants.toml: awq, gptq, fp8, int8, nf4, MXFP4, NVFP4, W4A16, W8A8, autoround,
    exl2-<bits>, exl3-<bits>)."""
    if qcfg is not None:
        method = str(qcfg.get("quant_method", "")).lower().replace("_", "-")
        bits = qcfg.get("bits")
        if method in ("awq", "gptq"):
            return (method, "int4") if bits in (None, 4) else ("W8A16", "int8") if bits == 8 else ("mixed", t.kernel)
        if method in ("auto-round", "autoround", "intel/auto-round"):
            return "autoround", "int4"
        if method in ("exl2", "exl3") and isinstance(bits, (int, float)) and not isinstance(bits, bool) and 1 <= bits <= 16:
            return f"{method}-{float(bits):g}", "int4"
        if method == "bitsandbytes":
            return ("nf4", "int4") if qcfg.get("load_in_4bit") else ("int8", "int8")
        if method == "mxfp4":
            return "MXFP4", "mxfp4"
        if method == "modelopt":
            algo = str(qcfg.get("quant_algo", "")).upper()
            if algo == "NVFP4":
                return "NVFP4", "mxfp4"
            if algo.startswith("FP8"):
                return "fp8", "fp8"
        if method == "compressed-tensors":
            return _compressed_tensors(qcfg, t)
        if method == "fp8" or t.kernel == "fp8":
            return "fp8", "fp8"
        if t.kernel == "int8":
            return "int8", "int8"
        return "mixed", t.kernel
    if t.dominant_dtype in ("BF16", "F16", "F32") and t.dominant_share >= 0.9:
        return t.dominant_dtype, t.kernel
    return "mixed", t.kernel


def _compressed_tensors(qcfg: dict[str, Any], t: Tally) -> tuple[str, str]:
    """llm-compressor's schemes by their names: NVFP4 (4-bit float weights in groups of 16), W4A16 /
    W8A16 (integer weights, 16-bit activations), W8A8 (8-bit weights and activations), FP8."""
    fmt = str(qcfg.get("format", "")).lower()
    groups = qcfg.get("config_groups") if isinstance(qcfg.get("config_groups"), dict) else {}
    weights = [g.get("weights") for g in groups.values() if isinstance(g, dict) and isinstance(g.get("weights"), dict)]
    acts = [g.get("input_activations") for g in groups.values() if isinstance(g, dict)]
    w = weights[0] if weights else {}
    bits, kind = w.get("num_bits"), str(w.get("type", "int")).lower()
    if fmt.startswith("nvfp4") or (bits == 4 and kind == "float"):
        return "NVFP4", "mxfp4"
    if kind == "float" and bits == 8:
        return "fp8", "fp8"
    if bits in (4, 8) and kind == "int":
        act = next((a for a in acts if isinstance(a, dict)), None)
        if act is None:
            return f"W{bits}A16", "int4" if bits == 4 else "int8"
        return f"W{bits}A{act.get('num_bits', 16)}", "int8"
    return "mixed", t.kernel


def _spec(id_: str, name: str, arch: str, f: dict[str, Any], t: Tally, notes: list[str],
          sources: tuple[str, ...], *, why: str) -> ModelSpec:
    f = dict(f)
    active = f.pop("_active", None)
    f["tied_embeddings"] = not t.output_present
    if active is None:
        active = t.params
        if f["experts"] and t.expert_params:
            active = t.params - t.expert_params * (f["experts"] - f["experts_active"]) // f["experts"]
    return ModelSpec(id=id_, name=name, family=family_of(arch), params_total=t.params, params_active=active,
                     sources=sources, notes="; ".join([why, *notes]), **f)
