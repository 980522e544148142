"""Command lines in and out: the command that realises an answer, and the answer for a command line.

What each program calls a setting lives in rules/launch.toml (launchers, their flags, what they write);
this module knows only the settings (`ctx_total`, `parallel`, `n_gpu_layers`, `override_tensor`, ...),
never a program's name. `launch_for` writes the command for a placement the engine chose; `parse_command`
reads one back into a `ParsedCommand`, whose `options()` are the engine's Options for exactly that
configuration: feeding an emitted command back gives the same placement (tests/test_launch.py).
Pure: no I/O.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from functools import cache

from advisor.record import Record, record
from advisor.catalog.rulebook import LaunchFlag, Launcher, LaunchRules
from advisor.errors import AdvisorError

MAX_COMMAND_CHARS = 16384
MAX_OVERRIDE_CHARS = 4096
_EXPERT_TENSORS = ("ffn_up_exps", "ffn_gate_exps", "ffn_down_exps")


@record
class Launch(Record):
    """The command that realises an answer."""

    runtime: str
    """rules/runtimes.toml id."""
    launcher: str
    """rules/launch.toml launcher id."""
    command: str
    """The command line (argv launchers) or `ollama create` plus `ollama run` (Modelfile launchers)."""
    env: tuple[tuple[str, str], ...] = ()
    """Environment variables to set first (Ollama's server settings)."""
    modelfile: str = ""
    """The Modelfile text, for launchers that use one."""
    note: str = ""
    """Why there is no command (empty `command`): what to do instead."""
    nodes: tuple[NodeLaunch, ...] = ()
    """GPUs in several machines: what to run on each, the first machine (where `command` runs) first."""
    order: str = ""
    """Which machine starts first (rules/runtimes.toml multinode.order; `launch_steps` puts the commands in it)."""


@record
class NodeLaunch(Record):
    """The commands one machine of a multi-machine answer runs, in order."""

    node: int
    """The rig's `node` number."""
    host: str
    """Its address or name (a NODEn_IP placeholder where the rig file gives none)."""
    role: str
    """`head` (the machine the model is served from) or `worker`."""
    commands: tuple[str, ...]


@record
class ParsedCommand(Record):
    """A command line as settings."""

    launcher: str
    runtime: str
    settings: tuple[tuple[str, str], ...]
    """(setting, value) in the order given; `override_tensor` may repeat."""
    notes: tuple[str, ...] = ()
    """Unknown flags (named), flags the advisor does not model, values it read only in part."""
    ignored: tuple[str, ...] = ()
    """Flags read and known to change neither memory nor speed."""
    declared: tuple[str, ...] = ()
    """Every setting the launcher can state (one it cannot state keeps the other options' value)."""

    def get(self, name: str, default: str | None = None) -> str | None:
        found = [v for k, v in self.settings if k == name]
        return found[-1] if found else default

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.settings if k == name]


def launcher_flags(rules: LaunchRules, launcher_id: str) -> dict[str, LaunchFlag]:
    """A launcher's flags with those of the launcher it is `like` underneath."""
    seen: set[str] = set()
    chain: list[Launcher] = []
    lid = launcher_id
    while lid and lid not in seen:
        seen.add(lid)
        entry = rules.launcher[lid]
        chain.append(entry)
        lid = entry.like
    flags: dict[str, LaunchFlag] = {}
    for entry in reversed(chain):
        flags.update(entry.flags)
    return flags


_MODEL_SETTINGS = (("model", "FILE"), ("hf_repo", "REPO"), ("model_folder", "FOLDER"))
"""The settings that name a model, and what each takes."""


def model_flags(rules: LaunchRules, launcher_id: str) -> str:
    """How this launcher's command line names its model, in its own spelling: `-m FILE or -hf REPO`
    (llama-server), `vllm serve REPO or --model REPO`, `--model-path REPO` (SGLang)."""
    entry, flags = rules.launcher[launcher_id], launcher_flags(rules, launcher_id)
    ways = [f"{flags[s].names[0]} {what}" for s, what in _MODEL_SETTINGS if s in flags and flags[s].names]
    if entry.positional:
        what = dict(_MODEL_SETTINGS).get(entry.positional, "MODEL")
        ways.insert(0, " ".join(w for w in (entry.program, entry.subcommand, what) if w))
    return " or ".join(ways)


def _emit_order(rules: LaunchRules, launcher_id: str) -> tuple[str, ...]:
    lid = launcher_id
    seen: set[str] = set()
    while lid and lid not in seen:
        seen.add(lid)
        if rules.launcher[lid].emit:
            return tuple(rules.launcher[lid].emit)
        lid = rules.launcher[lid].like
    return ()


def launchers_for(rules: LaunchRules, runtime: str) -> list[str]:
    return [lid for lid, entry in rules.launcher.items() if entry.runtime == runtime]


# --- out: the command for an answer ------------------------------------------------------------

def _expert_flags(placement) -> dict[str, str | None]:
    """The routed experts the placement keeps in system RAM, as llama.cpp says it most simply: --cpu-moe (all),
    --n-cpu-moe N (the first N layers), else -ot naming the layers."""
    layout = placement.layout
    moe = [il for il, b in enumerate(layout.expert_bytes) if b] if layout is not None else []
    cpu = sorted(placement.cpu_expert_set)
    out: dict[str, str | None] = {"cpu_moe": None, "n_cpu_moe": None, "override_tensor": None}
    if cpu and cpu == moe:
        out["cpu_moe"] = ""
    elif cpu and cpu == [il for il in moe if il <= cpu[-1]]:  # --n-cpu-moe N: blk.0 .. N-1
        out["n_cpu_moe"] = str(cpu[-1] + 1)
    elif cpu:
        out["override_tensor"] = "blk\\.(" + "|".join(str(i) for i in cpu) + ")\\.ffn_(up|down|gate)_exps\\.=CPU"
    return out


