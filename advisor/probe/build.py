"""One place that turns the user's rig options into a Rig: a rig file, `--gpu` flags, or detection."""

from __future__ import annotations

import dataclasses
from pathlib import Path
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a faster start)

from advisor.catalog.resolve import resolve
from advisor.catalog.types import GIB, Catalog, GpuSpec
from advisor.engine.rig import DEFAULT_RAM_BW_BASIS, Rig, RigGpu
from advisor.errors import AdvisorError
from advisor.probe.flags import parse_pcie, parse_ram, rig_from_flags

if TYPE_CHECKING:
    from advisor.probe.types import Detection, DetectedGpu


def match_gpu(catalog: Catalog, name: str, vram_bytes: int | None = None) -> str | None:
    """The catalog id of a detected GPU name (`NVIDIA GeForce RTX 3090` -> `rtx-3090`), or None.

    When a name fits several entries (an `A100-SXM4` without its memory size), the detected memory
    picks the one whose size is closest.
    """
    try:
        return resolve(catalog.gpus, name, "gpu")
    except AdvisorError as exc:
        if vram_bytes and "ambiguous" in exc.message:
            ids = [i for i in catalog.gpus if i in exc.message]
            if ids:
                return min(ids, key=lambda i: abs(catalog.gpus[i].vram_bytes - vram_bytes))
        return None


def _unknown_spec(gpu: DetectedGpu) -> GpuSpec:
    slug = "-".join(gpu.name.lower().split()) or f"gpu{gpu.index}"
    return GpuSpec(id=f"unknown:{slug}", name=gpu.name or "unknown GPU", vendor="nvidia", category="consumer",
                   arch="unknown", vram_gib=(gpu.vram_bytes or 0) / GIB, memory_bandwidth_gb_s=0.0, fp16_tflops=0.0,
                   power_w=gpu.power_limit_w or 0.0, sources=("detected",),
                   pcie_gen=gpu.pcie.gen_card_max if gpu.pcie else None,
                   notes="not in the catalog: memory as detected; speed unknown")


