"""Parsed arguments to the engine's inputs: Options, a Rig, a model reference."""

from __future__ import annotations

import argparse


def options_from(args: argparse.Namespace):
    from advisor.engine.options import Options

    return Options(quant=args.quant, ctx=args.ctx, prompt_tokens=args.prompt_tokens,
                   kv_type=(args.kv_cache or "f16").lower(), kv_fixed=args.kv_cache is not None,
                   min_quality=args.min_quality, allow_low_bit=args.allow_low_bit,
                   min_tps=getattr(args, "min_tps", None) if getattr(args, "command", None) in ("check", "fit") else None,
                   runtime=args.runtime.lower(), split=args.split, concurrency=args.concurrency,
                   workload=args.workload.lower(), flash_attention=args.flash_attn,
                   batch_size=args.batch_size, seq_len=args.seq_len,
                   gradient_checkpointing=args.gradient_checkpointing, optimizer=args.optimizer,
                   sharding=args.sharding.lower(), lora_rank=args.lora_rank)


def rig_from_args(args: argparse.Namespace, catalog):
    from advisor.probe.build import build_rig

    return build_rig(catalog, gpus=args.gpu, nvlink=args.nvlink, pcie=args.pcie, ram=args.ram,
                     rig_file=args.rig, empty=args.empty)


def model_from_arg(text: str):
    """A catalog id/name stays a string; a file, folder, `ollama:` or `hf:` reference is read."""
    import os

    if not (text.startswith(("ollama:", "hf:")) or text.endswith((".gguf", ".json", ".safetensors"))
            or os.path.exists(os.path.expanduser(text))):
        return text  # the common case: no need to import the file readers
    from advisor.modelfile import read_model

    return read_model(text)


def resolve_model(catalog, text: str):
    """What the engine evaluates: the catalog's ModelSpec for an id or name, else the LoadedModel read
    from a file or reference (AdvisorError naming the closest ids when it is neither)."""
    from advisor.catalog.resolve import resolve

    ref = model_from_arg(text)
    return catalog.models[resolve(catalog.models, ref, "model")] if isinstance(ref, str) else ref