def _split_flags(placement, tensor_split: tuple[float, ...] | None) -> dict[str, str | None]:
    """-sm, -mg and -ts: llama.cpp's meta device is -sm tensor; every other tensor split is written as a row split
    (-sm row; TabbyAPI's --tensor-parallel True reads it so); everything on one GPU of several is -sm none on that
    main GPU (-mg), with no split at all."""
    split_mode = main_gpu = None
    if placement.strategy == "tensor_parallel":
        split_mode = "tensor" if placement.split_kind == "meta" else "row"
    elif tensor_split and len(tensor_split) > 1 and sorted(tensor_split)[-2] == 0:
        split_mode, main_gpu = "none", str(max(range(len(tensor_split)), key=lambda i: tensor_split[i]))
        tensor_split = None
    return {"split_mode": split_mode, "main_gpu": main_gpu,
            "tensor_split": ",".join(f"{x:g}" for x in tensor_split) if tensor_split else None}


def settings_for(sc, placement, placer, model_file: str) -> dict[str, str | None]:
    """The answer's settings by name (None: not written, the program's default is the answer's)."""
    options, ctx = sc.options, sc.ctx
    ngl = 0 if placement.strategy == "cpu_only" else \
        placement.gpu_layers if placement.strategy == "cpu_offload" else sc.model.layers + 1
    kv = options.kv_type if options.kv_type != "f16" else None
    return {
        "model": model_file,
        "ctx_total": str(ctx * options.concurrency),
        "parallel": str(options.concurrency),
        "kv_unified": "" if placer.kv_unified else None,
        "n_gpu_layers": str(ngl),
        **_split_flags(placement, options.tensor_split),
        **_expert_flags(placement),
        "flash_attn": "on" if placer.flash_attention else "off",
        "cache_type_k": kv,
        "cache_type_v": kv,
        "ubatch": str(options.ubatch) if options.ubatch else None,
        "swa_full": "" if options.swa_full else None,
        "n_prompt": str(options.prompt_tokens),
        "n_gen": "128",
        "ctx_per_seq": str(ctx),
    }