def rig_from_detection(catalog: Catalog, det: Detection, empty: bool = False) -> Rig:
    """A Rig from what a probe found; CPU-only when no GPU was readable. A rig whose GPUs were all
    left out (lost, or MIG without an instance) keeps the probe's source: RIG001 then says why."""
    host = catalog.rules.memory.host
    ram = det.system.ram_bytes or int(host.default_ram_gib * GIB)
    bw = det.system.ram_bandwidth_gb_s
    gpus = []
    warnings = list(det.warnings)
    kept = []
    for g in det.gpus:
        if g.lost:
            warnings.append(f"GPU {g.index} ({g.name}) was lost while it was read: left out of the rig")
            continue
        cid = match_gpu(catalog, g.name, g.vram_bytes)
        spec = catalog.gpus[cid] if cid else _unknown_spec(g)
        total = g.vram_bytes or (ram if spec.unified_memory else spec.vram_bytes)
        if spec.unified_memory and g.vram_bytes is None:
            spec = dataclasses.replace(spec, vram_gib=total / GIB)
        use_free = not empty and g.vram_free_bytes is not None and not spec.unified_memory
        cap = g.vram_free_bytes if use_free else total
        if g.mig:
            # A CUDA process enumerates one MIG device (NVIDIA MIG User Guide, "Device Enumeration":
            # https://docs.nvidia.com/datacenter/tesla/mig-user-guide/), so the card is its largest instance.
            if not g.mig_memory_bytes:
                warnings.append(f"GPU {g.index} ({g.name}) is in MIG mode with no MIG instance readable: "
                                "no process can use it, so it is left out of the rig")
                continue
            cap, use_free = max(g.mig_memory_bytes), False
            warnings.append(f"GPU {g.index} ({g.name}) is in MIG mode: planned on its largest MIG instance "
                            f"({cap / GIB:.1f} of {total / GIB:.1f} GiB), the one device a process sees; the speed "
                            f"shown is the whole card's, and an instance has only part of its bandwidth and SMs")
        gen = g.pcie.gen_max if g.pcie else None
        width = g.pcie.width_max if g.pcie else None
        kept.append(g)
        gpus.append(RigGpu(spec=spec, capacity_bytes=int(cap), pcie_gen=gen or spec.pcie_gen,
                           pcie_lanes=width or spec.pcie_lanes, index=len(gpus), name=g.name,
                           capacity_basis="free" if use_free else "total"))
    mig = [i for i, g in enumerate(kept) if g.mig]
    if len(mig) > 1:  # one process enumerates one MIG device in all, not one per card: keep the largest
        best = max(mig, key=lambda i: gpus[i].capacity_bytes)
        warnings.append(f"{len(mig)} GPUs are in MIG mode and a process sees one MIG instance in all: planned on "
                        f"GPU {kept[best].index}'s largest instance only")
        keep = [i for i in range(len(kept)) if i not in mig or i == best]
        kept = [kept[i] for i in keep]
        gpus = [dataclasses.replace(gpus[i], index=n) for n, i in enumerate(keep)]
    # MIG instances do no GPU-to-GPU P2P, over PCIe or NVLink (MIG User Guide, "Application Considerations").
    index_of = {g.index: i for i, g in enumerate(kept) if not g.mig}
    pairs = sorted({tuple(sorted((index_of[g.index], index_of[p]))) for g in kept if g.index in index_of
                    for p in g.nvlink_peers if p in index_of})
    p2p = None
    if det.p2p is not None and len(gpus) > 1:
        words = {w for i, row in enumerate(det.p2p) for j, w in enumerate(row) if i != j}
        p2p = words <= {"OK"} if words else None
    unified = bool(gpus) and gpus[0].spec.unified_memory
    return Rig(gpus=tuple(gpus), ram_bytes=ram, ram_bandwidth_gb_s=bw or (
        gpus[0].spec.memory_bandwidth_gb_s if unified else float(host.default_ram_bandwidth_gb_s)),
        ram_bandwidth_basis=det.system.ram_bandwidth_basis if bw else DEFAULT_RAM_BW_BASIS,
        nvlink_pairs=tuple(pairs), p2p=p2p, topology=det.topology, cpu=det.system.cpu or "",
        source=det.source if gpus or det.gpus else "cpu-only", warnings=tuple(warnings))


def match_cpu(catalog: Catalog, name: str) -> str | None:
    """The catalog id of a CPU as a probe or a rig file words it (`AMD Ryzen 9 7950X 16-Core Processor`,
    `13th Gen Intel(R) Core(TM) i3-1315U`, `Raspberry Pi 5 Model B Rev 1.0`), or None: its id, name or an
    alias, else the longest of them found in it as whole words."""
    from advisor.catalog.resolve import exact, normal

    if not name or not catalog.cpus:
        return None
    hit = exact(catalog.cpus, name)
    if hit is not None:
        return hit
    text = f"-{normal(name)}-"
    found = [(len(normal(a)), cid) for cid, c in catalog.cpus.items() for a in (cid, c.name, *c.aliases)
             if normal(a) and f"-{normal(a)}-" in text]
    return max(found)[1] if found else None


def with_cpu(catalog: Catalog, rig: Rig, name: str | None = None) -> Rig:
    """The rig with its CPU's catalog entry: `name` as given (`--cpu [Nx]CPU`: one the catalog lacks is an error
    naming the closest ids), else the CPU the rig file or the probe names (one the catalog lacks stays unknown:
    decode from RAM is then bandwidth alone). A rig whose RAM bandwidth is the rulebook's default takes the
    CPU's memory interface (every channel, the fastest speed its vendor states)."""
    from advisor.catalog.resolve import parse_gpu_spec

    if name:
        try:  # a whole name first: `7950X 16-Core` is not 7,950 CPUs
            count, cid = 1, resolve(catalog.cpus, name, "cpu")
        except AdvisorError:
            count, cid = parse_gpu_spec(catalog.cpus, name, "cpu")
    else:
        count, cid = 1, match_cpu(catalog, rig.cpu)
    if cid is None:
        return rig
    spec = catalog.cpus[cid]
    changes: dict = {"cpu_spec": spec, "cpu_sockets": count, "cpu": spec.name if name else (rig.cpu or spec.name)}
    # the rig's RAM is the rulebook's default, or what another catalog CPU gave it: this CPU's channels
    stated = rig.ram_bandwidth_basis not in (DEFAULT_RAM_BW_BASIS, _memory_basis(rig.cpu_spec, rig.cpu_sockets))
    if spec.memory is not None and not stated and not rig.unified:
        changes["ram_bandwidth_gb_s"] = spec.memory.peak_gb_s * count
        changes["ram_bandwidth_basis"] = _memory_basis(spec, count)
    return dataclasses.replace(rig, **changes)


