"""Parsed arguments to the engine's inputs: Options, a Rig, a model reference."""

from __future__ import annotations

import argparse


def options_from(args: argparse.Namespace):
    """The engine's Options from the parsed options of `args.command` (advisor/engine/optiontable.py says which
    options it takes and the Options field each one sets)."""
    from advisor.engine.options import Options
    from advisor.engine.optiontable import options_changes

    return Options(**options_changes(getattr(args, "command", None) or "check",
                                     lambda d: getattr(args, d.dest, None)))


def with_mmproj(catalog, options):
    """Options with the --mmproj file read (its header only), or as they are."""
    if not options.mmproj or options.vision_tower is not None or options.mm_limit == 0:
        return options
    from dataclasses import replace
    from pathlib import Path

    from advisor.modelfile.vision import from_mmproj

    return replace(options, vision_tower=from_mmproj(Path(options.mmproj).expanduser(), catalog.rules,
                                                     display=options.mmproj))


def rig_from_args(args: argparse.Namespace, catalog):
    from advisor.probe.build import build_rig, with_cpu

    rig = build_rig(catalog, gpus=args.gpu, nvlink=args.nvlink, pcie=args.pcie, ram=args.ram,
                    rig_file=args.rig, empty=args.empty, ram_bw=getattr(args, "ram_bw", None))
    return with_cpu(catalog, rig, getattr(args, "cpu", None))


def model_from_arg(text: str, catalog=None, *, mmproj: bool = True):
    """A catalog id/name stays a string; a file, folder, store or remote reference is read.

    Order: a path that exists or a prefixed reference (`hf:`, `ollama:`, `https://`); then, for an
    `ORG/NAME` with a catalog, a name the catalog has exactly (id, name or alias: the same release);
    then the plain remote forms `ORG/NAME[:TAG]` and `NAME:TAG` (the local stores, then the network
    or its cache: an Ollama tag is read as the file Ollama would run, even when the catalog lists the
    model); anything else is a catalog name resolved as usual (closest ids named when unknown).
    `mmproj`: read the vision projector a remote reference ships (False when `wants_mmproj` says no)."""
    import os

    from_files = text.startswith(("ollama:", "hf:", "https://", "http://")) or \
        text.endswith((".gguf", ".json", ".safetensors")) or os.path.exists(os.path.expanduser(text))
    if not from_files and ("/" not in text and ":" not in text):
        return text  # the common case: no need to import the file readers
    from advisor.modelfile import read_model, read_reference

    if from_files:
        return read_model(text, progress=_progress, mmproj=mmproj)
    hf_shaped = "/" in text
    if catalog is not None and hf_shaped:
        from advisor.catalog.resolve import exact

        if exact(catalog.models, text) is not None:
            return text
    try:
        loaded = read_reference(text, progress=_progress, mmproj=mmproj)
    except Exception as exc:
        from advisor.errors import AdvisorError

        if isinstance(exc, AdvisorError) and catalog is not None:
            _name_catalog_entry(catalog, text, exc)
        raise
    return text if loaded is None else loaded


def _name_catalog_entry(catalog, text: str, exc) -> None:
    """A failed read of a name the catalog also knows: name that entry, and say when it is another
    release (an Ollama tag the catalog lists is the same model at a quantization of the advisor's choice)."""
    from advisor.catalog.resolve import exact, normal

    key = normal(text)
    for spec in catalog.models.values():
        if any(normal(n) == key for n in getattr(spec, "other_releases", ())):
            exc.hint = (f"{text} is a different release from the catalog's {spec.id} ({spec.name}); "
                        f"ask for {spec.id} to answer with that one" + (f"; {exc.hint}" if exc.hint else ""))
            return
    same = exact(catalog.models, text)
    if same is not None:
        exc.hint = (f"the catalog's {same} is this model without its file: ask for {same} to answer offline"
                    + (f"; {exc.hint}" if exc.hint else ""))


def _progress(text: str) -> None:
    import sys

    try:
        if sys.stderr is not None:
            sys.stderr.write(text)
            sys.stderr.flush()
    except (OSError, ValueError):
        pass


