"""`advisor detect`: the local hardware as the advisor sees it (or a saved capture with --from)."""

from __future__ import annotations

import argparse

from advisor.commands.output import EXIT_YES, emit_json, emit_text, fmt_of


def _read_from(path, catalog):
    """A saved `nvidia-smi -q -x` XML, or a rig file (TOML), as a Detection."""
    from advisor.files import open_regular
    from advisor.probe.smi_xml import is_xml, read_smi_xml
    from advisor.probe.types import Detection, DetectedGpu, PcieLink, SystemInfo

    with open_regular(path, "pass an `nvidia-smi -q -x` XML or a rig file") as f:
        head = f.read(512)
    if is_xml(head):
        return read_smi_xml(path)
    from advisor.probe.rigfile import load_rig

    rig = load_rig(catalog, path)
    gpus = tuple(DetectedGpu(index=g.index, name=g.name or g.spec.name, vram_bytes=g.spec.vram_bytes,
                             vram_free_bytes=g.capacity_bytes if g.capacity_basis == "free" else None,
                             pcie=PcieLink(gen_max=g.pcie_gen, width_max=g.pcie_lanes),
                             nvlink_peers=tuple(sorted({b if a == g.index else a for a, b in rig.nvlink_pairs
                                                        if g.index in (a, b)})),
                             unified_memory=g.spec.unified_memory)
                 for g in rig.gpus)
    p2p = None
    if rig.p2p is not None and len(gpus) > 1:
        p2p = tuple(tuple("X" if i == j else ("OK" if rig.p2p else "NS") for j in range(len(gpus)))
                    for i in range(len(gpus)))
    return Detection(source="rig-file", gpus=gpus, topology=rig.topology, p2p=p2p,
                     system=SystemInfo(ram_bytes=rig.ram_bytes, cpu=rig.cpu or None,
                                       ram_bandwidth_gb_s=rig.ram_bandwidth_gb_s,
                                       ram_bandwidth_basis=rig.ram_bandwidth_basis))


def _measured(det, from_file: bool):
    """--measure: the RAM bandwidth of this machine by a bounded copy test (advisor/probe/system.py), which
    the rig (and --save's file, with how it was measured) takes when SMBIOS gave none; beside it otherwise."""
    from dataclasses import replace

    from advisor.commands.output import say
    from advisor.errors import AdvisorError
    from advisor.probe.system import measure_ram_bandwidth

    if from_file:
        raise AdvisorError("--measure measures this machine; --from reads a file", "drop one of them")
    gb_s, basis = measure_ram_bandwidth()
    if det.system.ram_bandwidth_gb_s:
        say(f"advisor detect: copy test {gb_s:g} GB/s ({basis}); kept the SMBIOS figure "
            f"{det.system.ram_bandwidth_gb_s:g} GB/s, the peak the fitted CPU fraction is a share of")
        return det
    return replace(det, system=replace(det.system, ram_bandwidth_gb_s=gb_s, ram_bandwidth_basis=basis))


def cmd_detect(args: argparse.Namespace) -> int:
    from advisor.catalog.load import load_catalog
    from advisor.catalog.types import GIB
    from advisor.probe.build import match_gpu, rig_from_detection

    catalog = load_catalog()
    if args.source is not None:
        det = _read_from(args.source, catalog)
    else:
        from advisor.probe import detect

        det = detect()
    if getattr(args, "measure", False):
        det = _measured(det, args.source is not None)
    ids = {g.name: match_gpu(catalog, g.name, g.vram_bytes) for g in det.gpus}
    if args.save is not None:
        from advisor.probe.rigfile import save_rig

        save_rig(catalog, args.save, rig_from_detection(catalog, det),
                 name=f"saved by advisor detect from {det.source}", source=args.source,
                 force=getattr(args, "force", False))
    if fmt_of(args) == "json":
        emit_json(det.to_json(catalog_id=lambda name: ids.get(name)))
    else:
        lines = [f"source: {det.source}" + (f" · driver {det.driver_version}" if det.driver_version else "")
                 + (f" · CUDA {det.cuda_version}" if det.cuda_version else "")]
        if not det.gpus:
            lines.append("no GPU readable here; the advisor plans for the CPU-only rig "
                         "(use --gpu SPEC or --rig FILE to describe one)")
        for g in det.gpus:
            mem = f"{g.vram_bytes / GIB:.1f} GiB" if g.vram_bytes else "memory unknown"
            if g.vram_free_bytes is not None:
                mem += f" ({g.vram_free_bytes / GIB:.1f} free)"
            link = ""
            if g.pcie and g.pcie.gen_max:
                link = f" · PCIe {g.pcie.gen_max}.0 x{g.pcie.width_max or '?'}"
                if g.pcie.gen_card_max and g.pcie.gen_card_max > g.pcie.gen_max:
                    link += f" (card supports {g.pcie.gen_card_max}.0: the slot limits it)"
            nv = f" · NVLink to {', '.join(map(str, g.nvlink_peers))}" if g.nvlink_peers else ""
            cid = ids.get(g.name) or "not in catalog"
            sizes = ", ".join(f"{b / GIB:.1f}" for b in g.mig_memory_bytes) or "none"
            mig = f" · MIG ({len(g.mig_memory_bytes)} instance(s): {sizes} GiB)" if g.mig else ""
            lines.append(f"gpu{g.index}: {g.name} [{cid}] · {mem}{link}{nv}{mig}" + (" · LOST" if g.lost else ""))
        if det.topology:
            lines.append("topology: " + " | ".join(" ".join(row) for row in det.topology))
        s = det.system
        ram = f"{s.ram_bytes / GIB:.1f} GiB RAM" if s.ram_bytes else "RAM unknown"
        if s.ram_bandwidth_gb_s:
            bw = f" · RAM bandwidth {s.ram_bandwidth_gb_s:g} GB/s ({s.ram_bandwidth_basis})"
        else:  # the engine plans with the rulebook's default: say so, and why nothing better was read
            from advisor.engine.rig import DEFAULT_RAM_BW_BASIS

            why = f"{s.ram_bandwidth_basis}; " if s.ram_bandwidth_basis not in ("", "unknown") else ""
            bw = (f" · RAM bandwidth not read ({why or 'no SMBIOS memory tables here; '}assumed "
                  f"{catalog.rules.memory.host.default_ram_bandwidth_gb_s:g} GB/s, {DEFAULT_RAM_BW_BASIS})")
        lines.append(f"system: {ram}" + (f" · {s.cpu}" if s.cpu else "") + bw)
        lines += [f"warning: {w}" for w in det.warnings]
        if args.save is not None:
            lines.append(f"saved the rig to {args.save} (edit it freely; use it with --rig)")
        emit_text(args, "advisor detect", "\n".join(lines))
    # Reading the machine is the answer, GPUs or not: a machine without one is a result, not an error.
    return EXIT_YES