def _memory_basis(spec, count: int) -> str:
    """The basis of a RAM bandwidth taken from a CPU's catalog entry (empty: none)."""
    if spec is None or spec.memory is None:
        return ""
    m = spec.memory
    return (f"{count} x " if count > 1 else "") + (
        f"{spec.name}: {m.channels} x {m.channel_bits}-bit {m.type}-{m.mt_s} = {m.peak_gb_s:g} GB/s peak "
        "(hardware_db/cpus.toml)")


def host_ram_bytes() -> int | None:
    """This machine's RAM without importing the probes (what /proc/meminfo's MemTotal says)."""
    import os

    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def build_rig(catalog: Catalog, gpus: list[str] | None = None, nvlink: bool = False, pcie: str | None = None,
              ram: str | None = None, rig_file: Path | None = None, empty: bool = False,
              detection: Detection | None = None, ram_bw: str | None = None) -> Rig:
    """The rig the user described: rig file, else --gpu flags, else the detected machine, with the CPU the rig
    file or the probe names where the catalog has it (`--cpu`: with_cpu after it); `ram_bw` (GB/s or a preset
    like ddr5-6000x2) replaces the RAM bandwidth of any of them."""
    rig = with_cpu(catalog, _build_rig(catalog, gpus, nvlink, pcie, ram, rig_file, empty, detection))
    if ram_bw is None:
        return rig
    from advisor.probe.flags import parse_ram_bw

    if rig.unified:
        raise AdvisorError("--ram-bw: on unified memory the RAM is the GPU's memory, with its bandwidth",
                           "drop --ram-bw")
    bw, basis = parse_ram_bw(ram_bw)
    return dataclasses.replace(rig, ram_bandwidth_gb_s=bw, ram_bandwidth_basis=basis)


def _build_rig(catalog: Catalog, gpus: list[str] | None, nvlink: bool, pcie: str | None, ram: str | None,
               rig_file: Path | None, empty: bool, detection: Detection | None) -> Rig:
    if rig_file is not None:
        if gpus:
            raise AdvisorError("--rig and --gpu both describe the rig", "use one of them")
        from advisor.probe.rigfile import load_rig

        rig = load_rig(catalog, rig_file)
        if ram is not None:
            rig = dataclasses.replace(rig, ram_bytes=parse_ram(ram))
        if pcie is not None:
            gen, lanes = parse_pcie(pcie)
            rig = dataclasses.replace(rig, gpus=tuple(dataclasses.replace(g, pcie_gen=gen, pcie_lanes=lanes)
                                                      for g in rig.gpus))
        return rig
    if gpus:
        return rig_from_flags(catalog, gpus, nvlink=nvlink, pcie=pcie, ram=ram,
                              default_ram_bytes=None if ram is not None else host_ram_bytes())
    if nvlink or pcie:
        raise AdvisorError("--nvlink and --pcie describe GPUs given with --gpu", "add --gpu SPEC")
    if detection is None:
        from advisor.probe import detect

        detection = detect()
    rig = rig_from_detection(catalog, detection, empty=empty)
    if ram is not None:
        rig = dataclasses.replace(rig, ram_bytes=parse_ram(ram))
    return rig
