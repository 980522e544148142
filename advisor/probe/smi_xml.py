"""Read a saved `nvidia-smi -q -x` dump (and `nvidia-smi topo -m` text) instead of the local machine.

So a rig can be captured on a server where the advisor is not installed. The XML is untrusted
input: its size is bounded and any entity declaration is refused before it is parsed (no
"billion laughs"); expat fetches no external DTD. Everything wrong with the file is an
`AdvisorError` with a hint, never a traceback.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.errors import AdvisorError, one_line
from advisor.probe.common import text, to_bytes, to_int, to_watts, topology_cell
from advisor.probe.types import DetectedGpu, Detection, PcieLink

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

MAX_BYTES = 4 * 1024**2
"""An 8-GPU server's `nvidia-smi -q -x` with its processes is under 1 MiB."""
MAX_GPUS = 64
"""`nvidia-smi` reports the GPUs of one machine; no machine holds more."""
_HINT = "capture it on the GPU machine with `nvidia-smi -q -x > rig.xml`"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def read_smi_xml(source: str | os.PathLike[str] | bytes) -> Detection:
    """Parse the XML `nvidia-smi -q -x` prints; `source` is a path or the bytes themselves."""
    import xml.etree.ElementTree as ET  # noqa: N817 - imported here: start-up time matters

    data, where = _load(source)
    if ("<!ENTITY" if isinstance(data, str) else b"<!ENTITY") in data:
        raise AdvisorError(f"{where}: XML entity declarations are not accepted", _HINT)
    if ("\x00" if isinstance(data, str) else b"\x00") in data:
        raise AdvisorError(f"{where}: not a UTF-8 XML file", _HINT)
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise AdvisorError(f"{where}: not valid XML ({e})", _HINT) from None
    if root.tag != "nvidia_smi_log":
        raise AdvisorError(f"{where}: not an `nvidia-smi -q -x` dump (root element <{root.tag}>)", _HINT)

    elements = root.findall("gpu")
    if len(elements) > MAX_GPUS:
        raise AdvisorError(f"{where}: {len(elements)} GPUs is more than one machine holds", _HINT)
    gpus = tuple(_gpu(i, el) for i, el in enumerate(elements))
    warnings = []
    attached = to_int(root.findtext("attached_gpus"))
    if not gpus:
        warnings.append(f"{where}: the dump lists no GPU")
    elif attached is not None and attached != len(gpus):
        warnings.append(f"{where}: says {attached} GPUs are attached but describes {len(gpus)} (a partial dump?)")
    for g in gpus:
        if g.unified_memory:
            warnings.append(f"GPU {g.index} ({g.name}): no dedicated memory reported; treated as unified memory")
        elif g.vram_bytes is None:
            warnings.append(f"GPU {g.index} ({g.name}): memory total not in the dump; left unknown")
    return Detection(
        source="nvidia-smi-xml",
        driver_version=text(root.findtext("driver_version")),
        cuda_version=text(root.findtext("cuda_version")),
        gpus=gpus,
        warnings=tuple(warnings),
    )


def _load(source: str | os.PathLike[str] | bytes) -> tuple[bytes | str, str]:
    if isinstance(source, (bytes, bytearray)):
        data, where = bytes(source), "the nvidia-smi XML"
    else:
        from advisor.files import read_limited

        where = one_line(os.fspath(source), 300)
        data = read_limited(source, MAX_BYTES, "an nvidia-smi dump", _HINT)
    if len(data) > MAX_BYTES:
        raise AdvisorError(f"{where}: larger than {MAX_BYTES // 1024**2} MiB, not an nvidia-smi dump", _HINT)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16, as PowerShell's `>` writes it
        try:
            return data.decode("utf-16"), where
        except UnicodeDecodeError:
            raise AdvisorError(f"{where}: not valid UTF-16 text", _HINT) from None
    return data.removeprefix(b"\xef\xbb\xbf"), where


