"""`advisor models|gpus|runtimes|rules` (what the advisor knows) and `advisor catalog validate|path|schema`."""

from __future__ import annotations

import argparse

from advisor.commands.output import EXIT_NO, EXIT_YES, emit, emit_json, fmt_of, wrapped


def cmd_list(args: argparse.Namespace) -> int:
    """A catalog table (models, GPUs, runtimes), searched from a word boundary: `m2` finds the M2s, not `sxm2`."""
    from advisor.catalog.load import as_dict, load_catalog
    from advisor.catalog.resolve import normal
    from advisor.catalog.types import GIB
    from advisor.report.document import format_table

    catalog = load_catalog()
    entries = {"models": catalog.models, "gpus": catalog.gpus, "runtimes": catalog.runtimes,
               "quants": catalog.quants}[args.command]
    rows = list(entries.values())
    if args.query:
        q = "-" + normal(args.query)
        rows = [e for e in rows if any(q in "-" + normal(n) for n in (e.id, getattr(e, "name", e.id), *getattr(e, "aliases", ())))]
    if args.command == "quants":
        return _quants(args, rows)
    if fmt_of(args) == "json":
        out = []
        for e in rows:
            d = as_dict(e)
            if args.command == "gpus":
                d.update(vram_bytes=e.vram_bytes, nvlink_gb_s=e.nvlink_gb_s,
                         price_usd=e.price.usd if e.price else None)
            out.append(d)
        emit_json(out)
        return EXIT_YES if rows else EXIT_NO
    if args.command == "models":
        header = ("id", "params", "active", "layers", "ctx", "name")
        table = [(m.id, f"{m.params_total / 1e9:.1f}B", f"{m.params_active / 1e9:.1f}B", str(m.layers),
                  str(m.max_context), m.name) for m in rows]
    elif args.command == "gpus":
        header = ("id", "memory", "GB/s", "TFLOPS", "link", "price", "name")
        table = [(g.id, f"{g.vram_bytes / GIB:.0f}GB", f"{g.memory_bandwidth_gb_s:.0f}", f"{g.fp16_tflops:.1f}",
                  f"NVL{g.nvlink.generation}" if g.nvlink else (f"PCIe{g.pcie_gen}x{g.pcie_lanes}" if g.pcie_gen else "SoC"),
                  (f"${g.price.usd:,.0f}" + (" used" if g.price.condition == "used" else "")) if g.price else "—",
                  g.name) for g in rows]
    else:
        header = ("id", "formats", "split", "offload", "KV cache", "name")
        table = [(r.id, ",".join(r.formats), r.default_split + ("/tensor" if r.supports_tensor_parallel and
                                                                r.default_split != "tensor" else ""),
                  "yes" if r.supports_cpu_offload else "no", ",".join(r.kv_types),
                  r.name + (f" (like {r.like})" if r.like else "")) for r in rows]
    emit(format_table(header, table, markdown=fmt_of(args) == "markdown", width=_width()))
    return EXIT_YES if rows else EXIT_NO


def _width() -> int:
    from advisor.report.wrap import terminal_width

    return terminal_width()


PARAMETRIC = (
    ("exl2-<bpw>", "exl2", "the number is the bits per weight of the linear layers (ExLlamaV2 branch names, "
                           "quantization_config bits); embeddings 16-bit", ("exllamav2",)),
    ("exl3-<bpw>", "exl3", "the same for ExLlamaV3's EXL3 (1 to 8 bits; output head at --head_bits, 6 by "
                           "default; embeddings 16-bit)", ("exllamav3",)),
)
FILE_ONLY = ("UD-Q4_K_XL, UD-Q2_K_XL, Q4_K_XL and other *_XL/*_L names: per-model mixes of tensor types "
             "(Unsloth Dynamic, uploaders' variants) with no one bits-per-weight figure; read from the file "
             "(ORG/NAME-GGUF:UD-Q4_K_XL), which gives their exact bytes and keeps their name")


