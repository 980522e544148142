"""Is the ask well formed: each option within the bounds and choices the option table declares
(advisor/engine/optiontable.py), the runtime known and having every option given, and the combinations a runtime
refuses. Every front end's Options pass here (the CLI, `--cmd`, the app, plan), so a value no parser saw is held
to the same bounds as a typed one.
"""

from __future__ import annotations

from advisor.catalog.types import Catalog, RuntimeSpec
from advisor.engine.options import Options
from advisor.engine.releases import at_release
from advisor.engine.optiontable import BY_FIELD, check_value, given
from advisor.errors import AdvisorError


def check_options(catalog: Catalog, options: Options) -> RuntimeSpec:
    """The runtime the options name, or one line and exit 2 (AdvisorError) saying what is wrong and what to use."""
    if options.runtime not in catalog.runtimes:
        raise AdvisorError(f"unknown runtime {options.runtime!r}", f"use one of: {', '.join(catalog.runtimes)}")
    runtime = at_release(catalog.runtimes[options.runtime], options.runtime_version)
    _check_table(catalog, runtime, options)
    if options.kv_type not in runtime.kv_types:
        raise AdvisorError(f"{runtime.name} has no {options.kv_type} KV cache",
                           f"use one of: {', '.join(runtime.kv_types)}")
    if options.split == "row" and not runtime.row_split:
        raise AdvisorError(f"{runtime.name} has no row split (-sm row)", "use --split layer or --split tensor")
    if options.flash_attn == "off" and options.kv_type != "f16" and runtime.kv_quant_needs_flash_attention:
        raise AdvisorError(f"{runtime.name} needs flash attention for a {options.kv_type} V cache",
                           "drop --flash-attn off, or use --kv-cache f16")
    _check_mmproj(catalog, runtime, options)
    _check_mix(catalog, options)
    return runtime


def _check_mix(catalog: Catalog, options: Options) -> None:
    """A request mix names one of rules/traffic.toml's and stands in for the output length."""
    mixes = catalog.rules.traffic.mix
    if options.request_mix is None:
        return
    if options.request_mix not in mixes:
        raise AdvisorError(f"unknown request mix {options.request_mix!r}", f"use one of: {', '.join(mixes)}")
    if options.output_tokens is not None:
        raise AdvisorError("--request-mix gives each request its prompt and output length",
                           "drop --output-tokens (or --request-mix)")


def _check_table(catalog: Catalog, runtime: RuntimeSpec, options: Options) -> None:
    """Every field an option sets: one of its choices, within its bounds, and taken by this runtime."""
    for field, d in BY_FIELD.items():
        value = getattr(options, field)
        if value is None:
            continue
        if d.choices and value not in d.choices:
            raise AdvisorError(f"unknown {d.noun} {value!r}", f"use one of: {', '.join(d.choices)}")
        if d.hi is not None:
            check_value(d, value)
        if d.runtime_option and given(d, value) and d.runtime_option not in runtime.option_names:
            takers = [r.id for r in catalog.runtimes.values() if d.runtime_option in r.option_names]
            raise AdvisorError(f"{runtime.name} has no option {d.flags[0]}",
                               f"runtimes that have one: {', '.join(takers)}")


def _check_mmproj(catalog: Catalog, runtime: RuntimeSpec, options: Options) -> None:
    """An mmproj file needs a runtime that loads one, and its header read at the edge."""
    if options.mm_limit == 0 or not (options.mmproj or (options.vision_tower is not None
                                                        and options.vision_tower.source == "mmproj")):
        return
    vis = catalog.rules.vision.by_runtime.get(runtime.vision_terms)
    if vis is None or "mmproj" not in vis.loads:
        takers = [r.id for r in catalog.runtimes.values()
                  if "mmproj" in getattr(catalog.rules.vision.by_runtime.get(r.vision_terms), "loads", ())]
        raise AdvisorError(f"{runtime.name} does not load an mmproj file (--mmproj)",
                           f"runtimes that do: {', '.join(takers)}; {runtime.name} reads the vision tower "
                           f"from the model's own checkpoint" if takers else "drop --mmproj")
    if options.vision_tower is None:
        raise AdvisorError(f"--mmproj {options.mmproj}: the file was not read", "pass it on the command line")