def render(rules: LaunchRules, launcher_id: str, values: dict[str, str | None]) -> Launch:
    """Write the settings as the launcher spells them."""
    entry = rules.launcher[launcher_id]
    flags = launcher_flags(rules, launcher_id)
    if entry.style == "modelfile":
        return _render_modelfile(entry, launcher_id, flags, values)
    words = entry.program.split() + ([entry.subcommand] if entry.subcommand else [])
    order = _emit_order(rules, launcher_id)
    for name in order:
        if name == "n_cpu_moe" and values.get("cpu_moe") is not None:
            name = "cpu_moe"
        value = values.get(name)
        if name == entry.positional and value is not None:
            words.append(value)
            continue
        if value is None or name not in flags or entry.defaults.get(name) == value:
            continue
        flag = flags[name]
        if flag.values:
            value = next((spelt for spelt, ours in flag.values.items() if ours == value), None)
            if value is None:
                continue
        if flag.multiple_of and value.isdigit():
            value = str(-(-int(value) // flag.multiple_of) * flag.multiple_of)
        words.append(flag.names[0])
        if flag.value != "switch":
            words.append(value)
    return Launch(entry.runtime, launcher_id, shlex.join(words))


def _render_modelfile(entry: Launcher, launcher_id: str, flags: dict[str, LaunchFlag],
                      values: dict[str, str | None]) -> Launch:
    lines, env = [], []
    for name, flag in flags.items():
        value = values.get(name)
        if value is None or (name == "cache_type_k" and value == "f16"):
            continue
        if flag.value == "fa":
            value = "1" if value == "on" else "0"
        for spelling in flag.names:
            if spelling == "FROM":  # a bare file name in this folder as ./NAME; a path or NAME:TAG as it is
                lines.insert(0, f"FROM ./{value}" if "/" not in value and value.endswith(".gguf") else f"FROM {value}")
            elif spelling.startswith("PARAMETER "):
                lines.append(f"{spelling} {value}")
            elif spelling.isupper():
                if name == "ctx_per_seq":
                    continue  # num_ctx in the Modelfile says it already
                env.append((spelling, value))
            break
    name = values.get("model", "model") or "model"
    tag = re.sub(r"[^a-z0-9._-]+", "-", name.rsplit("/", 1)[-1].lower().removesuffix(".gguf"))[:60] or "model"
    envs = " ".join(f"{k}={v}" for k, v in env)
    command = f"{envs + ' ' if envs else ''}ollama serve & ollama create {tag} -f Modelfile && ollama run {tag}"
    return Launch(entry.runtime, launcher_id, command, env=tuple(env), modelfile="\n".join(lines) + "\n")


# --- in: a command line as settings ------------------------------------------------------------

def parse_command(rules: LaunchRules, text: str, runtime: str | None = None) -> ParsedCommand:
    """Read a command line: its program picks the launcher (the runtime's, when several share a program
    name, else the one that knows every flag given); each flag becomes a setting. Unknown flags are named
    in `notes`, never dropped silently."""
    if len(text) > MAX_COMMAND_CHARS:
        raise AdvisorError(f"--cmd is {len(text)} characters long", f"use at most {MAX_COMMAND_CHARS}")
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise AdvisorError(f"--cmd: cannot split the command line ({exc})", "check its quotes") from None
    if not words:
        raise AdvisorError("--cmd is empty", "give the command line, e.g. --cmd \"llama-server -m x.gguf -c 8192\"")
    program = words[0].rsplit("/", 1)[-1].removesuffix(".exe")
    n_program = 1
    if program == "python" or program.startswith("python3"):  # whichever python; `python -m MODULE` names the module
        program = "python"
        if len(words) > 2 and words[1] == "-m":
            program, n_program = f"python -m {words[2]}", 3
    sub = words[n_program] if len(words) > n_program else ""
    candidates = [lid for lid, e in rules.launcher.items() if e.program == program and e.style == "argv"
                  and e.subcommand in ("", sub)]
    if not candidates:
        known = sorted({f"{e.program} {e.subcommand}".strip() for e in rules.launcher.values() if e.style == "argv"})
        raise AdvisorError(f"--cmd: {program!r} is not a program the advisor reads",
                           f"it reads: {', '.join(known)}")
    if runtime:
        preferred = [lid for lid in candidates if rules.launcher[lid].runtime == runtime]
        candidates = preferred or candidates
    parses = [_parse_words(rules, lid, words[n_program + (1 if rules.launcher[lid].subcommand else 0):])
              for lid in candidates]
    unknown_counts = [sum(1 for n in p.notes if n.startswith("unknown")) for p in parses]
    return parses[unknown_counts.index(min(unknown_counts))]


def _parse_words(rules: LaunchRules, launcher_id: str, args: list[str]) -> ParsedCommand:
    flags = launcher_flags(rules, launcher_id)
    by_name: dict[str, tuple[str, LaunchFlag]] = {}
    for setting, flag in flags.items():
        for spelling in flag.names:
            by_name[spelling] = (setting, flag)
    entry = rules.launcher[launcher_id]
    settings: list[tuple[str, str]] = []
    notes: list[str] = []
    ignored: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if entry.positional and not word.startswith("-") and entry.positional not in (k for k, _ in settings):
            settings.append((entry.positional, word))
            continue
        if name not in by_name:
            if word.startswith("-") and len(word) > 1:
                value = ""
                if not eq and i < len(args) and not args[i].startswith("-"):
                    value = f" {args[i]}"
                    i += 1
                notes.append(f"unknown flag {word}{value}: not read")
            else:
                notes.append(f"unknown argument {word!r}: not read")
            continue
        setting, flag = by_name[name]
        value = inline if eq else ""
        if flag.value == "switch":
            value = "on"
        elif flag.value == "fa":
            if not eq and i < len(args) and args[i].lower() in ("on", "off", "auto", "1", "0", "true", "false"):
                value = args[i]
                i += 1
            value = {"1": "on", "0": "off", "true": "on", "false": "off"}.get(value.lower(), value.lower() or "on")
        elif not eq:
            if i >= len(args):
                raise AdvisorError(f"--cmd: {name} needs a value", f"e.g. {name} {_example(flag.value)}")
            value = args[i]
            i += 1
            while flag.value == "words" and i < len(args) and not args[i].startswith("-"):  # argparse nargs="+"
                value += f" {args[i]}"
                i += 1
        if setting.startswith("ignored") or flag.why and not setting.startswith("unmodelled"):
            ignored.append(name)
            continue
        if setting.startswith("unmodelled"):
            notes.append(f"{name} {value if flag.value != 'switch' else ''}".rstrip() + f": {flag.why}")
            continue
        if flag.value == "list" and "," in value and setting in ("n_prompt", "n_gen"):
            notes.append(f"{name} {value}: a sweep; the answer is for the first value")
            value = value.split(",")[0]
        if flag.values:
            if value not in flag.values:
                notes.append(f"{name} {value}: a value the advisor does not model; not read "
                             f"(it reads {', '.join(flag.values)})")
                continue
            value = flag.values[value]
        settings.append((setting, value))
    given = {k for k, _ in settings}
    settings += [(k, v) for k, v in entry.defaults.items() if k not in given]
    return ParsedCommand(launcher_id, entry.runtime, tuple(settings), tuple(notes), tuple(ignored),
                         declared=tuple(flags) + ((entry.positional,) if entry.positional else ()))


def _example(kind: str) -> str:
    return {"int": "8192", "float": "0.9", "list": "3,1", "path": "model.gguf", "layers": "99"}.get(kind, "VALUE")


def _int(parsed: ParsedCommand, name: str, lo: int, hi: int) -> int | None:
    """A whole-number setting the option table does not declare (a count of layers, the whole cache)."""
    text = parsed.get(name)
    if text is None:
        return None
    from advisor.numbers import parse_int

    return parse_int(text, f"--cmd {name}", lo, hi, suffixes=True)


def _setting(parsed: ParsedCommand, name: str, d):
    """Setting `name` as option `d` of the option table takes it, within its bounds (None: not in the command)."""
    text = parsed.get(name)
    if text is None:
        return None
    from advisor.engine.optiontable import parse

    return parse(d, text, f"--cmd {name}")


# -ot patterns come from the user's command line and are matched against every expert tensor name: RE2
# matches in time linear in the name (Python's re backtracks: `(a+)+$` took 3 s on a 25-character name),
# so a pathological pattern cannot hang the answer. RE2 lacks backreferences and lookaround, which
# llama.cpp's tensor-override patterns do not use; such a pattern is refused with the reason.
# Imported on first use: only a --cmd with -ot needs it, not every answer's start-up.
@cache
def _re2():
    import re2

    options = re2.Options()
    options.log_errors = False
    return re2, options


def expert_layers_from_overrides(patterns: list[str], n_layers: int) -> tuple[int, ...] | None:
    """The layers whose routed-expert tensors `-ot REGEX=CPU` patterns send to system RAM (each pattern
    matched against llama.cpp's tensor names as llama.cpp matches them: a search, first match wins)."""
    if not patterns:
        return None
    return tuple(il for il, buffer in expert_overrides(patterns, n_layers).items() if buffer.startswith("CPU"))


def expert_gpus_from_overrides(patterns: list[str], n_layers: int) -> dict[int, int]:
    """Layer -> GPU index for the routed experts `-ot REGEX=CUDA1` (any backend's device name ending in its
    index: CUDA1, ROCm1, Vulkan1, SYCL1) sends to a named GPU."""
    found = {}
    for il, buffer in expert_overrides(patterns, n_layers).items():
        m = re.fullmatch(r"(CUDA|ROCM|VULKAN|SYCL|MTL|METAL)(\d{1,4})", buffer)
        if m:
            found[il] = int(m.group(2))
    return found


def expert_overrides(patterns: list[str], n_layers: int) -> dict[int, str]:
    """Layer -> the buffer (upper case) the first `-ot` pattern matching one of its routed-expert tensors names."""
    rules = []
    for text in patterns:
        if len(text) > MAX_OVERRIDE_CHARS:
            raise AdvisorError("--cmd: an -ot pattern is too long", f"use at most {MAX_OVERRIDE_CHARS} characters")
        for part in text.split(","):
            regex, eq, buffer = part.rpartition("=")
            if not eq or not regex:
                raise AdvisorError(f"--cmd: -ot {part!r} is not PATTERN=BUFFER", "e.g. -ot exps=CPU")
            re2, options = _re2()
            try:
                rules.append((re2.compile(regex, options=options), buffer.strip().upper()))
            except re2.error as exc:
                why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
                raise AdvisorError(f"--cmd: -ot {regex!r} is not a regular expression the advisor reads ({why})",
                                   "e.g. -ot 'blk\\.(1[0-9])\\.ffn_.*_exps\\.=CPU'") from None
    found = {}
    for il in range(n_layers):
        names = [f"blk.{il}.{t}.weight" for t in _EXPERT_TENSORS]
        for regex, buffer in rules:
            if any(regex.search(nm) for nm in names):
                found[il] = buffer
                break
    return found


def quant_in_name(file_name: str, quant_ids: list[str]) -> tuple[str, str | None]:
    """(`model part`, `quant id`) of a GGUF file name like `Qwen3-235B-A22B-Q4_K_M.gguf` or
    `gpt-oss-120b-mxfp4-00001-of-00003.gguf` (the quant: the longest id the name ends with)."""
    stem = file_name.rsplit("/", 1)[-1]
    stem = re.sub(r"\.gguf$", "", stem, flags=re.IGNORECASE)
    stem = re.sub(r"-\d{5}-of-\d{5}$", "", stem)
    lower = stem.lower()
    for q in sorted(quant_ids, key=len, reverse=True):
        ql = q.lower()
        if lower.endswith(ql) and (len(lower) == len(ql) or lower[-len(ql) - 1] in "-._"):
            return stem[: -len(ql) - 1] if len(lower) > len(ql) else stem, q
    return stem, None


@record
class CommandTarget(Record):
    """What the `--cmd` reader needs to know of the model and rig the command line runs."""

    n_layers: int
    moe_layers: tuple[int, ...]
    """Layers with routed experts (what -ot / --n-cpu-moe can move)."""
    max_context: int
    n_gpus: int
    quant: str | None = None
    row_split: bool = False
    """The runtime has `-sm row` as a mode of its own besides `-sm tensor` (llama.cpp)."""


def options_from_command(parsed: ParsedCommand, base, target: CommandTarget):
    """The engine's Options for exactly the parsed configuration (`base` supplies what a command line
    cannot say: the workload, the prompt length unless llama-bench gives it)."""
    from dataclasses import replace

    changes: dict = {"runtime": parsed.runtime, "command_notes": parsed.notes}
    if target.quant:
        changes["quant"] = target.quant
    _context_settings(parsed, target, changes)
    _number_settings(parsed, changes)
    _cache_settings(parsed, changes)
    _vision_settings(parsed, changes)
    parsed = _split_settings(parsed, target, changes)
    _expert_settings(parsed, target, changes)
    return replace(base, **changes)


def _context_settings(parsed: ParsedCommand, target: CommandTarget, changes: dict) -> None:
    """Sequences (-np), a unified cache, the context per sequence and the prompt length."""
    from advisor.engine.optiontable import MAX_TOKENS, option

    np_ = _setting(parsed, "parallel", option("concurrency"))
    if "parallel" in parsed.declared or not parsed.declared:
        changes["concurrency"] = np_ = np_ or 1
    else:  # a paged server: requests at once are the workload's (--concurrency), not the command's
        np_ = 1
    if "kv_unified" in parsed.declared or not parsed.declared:
        changes["kv_unified"] = parsed.get("kv_unified") is not None
    total = _int(parsed, "ctx_total", 0, MAX_TOKENS)
    per_seq = next((v for v in (_setting(parsed, name, option("ctx")) for name in option("ctx").cmd)
                    if v is not None), None)
    n_prompt = _int(parsed, "n_prompt", 0, MAX_TOKENS)
    n_gen = _int(parsed, "n_gen", 0, MAX_TOKENS)
    if per_seq is not None:
        changes["ctx"] = per_seq
    elif total:
        changes["ctx"] = max(total // np_, 1)
    elif n_prompt is not None or n_gen is not None:  # llama-bench: one sequence of prompt + generated tokens
        changes["ctx"] = max((n_prompt or 0) + (n_gen if n_gen is not None else 128), 1)
    else:  # -c 0 or none: llama.cpp takes the model's training context
        changes["ctx"] = max(target.max_context // np_, 1)
    if n_prompt:
        changes["prompt_tokens"] = n_prompt


def _number_settings(parsed: ParsedCommand, changes: dict) -> None:
    """The serving numbers and the micro-batch, as the option table bounds them (advisor/engine/optiontable.py)."""
    from advisor.engine.optiontable import OPTIONS

    for d in OPTIONS:
        if d.group == "serving" or d.dest == "ubatch":
            value = next((v for v in (_setting(parsed, name, d) for name in d.cmd) if v is not None), None)
            if value is not None:
                changes[d.dest] = value


def _cache_settings(parsed: ParsedCommand, changes: dict) -> None:
    """Flash attention, the K/V cache types, eager mode, a full-context sliding window (the choices the option
    table declares for --flash-attn and --kv-cache)."""
    from advisor.engine.optiontable import option

    fa, kv_types = parsed.get("flash_attn"), option("kv_cache").choices
    if fa is not None:
        if fa not in option("flash_attn").choices:
            raise AdvisorError(f"--cmd: flash attention {fa!r}", f"use {', '.join(option('flash_attn').choices)}")
        changes["flash_attn"] = fa
    ctk, ctv = parsed.get("cache_type_k"), parsed.get("cache_type_v")
    if ctk or ctv:
        k, v = (ctk or "f16").lower(), (ctv or "f16").lower()
        if k != v:
            raise AdvisorError(f"--cmd: K cache {k} and V cache {v} differ",
                               "the advisor plans one type for both; give the same -ctk and -ctv")
        changes["kv_type"] = k
    if parsed.get("kv_cache_dtype") is not None:
        changes["kv_type"] = parsed.get("kv_cache_dtype")
    if changes.get("kv_type") is not None and changes["kv_type"] not in kv_types:
        raise AdvisorError(f"--cmd: KV cache type {changes['kv_type']!r}", f"use one of: {', '.join(kv_types)}")
    if parsed.get("eager") is not None:
        changes["enforce_eager"] = True
    if parsed.get("sync_scheduling") is not None:
        changes["no_async_scheduling"] = True
    if parsed.get("swa_full") is not None:
        changes["swa_full"] = True


def _vision_settings(parsed: ParsedCommand, changes: dict) -> None:
    """The mmproj file, where it sits, and how many images a prompt takes (0: text only)."""
    from advisor.engine.optiontable import option, parse

    if parsed.get("mmproj") is not None:
        changes["mmproj"] = parsed.get("mmproj")
    if parsed.get("no_mmproj_offload") is not None:
        changes["mmproj_offload"] = False
    if parsed.get("limit_mm") is not None:
        changes["mm_limit"] = parse(option("limit_mm_per_prompt"), parsed.get("limit_mm"),
                                    "--cmd --limit-mm-per-prompt")
    if parsed.get("no_mmproj") is not None or parsed.get("language_model_only") is not None:
        changes["mm_limit"] = 0


def _main_gpu(parsed: ParsedCommand, n_gpus: int) -> int | None:
    """-mg/--main-gpu (llama.cpp common/arg.cpp): "the GPU to use for the model (with split-mode = none), or for
    intermediate results and KV (with split-mode = row) (default: 0)"."""
    mg_text = parsed.get("main_gpu")
    if mg_text is None:
        return None
    try:
        main_gpu = int(mg_text.strip()[:12])
    except ValueError:
        raise AdvisorError(f"--cmd: -mg {mg_text[:40]!r} is not a GPU index", "e.g. -mg 0") from None
    if not 0 <= main_gpu < max(n_gpus, 1):
        raise AdvisorError(f"--cmd: -mg {main_gpu} names no GPU of this rig ({n_gpus} GPU{'s' if n_gpus != 1 else ''}"
                           f", numbered from 0)", f"give -mg 0 to {max(n_gpus, 1) - 1}, or describe the rig with --gpu")
    return main_gpu


def _split_settings(parsed: ParsedCommand, target: CommandTarget, changes: dict) -> ParsedCommand:
    """-ngl, -sm (none: one GPU, -mg), -mg's notes and -ts; returns the command without a -ts that -sm none drops."""
    from dataclasses import replace

    ngl = parsed.get("n_gpu_layers")
    if ngl is not None and ngl.lower() not in ("auto", "-1"):
        changes["n_gpu_layers"] = target.n_layers + 1 if ngl.lower() == "all" else \
            min(_int(parsed, "n_gpu_layers", 0, 1_000_000) or 0, target.n_layers + 1)
    mode = (parsed.get("split_mode") or "").lower()
    main_gpu = _main_gpu(parsed, target.n_gpus)
    notes = list(changes["command_notes"])
    if main_gpu and mode != "none":
        # -sm tensor's meta device has no main GPU either: -mg is named for none and row only
        notes.append(f"-mg {main_gpu}: " + (f"with -sm {mode} llama.cpp keeps intermediate results on the main GPU; "
                                            "the advisor plans them on GPU 0" if mode in ("row", "graph")
                                            else f"with {'-sm tensor' if mode == 'tensor' else 'a layer split'} the "
                                                 f"main GPU places nothing: no effect"))
    if mode == "none" and target.n_gpus > 1:  # one GPU of the rig: all layers, KV and buffers on the main GPU
        if parsed.get("tensor_split") is not None:
            notes.append(f"-ts {parsed.get('tensor_split')}: not used with -sm none (one GPU only)")
        changes["tensor_split"] = tuple(1.0 if i == (main_gpu or 0) else 0.0 for i in range(target.n_gpus))
        changes["split"] = "layer"
        mode = ""
        parsed = replace(parsed, settings=tuple((k, v) for k, v in parsed.settings if k != "tensor_split"))
    changes["command_notes"] = tuple(notes)
    if mode:
        if mode not in ("layer", "row", "tensor", "none", "graph"):
            raise AdvisorError(f"--cmd: split mode {mode!r}", "use layer, tensor, row or none")
        changes["split"] = "row" if mode == "row" and target.row_split else \
            "tensor" if mode in ("row", "graph", "tensor") else "layer"
    if parsed.get("tensor_split") is not None:
        changes["tensor_split"] = _tensor_split(parsed.get("tensor_split"), target.n_gpus)
    return parsed


def _tensor_split(ts: str, n_gpus: int) -> tuple[float, ...]:
    try:
        parts = tuple(float(x) for x in re.split(r"[,/]", ts) if x.strip())
    except ValueError:
        raise AdvisorError(f"--cmd: -ts {ts!r} is not a list of numbers", "e.g. -ts 3,1") from None
    if not parts or any(not 0 <= x < 1e6 for x in parts) or sum(parts) <= 0:
        raise AdvisorError(f"--cmd: -ts {ts!r}", "give one non-negative share per GPU, e.g. -ts 3,1")
    parts = parts + (0.0,) * max(n_gpus - len(parts), 0)
    if len(parts) > n_gpus:
        raise AdvisorError(f"--cmd: -ts {ts} names {len(parts)} GPUs; the rig has {n_gpus}",
                           "describe the rig with --gpu")
    return parts


def _expert_settings(parsed: ParsedCommand, target: CommandTarget, changes: dict) -> None:
    """Routed experts kept in system RAM: --cpu-moe, --n-cpu-moe N, -ot ...exps=CPU."""
    cpu: set[int] | None = None
    if parsed.get("cpu_moe") is not None:
        cpu = set(target.moe_layers)
    n_cpu_moe = _int(parsed, "n_cpu_moe", 0, 1_000_000)
    if n_cpu_moe is not None:
        cpu = (cpu or set()) | set(range(min(n_cpu_moe, target.n_layers)))
    over = expert_layers_from_overrides(parsed.all("override_tensor"), target.n_layers)
    if over is not None:
        cpu = (cpu or set()) | set(over)
    if cpu is not None:
        changes["cpu_expert_layers"] = tuple(sorted(il for il in cpu if il in set(target.moe_layers)))
        changes.setdefault("n_gpu_layers", target.n_layers + 1)
    changes.update(_expert_gpus(parsed, target))


def _expert_gpus(parsed: ParsedCommand, target: CommandTarget) -> dict:
    """The Options change for `-ot ...exps=CUDA1`: (layer, GPU) pairs of the MoE layers sent to a named GPU."""
    on_gpu = expert_gpus_from_overrides(parsed.all("override_tensor"), target.n_layers)
    if any(g >= target.n_gpus for g in on_gpu.values()):
        raise AdvisorError(f"--cmd: -ot names GPU {max(on_gpu.values())}; the rig has {target.n_gpus}",
                           "describe the rig with --gpu (GPUs count from 0: CUDA0, CUDA1, ...)")
    moe = set(target.moe_layers)
    return {"gpu_expert_layers": tuple(sorted((il, g) for il, g in on_gpu.items() if il in moe))} if on_gpu else {}


def repo_checkpoint(checkpoints, repo: str):
    """The rules/checkpoints.toml entry of a Hugging Face repo id (any letter case), or None."""
    if checkpoints is None or "/" not in repo:
        return None
    key = repo.strip().lower()
    return next((c for r, c in checkpoints.repo.items() if r.lower() == key), None)


def weights_source(rules: LaunchRules, checkpoints, launcher_id: str, model_id: str,
                   quant_id: str, base: str | None = None) -> tuple[str, str | None, str]:
    """How a launcher that downloads a model by repo gets this model's weights in this quant:
    (`checkpoint`, the quantized repo, its source) when rules/checkpoints.toml lists one; (`at_load`,
    None, "") when the program quantizes the 16-bit checkpoint itself (its `quantize_at_load`);
    (`dense`, None, "") for 16-bit weights; (`missing`, None, "") when a quantized checkpoint must be
    supplied; ("", None, "") for launchers that take no repo (llama.cpp, Ollama). `base`: the repo the command
    names otherwise (model_reference); when rules/checkpoints.toml lists it as a checkpoint in another format
    (DeepSeek V3's official repo is FP8), neither its 16-bit weights nor a quantization at load exist there."""
    entry = rules.launcher.get(launcher_id)
    flags = launcher_flags(rules, launcher_id) if entry is not None else {}
    # a server given a Hugging Face repo of safetensors weights has a --quantization flag (vLLM, SGLang); a
    # program that takes a repo only to fetch a GGUF (llama.cpp -hf) has none
    if entry is None or "hf_repo" not in flags or "quantization" not in flags:
        return "", None, ""
    for repo, c in (checkpoints.repo.items() if checkpoints is not None else ()):
        if c.model == model_id and c.quant == quant_id and c.offered:
            return "checkpoint", repo, c.source
    if checkpoints is not None and base in checkpoints.repo:
        return "missing", None, ""  # the base repo is itself quantized, in another format than this one
    if "dtype" in flags and quant_id in flags["dtype"].values.values():
        return "dense", None, ""
    if quant_id in entry.quantize_at_load:
        return "at_load", None, ""
    return "missing", None, ""


def launch_for(sc, placement, placer, local=None) -> Launch | None:
    """The command that realises this placement of the Scenario `sc` with the first launcher
    rules/launch.toml declares for its runtime (None: it has none yet). `local`: the LoadedModel read from
    files, whose `path` (a GGUF on this machine), `url` (a GGUF URL, given by `model_url` when the launcher
    has it), `ollama` (an Ollama `NAME:TAG`, a Modelfile's `FROM`) and `hf_repo`/`hf_file` (a GGUF read from
    the Hub, which a launcher that runs a model file is given by repo, `-hf`, when it can be) say how a
    program is given it; a model no program can be given as read is said in `note`."""
    rules, rt, checkpoints = sc.rules.launch, sc.runtime, sc.rules.checkpoints
    options, ctx = sc.options, sc.ctx
    model_file = local.path if local is not None and local.path else f"{sc.model.id}-{sc.quant.id}.gguf"
    model_ref = model_file if local is not None else None
    hf_gguf = (local.hf_repo, local.hf_file) if local is not None else None
    ids = launchers_for(rules, rt.id)
    if not placement.runs:
        return None
    if not ids:
        return across_machines(sc, None) if sc.rig.nodes > 1 else None
    values = settings_for(sc, placement, placer, model_file)
    model, quant = placer.model, placer.quant
    values.update(serving_settings(placer, options, ctx, model_ref=model_ref or model_reference(model, quant)))
    if model_ref is None:  # a catalog model: a quantized answer runs from its quantized checkpoint
        how, repo, _ = weights_source(rules, checkpoints, ids[0], model.id, quant.id, model_reference(model, quant))
        if how == "checkpoint":
            values["hf_repo"], values["quantization"] = repo, None  # the program reads the method from it
        elif how == "missing":  # --quantization on the 16-bit repo does not load: no command to print
            return Launch(rt.id, ids[0], "", note=f"no {quant.id} checkpoint of {model.name} is known "
                                                  f"(rules/checkpoints.toml): supply one and name it as the model")
    values.update(vision_settings(placer.vision, options))
    if "model" in _emit_order(rules, ids[0]):  # a program that runs a file: given a repo only for a Hub GGUF
        flags = launcher_flags(rules, ids[0])
        by_repo = bool(hf_gguf and hf_gguf[0]) and "hf_repo" in _emit_order(rules, ids[0]) and \
            (not hf_gguf[1] or "hf_file" in flags)
        values["hf_repo"] = hf_gguf[0] if by_repo else None
        values["hf_file"] = hf_gguf[1] or None if by_repo else None
        if by_repo:
            values["model"] = None
            # -hf fetches the repo's mmproj too: an answer for text only says --no-mmproj
            values["no_mmproj"] = "" if options.mm_limit == 0 else None
        elif local is not None and not local.path:
            url, name = local.url, local.ollama
            if url and "model_url" in _emit_order(rules, ids[0]) and "model_url" in flags:
                values["model"], values["model_url"] = None, url  # the program downloads it (-mu URL)
            elif name and rules.launcher[ids[0]].style != "modelfile":
                return Launch(rt.id, ids[0], "", note=_not_local_note(rules, name))
    if rules.launcher[ids[0]].style == "modelfile" and local is not None and local.ollama:
        values["model"] = local.ollama  # FROM NAME:TAG: the Ollama model itself, with these settings
    elif rules.launcher[ids[0]].style == "modelfile" and local is not None and not local.path:
        where = local.url or (f"{hf_gguf[0]}" + (f" ({hf_gguf[1]})" if hf_gguf[1] else "")
                                               if hf_gguf and hf_gguf[0] else "the model's GGUF file")
        return Launch(rt.id, ids[0], "", note=f"a Modelfile's FROM takes a GGUF file on this machine or an Ollama "
                                               f"model name: download {where} and name its path in FROM")
    return across_machines(sc, render(rules, ids[0], values))


def launch_steps(launch: Launch) -> list[tuple[NodeLaunch, str]]:
    """Every machine's commands in the order to start them (Launch.order: `workers_first`, `head_first`: the
    first machine's first command, then the others, then the rest; `any`)."""
    if not launch.nodes:
        return []
    head, workers = launch.nodes[0], launch.nodes[1:]
    later = [(w, c) for w in workers for c in w.commands]
    own = [(head, c) for c in head.commands]
    if launch.order == "workers_first":
        return later + own
    if launch.order == "head_first":
        return own[:1] + later + own[1:]
    return own + later


def across_machines(sc, launch: Launch | None) -> Launch | None:
    """GPUs in several machines: the runtime's bring-up on each (rules/runtimes.toml [runtime.multinode]), with
    the answer's command (`{command}`) run from the first machine. `launch.command` becomes the first machine's
    command that serves the model; `nodes` lists every machine's commands. A runtime without a launcher of
    its own (exo) is started by its bring-up alone."""
    rig, mn = sc.rig, sc.runtime.multinode
    if rig.nodes < 2 or mn.split == "none" or (launch is not None and not launch.command):
        return launch
    ids = rig.node_ids
    head = rig.node(ids[0]).address
    split = "tensor" if sc.options.split == "tensor" and mn.tensor else "layer"
    net = sc.rig.network or "1gbe"
    values = {"command": launch.command if launch else "", "port": str(mn.port), "head": head,
              "workers": ",".join(f"{rig.node(n).address}:{mn.port}" for n in ids[1:]), "nodes": str(len(ids)),
              "model": model_reference(sc.model, sc.quant), "sharding": mn.sharding.get(split, ""),
              "transport": mn.transport.get("rdma" if net in sc.rules.interconnect.network.rdma else "tcp", "")}

    def fill(template: str, rank: int) -> str:
        out = template
        for key, value in {**values, "rank": str(rank)}.items():
            out = out.replace("{" + key + "}", value)
        return out

    nodes = [NodeLaunch(ids[0], head, "head", tuple(fill(t, 0) for t in mn.head))]
    nodes += [NodeLaunch(n, rig.node(n).address, "worker", tuple(fill(t, k) for t in mn.worker))
              for k, n in enumerate(ids[1:], 1)]
    serve = next((fill(t, 0) for t in mn.head if "{command}" in t), fill(mn.head[-1], 0) if mn.head else "")
    rt = sc.runtime
    base = launch or Launch(rt.id, rt.id, "")  # no launcher of its own: its bring-up is the launch
    return replace(base, command=serve, nodes=tuple(nodes), order=mn.order)


def _not_local_note(rules: LaunchRules, name: str) -> str:
    """An Ollama library model answered for a runtime that runs a file: the file is not on this machine."""
    ollama = next((e for e in rules.launcher.values() if e.style == "modelfile"), None)
    if ollama is None:
        return f"{name} is an Ollama library model that is not on this machine: no file to give the program"
    return (f"{name} is an Ollama library model that is not in this machine's Ollama store: `{ollama.program} pull "
            f"{name}` puts its GGUF there (ask again then for this command with its file), and `{ollama.program} run "
            f"{name}` is the command for the Ollama runtime (--runtime {ollama.runtime})")


def vision_settings(vision, options) -> dict[str, str | None]:
    """The vision tower's settings: the mmproj file the answer loads (and where), the image limit given."""
    loads = vision is not None and vision.tower.source == "mmproj"
    mmproj = (vision.tower.path or None) if loads else None  # "": the program fetches it with the model (-hf)
    limit = options.mm_limit
    return {
        "mmproj": mmproj,
        "no_mmproj_offload": "" if loads and not options.mmproj_offload else None,
        "limit_mm": '{"image":%d}' % limit if limit is not None else None,
    }


def model_reference(model, quant) -> str:
    """What a server that downloads its weights is given: the Hugging Face repo id the catalog lists for
    the model (an `ORG/NAME` alias; one that ends with the quant's id first), else the catalog id."""
    repos = [a for a in getattr(model, "aliases", ()) if "/" in a and ":" not in a and " " not in a]
    quant_id = quant.id.lower()
    for repo in repos:
        if repo.lower().endswith(("-" + quant_id, "_" + quant_id)):
            return repo
    return repos[0] if repos else model.id


def serving_settings(placer, options, ctx: int, *, model_ref: str) -> dict[str, str | None]:
    """A paged server's settings for this answer: the model, its quantization, the context per request
    (when less than the model's), parallel sizes over more than one GPU and the options the user set."""
    tp, pp = placer.parallel_sizes() if hasattr(placer, "parallel_sizes") else (1, 1)
    return {
        "hf_repo": model_ref,
        "model_folder": model_ref.rstrip("/").rsplit("/", 1)[-1],  # where downloaders put a repo: its last part
        "quantization": placer.quant.id,
        "dtype": placer.quant.id,
        "max_model_len": str(ctx) if ctx != placer.model.max_context else None,
        "tensor_parallel": str(tp) if tp > 1 else None,
        "pipeline_parallel": str(pp) if pp > 1 else None,
        "memory_fraction": f"{options.memory_fraction:g}" if options.memory_fraction is not None else None,
        "kv_cache_dtype": options.kv_type if options.kv_type != "f16" else None,
        "max_num_seqs": str(options.max_num_seqs) if options.max_num_seqs else None,
        "max_num_batched_tokens": str(options.max_num_batched_tokens) if options.max_num_batched_tokens else None,
        "eager": "" if options.enforce_eager else None,
        "sync_scheduling": "" if options.no_async_scheduling else None,
        "cpu_offload_gb": f"{options.cpu_offload_gb:g}" if options.cpu_offload_gb else None,
    }