def _quants(args: argparse.Namespace, rows: list) -> int:
    """`advisor quants`: every quantization with its bits per weight, quality loss and runtimes."""
    from advisor.catalog.load import as_dict
    from advisor.report.document import format_table

    if fmt_of(args) == "json":
        out = [as_dict(q) for q in rows]
        if not args.query:
            out += [{"id": i, "format": f, "bits_per_weight": None, "bpw_basis": b, "runtimes": list(r),
                     "parametric": True} for i, f, b, r in PARAMETRIC]
        emit_json(out)
        return EXIT_YES if out else EXIT_NO
    header = ("id", "format", "bpw", "linear", "KLD", "ppl +%", "runtimes", "also called")
    table = [(q.id, q.format, f"{q.bits_per_weight:.2f}", f"{q.linear_bits:.3f}" if q.linear_bits else "—",
              f"{q.kld:.4f}" if q.kld is not None else "—",
              f"{q.ppl_delta_pct:.2f}" if q.ppl_delta_pct is not None else "—",
              ",".join(q.runtimes), ", ".join(q.aliases) or "") for q in rows]
    md = fmt_of(args) == "markdown"
    text = format_table(header, table, markdown=md, width=_width())
    if not args.query:
        text += ("\n\n" + "\n".join(f"{i:<11} {b}" for i, _, b, _ in PARAMETRIC) + "\n" + FILE_ONLY + "\n\n"
                 "bpw: whole file on Llama 3.1 8B (bigger models spend fewer: see each entry's bpw_basis); linear: bits of "
                 "every weight but the 16-bit embeddings where the format keeps those; KLD and ppl +%: against 16-bit on "
                 "Llama 3 8B (llama.cpp perplexity scoreboard), — where none is published on that basis. Sources: "
                 "`advisor quants --json` (bpw_basis, quality_basis), rules/quants.toml.")
    emit(text if md else wrapped(text))
    return EXIT_YES if rows else EXIT_NO


def cmd_rules(args: argparse.Namespace) -> int:
    """Every rule code the findings carry, with what it checks."""
    from advisor.engine.findings import REGISTRY
    from advisor.report.document import format_table

    rows = [d for d in REGISTRY if not args.query or args.query.upper() in d.code]
    if fmt_of(args) == "json":
        emit_json([{"code": d.code, "checks": d.summary} for d in rows])
    elif fmt_of(args) == "markdown":
        emit(format_table(("code", "checks"), [(d.code, d.summary) for d in rows], markdown=True))
    else:
        emit(wrapped("\n".join(f"{d.code:<7} {d.summary}" for d in rows)))
    return EXIT_YES if rows else EXIT_NO


def cmd_catalog(args: argparse.Namespace) -> int:
    from advisor.catalog import load

    if args.action == "add":
        from advisor.commands.catalog_add import cmd_add

        return cmd_add(args)
    if args.reference or args.id or args.name or args.alias or args.replace:
        from advisor.errors import AdvisorError

        raise AdvisorError(f"catalog {args.action} takes no reference or add options", "see `advisor catalog --help`")

    if args.action == "path":
        folder = load.user_dir()
        if fmt_of(args) == "json":
            db, rules = load.builtin_dirs()
            emit_json({"user_dir": str(folder), "builtin_hardware_db": str(db), "builtin_rules": str(rules)})
        else:
            emit(wrapped(f"{folder}\n(put *.toml files with [[gpu]], [[model]], [[quant]], [[runtime]] or [[preset]] "
                 f"tables there; entries override the built-in ones by id; set $ADVISOR_CONFIG_DIR to move it)"))
        return EXIT_YES
    if args.action == "schema":
        emit_json(load.schemas())
        return EXIT_YES
    problems = load.validate_all()
    if fmt_of(args) == "json":
        emit_json({"ok": not problems, "problems": problems})
    else:
        emit(wrapped("\n".join(problems)) if problems else "catalog OK: built-in and user files validate")
    return EXIT_NO if problems else EXIT_YES