def wants_mmproj(args: argparse.Namespace, parsed=None) -> bool:
    """Whether a remote reference's own vision projector is read: not with --no-mmproj (or
    --language-model-only), nor when an mmproj file is named (llama.cpp common/arg.cpp fetches the -hf
    repo's mmproj only when no --mmproj is given and --no-mmproj is not), on the command line or in --cmd."""
    if getattr(args, "no_mmproj", False) or getattr(args, "mmproj", None):
        return False
    if parsed is not None and any(parsed.get(k) is not None for k in ("no_mmproj", "language_model_only", "mmproj")):
        return False
    return True


def resolve_model(catalog, text: str, *, mmproj: bool = True):
    """What the engine evaluates: the catalog's ModelSpec for an id or name, else the LoadedModel read
    from a file or reference (AdvisorError naming the closest ids when it is neither)."""
    from advisor.catalog.resolve import resolve

    ref = model_from_arg(text, catalog, mmproj=mmproj)
    return catalog.models[resolve(catalog.models, ref, "model")] if isinstance(ref, str) else ref


def model_inputs(catalog, args: argparse.Namespace, rig):
    """The model and Options `advisor check` answers for: `--cmd`'s (`command_inputs`), else MODEL's, in the
    format rules/checkpoints.toml records when MODEL names a checkpoint repo (`with_recorded_quant`)."""
    if getattr(args, "cmd", None):
        return command_inputs(catalog, args, rig)
    if args.model is None:
        from advisor.errors import AdvisorError

        raise AdvisorError("advisor check: name a MODEL (or give --cmd \"llama-server -m ...\")",
                           "see `advisor check --help`")
    model = resolve_model(catalog, args.model, mmproj=wants_mmproj(args))
    return model, with_recorded_quant(catalog, args.model, model, options_from(args))