def is_xml(head: bytes) -> bool:
    """Whether a file starting with `head` is XML (UTF-8 with or without a BOM, or UTF-16)."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        head = head[2:].replace(b"\x00", b"")
    return head.removeprefix(b"\xef\xbb\xbf").lstrip().startswith(b"<")


def _gpu(index: int, el: ET.Element) -> DetectedGpu:
    """One <gpu>. Paths are direct children: MIG devices carry their own fb_memory_usage."""
    fb = el.find("fb_memory_usage")
    total = to_bytes(fb.findtext("total")) if fb is not None else None
    mig = el.find("mig_mode")
    return DetectedGpu(
        index=index,
        name=text(el.findtext("product_name")) or "",
        uuid=text(el.findtext("uuid")),
        pci_bus_id=text(el.findtext("pci/pci_bus_id")) or text(el.get("id")),
        vram_bytes=total,
        vram_reserved_bytes=to_bytes(fb.findtext("reserved")) if fb is not None else None,
        vram_free_bytes=to_bytes(fb.findtext("free")) if fb is not None else None,
        # `N/A` here means the GPU has no MIG (GeForce); an old driver has no element at all.
        mig=(text(mig.findtext("current_mig")) == "Enabled") if mig is not None else None,
        mig_memory_bytes=tuple(b for b in (to_bytes(d.findtext("fb_memory_usage/total"))
                                           for d in el.findall("mig_devices/mig_device")[:64]) if b),
        power_limit_w=_first(el, to_watts, "power_readings/enforced_power_limit",
                             "gpu_power_readings/current_power_limit", "power_readings/power_limit"),
        pcie=_pcie(el.find("pci/pci_gpu_link_info")),
        # As with NVML: a framebuffer the driver cannot size (`N/A`, DGX Spark) is unified memory.
        unified_memory=fb is not None and total is None,
    )


def _pcie(info: ET.Element | None) -> PcieLink | None:
    if info is None:
        return None
    link = PcieLink(
        gen_max=to_int(info.findtext("pcie_gen/max_link_gen")),
        width_max=to_int(info.findtext("link_widths/max_link_width")),
        gen_card_max=to_int(info.findtext("pcie_gen/max_device_link_gen")),
        gen_current=to_int(info.findtext("pcie_gen/current_link_gen")),
        width_current=to_int(info.findtext("link_widths/current_link_width")),
    )
    return link if any(v is not None for v in (link.gen_max, link.width_max, link.gen_current)) else None


def _first(el: ET.Element, parse, *paths: str):  # type: ignore[no-untyped-def]
    for path in paths:
        value = parse(el.findtext(path))
        if value is not None:
            return value
    return None


def read_topo_matrix(text_: str) -> tuple[tuple[str, ...], ...]:
    """The GPU-to-GPU part of `nvidia-smi topo -m` output (NIC and affinity columns dropped,
    ANSI codes and CR stripped, legacy `SOC` read as `SYS`). Raises `AdvisorError` when there is
    no GPU matrix or a cell is not a topology word."""
    rows: dict[int, list[str]] = {}
    for line in _ANSI.sub("", text_).replace("\r", "").splitlines():
        m = re.match(r"GPU(\d+)\s+(.*)$", line)
        if m:
            rows[int(m.group(1))] = m.group(2).split()
    n = len(rows)
    if not n or sorted(rows) != list(range(n)):
        raise AdvisorError("no `nvidia-smi topo -m` GPU matrix found", "paste the output of `nvidia-smi topo -m`")
    matrix = []
    for i in range(n):
        cells = [topology_cell(c) for c in rows[i][:n]]
        if len(cells) < n or None in cells or cells[i] != "X":
            raise AdvisorError(f"`nvidia-smi topo -m`: row GPU{i} is not a row of topology words: {' '.join(rows[i][:n])}",
                               "paste the output of `nvidia-smi topo -m` unchanged")
        matrix.append(tuple(cells))  # type: ignore[arg-type]
    return tuple(matrix)