def command_inputs(catalog, args: argparse.Namespace, rig):
    """The model and Options of `--cmd "COMMAND LINE"`: the model from MODEL if given, else from the
    command's -m (a file that exists is read; a name like qwen3-32b-Q4_K_M.gguf resolves to the catalog
    model and its quant) or -hf; every setting the command states, the rest from the other options."""
    import os

    from dataclasses import replace

    from advisor.engine.launch import CommandTarget, model_flags, options_from_command, parse_command, quant_in_name
    from advisor.errors import AdvisorError

    explicit_runtime = args.runtime.lower() if args.runtime.lower() != "llama.cpp" else None
    parsed = parse_command(catalog.rules.launch, args.cmd, runtime=explicit_runtime)
    ref = args.model or parsed.get("model") or parsed.get("hf_repo") or parsed.get("model_url") or \
        parsed.get("model_folder")
    if not ref:
        ways = model_flags(catalog.rules.launch, parsed.launcher)
        flag = next((w.split()[0] for w in ways.split(" or ") if w.startswith("-")), "")
        raise AdvisorError(f"--cmd names no model ({ways or 'it has no model setting'})",
                           f"add {flag} to the command or name MODEL" if flag else "name MODEL")
    if args.model is None and not parsed.get("model") and parsed.get("hf_repo") and parsed.get("hf_file"):
        from advisor.modelfile.remote import hf_endpoint  # -hf REPO --hf-file FILE: that file of the repo

        ref = f"{hf_endpoint()}/{parsed.get('hf_repo').split(':')[0]}/resolve/main/{parsed.get('hf_file')}"
    quant = args.quant or parsed.get("quantization")
    basis, notes = ("" if args.quant or not quant else "given with --quantization"), ()
    named, repo = parsed.get("model"), parsed.get("hf_repo")
    if named and not os.path.exists(os.path.expanduser(named)):
        # -m qwen3-32b-Q4_K_M.gguf: the catalog model at that quant (also when MODEL names the model itself)
        stem, q = quant_in_name(named, list(catalog.quants))
        if q is not None:
            quant, basis = (quant, basis) if quant else (q, f"read from the file name {os.path.basename(named)}")
            ref = stem if args.model is None else ref
    elif repo and "/" in repo and (args.model is not None or ref == repo):
        known = recorded_quant(catalog, repo, parsed)  # a repo rules/checkpoints.toml records: its format
        if known is not None:
            ref = known[0] if args.model is None else ref
            quant, basis, notes = (quant, basis, ()) if args.quant else known[1:]
        elif args.model is None and (guess := quant_in_repo_name(catalog, repo)) is not None:
            ref = guess[0]  # Qwen/Qwen3-32B-AWQ: the catalog's Qwen/Qwen3-32B
            quant, basis = (quant, basis) if quant else (guess[1], f"read from the repo's name {repo} "
                                                                   f"(rules/checkpoints.toml has no record of it)")
    quant, basis = (quant, basis) if quant or not parsed.get("dtype") else (parsed.get("dtype"), "given with --dtype")
    model = resolve_model(catalog, ref, mmproj=wants_mmproj(args, parsed))
    notes = notes or (() if args.quant else flag_on_base_repo(catalog, parsed, repo, getattr(model, "id", None)))
    spec = getattr(model, "spec", model)
    loaded = getattr(model, "layout", None)
    from advisor.engine.check import resolve_quant
    from advisor.engine.memory import weights_layout

    qspec = model.quant if loaded is not None else (resolve_quant(catalog, quant) if quant else None)
    if qspec is not None and explicit_runtime is None and not catalog.runtimes[parsed.runtime].loads(qspec):
        # The same program name in another runtime that loads these weights (ik_llama.cpp's llama-server
        # for an IQ4_KS file): that is the binary this command line runs.
        for other in catalog.runtimes.values():
            if other.loads(qspec):
                again = parse_command(catalog.rules.launch, args.cmd, runtime=other.id)
                if again.runtime == other.id:
                    parsed = again
                    break

    layout = loaded or weights_layout(spec, resolve_quant(catalog, quant) if quant else
                                      next(iter(catalog.quants.values())))
    moe = tuple(il for il, b in enumerate(layout.expert_bytes) if b) if spec.is_moe else ()
    target = CommandTarget(spec.layers, moe, spec.max_context, len(rig.gpus), quant,
                           bool(parsed.runtime in catalog.runtimes and catalog.runtimes[parsed.runtime].row_split))
    options = options_from_command(parsed, options_from(args), target)
    return model, replace(options, quant_basis=basis, command_notes=(*options.command_notes, *notes))


def recorded_quant(catalog, repo: str, parsed):
    """(catalog model, quant, where the quant came from, notes) of a Hugging Face repo a paged server's command names
    (`vllm serve REPO`, SGLang's --model-path) that rules/checkpoints.toml records, or None: it is read in its
    recorded format whatever its name says (RedHatAI's Llama 3.1 8B "w4a16" is GPTQ). A --quantization on the
    line naming another method than the record's makes a line that does not load: said in the notes."""
    from advisor.engine.launch import repo_checkpoint

    known = repo_checkpoint(catalog.rules.checkpoints, repo)
    if known is None:
        return None
    flag, q = parsed.get("quantization"), known.quant
    notes = () if flag in (None, q) else (
        f"--quantization {flag}: {repo} is a checkpoint in {q} (rules/checkpoints.toml), and "
        f"{catalog.runtimes[parsed.runtime].name} stops at start when --quantization names another method than the "
        f"checkpoint's config (\"Quantization method specified in the model config (...) does not match the "
        f"quantization method specified in the `quantization` argument\"), so this line does not load: drop "
        f"--quantization; the answer is for its {q} weights",)
    return known.model, q, _recorded_basis(repo, q), notes


def with_recorded_quant(catalog, ref: str, model, options):
    """`options` for a MODEL named by a Hugging Face repo id that rules/checkpoints.toml records as a checkpoint of
    that catalog model (nvidia/Qwen3.6-35B-A3B-NVFP4, an alias of Qwen3.6 35B-A3B): the recorded quantization, as
    `vllm serve REPO` reads it (`recorded_quant`), unless --quant says another; else `options` as they are."""
    from dataclasses import replace

    known = _recorded_of(catalog, ref, getattr(model, "id", None))
    if options.quant or known is None:
        return options
    return replace(options, quant=known.quant, quant_basis=_recorded_basis(ref, known.quant))


def recorded_controls(catalog, ref: str | None, model_id: str | None) -> dict[str, str]:
    """The runtime and quantization to open on when MODEL is a repo rules/checkpoints.toml records as a checkpoint
    of `model_id` (`advisor nvidia/Qwen3.6-35B-A3B-NVFP4`): its recorded format and the first of that format's
    runtimes that loads it, as option-table control ids; {} for any other MODEL. `advisor check REPO` asks the
    format (`with_recorded_quant`) and leaves the runtime to --runtime."""
    known = _recorded_of(catalog, ref, model_id)
    quant = catalog.quants.get(known.quant) if known is not None else None
    runtime = next((r for r in (quant.runtimes if quant else ()) if r in catalog.runtimes
                    and catalog.runtimes[r].loads(quant)), None)
    return {"runtime": runtime, "quant": quant.id} if runtime else {}


def _recorded_of(catalog, ref: str | None, model_id: str | None):
    """The rules/checkpoints.toml entry of the repo `ref` when it records a checkpoint of `model_id`, else None."""
    from advisor.engine.launch import repo_checkpoint

    known = repo_checkpoint(catalog.rules.checkpoints, ref) if isinstance(ref, str) else None
    return known if known is not None and known.model == model_id else None


def _recorded_basis(repo: str, quant: str) -> str:
    """Where the quantization of a repo rules/checkpoints.toml records came from, as the answer says it."""
    return f"{repo} is recorded as a checkpoint in {quant} (rules/checkpoints.toml)"


def flag_on_base_repo(catalog, parsed, repo: str | None, model_id: str | None) -> tuple[str, ...]:
    """A note when the line gives a catalog model's own unrecorded (16-bit) repo a --quantization its runtime
    does not make at load (`--quantization awq` on Qwen/Qwen3-32B): AWQ and GPTQ weights are read from a
    checkpoint in that format, and vLLM stops with "Cannot find the config file for awq" (vllm-project/vllm#1419,
    get_quant_config in vllm/model_executor/model_loader/weight_utils.py), so the line does not load."""
    from advisor.catalog.resolve import exact
    from advisor.engine.launch import repo_checkpoint, weights_source

    flag, cps = parsed.get("quantization"), catalog.rules.checkpoints
    if not (flag and repo and model_id) or repo_checkpoint(cps, repo) is not None or \
            exact(catalog.models, repo) != model_id:
        return ()
    how, named, _ = weights_source(catalog.rules.launch, cps, parsed.launcher, model_id, flag, repo)
    if how not in ("checkpoint", "missing"):
        return ()
    instead = f"name {named}, recorded in {flag}" if named else f"name a checkpoint of this model in {flag}"
    return (f"--quantization {flag}: {repo} is the model's own repo, not a checkpoint in {flag}, and "
            f"{catalog.runtimes[parsed.runtime].name} reads {flag} weights only from one (vLLM: \"Cannot find the "
            f"config file for {flag}\", vllm-project/vllm#1419), so this line does not load: {instead} "
            f"(rules/checkpoints.toml); the answer is for {flag} weights",)


def quant_in_repo_name(catalog, repo: str) -> tuple[str, str] | None:
    """(catalog model, quant) a repo with no record names: a catalog repo id followed by a quant id
    (Qwen/Qwen3-4B-AWQ: Qwen/Qwen3-4B in awq), or None. A guess from words: a record wins over it."""
    from advisor.catalog.resolve import exact
    from advisor.engine.launch import quant_in_name

    stem, q = quant_in_name(repo, list(catalog.quants))
    if q is not None and exact(catalog.models, repo) is None and exact(catalog.models, stem) is not None:
        return stem, q
    return None
