"""Read local NVIDIA GPUs through NVML. The only module that imports `pynvml`, and only lazily.

Never raises for a machine it cannot read: a missing library, an unloaded driver or no permission
gives `source="none"` and a warning that says why and what to do. Every optional query that fails
is `None` plus a warning naming the GPU and the query; a GPU lost mid-read is marked `lost` and
the others are still reported. See ../shared/research/nvml-facts.md for the calls and their traps.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from advisor.probe.common import MAX_GPU_BYTES, MAX_WATTS, bus_key, nvlink_word, p2p_word, text, topology_word, whole
from advisor.probe.types import DetectedGpu, Detection, PcieLink

# NVML return codes (nvml.h); compared by number so a fake module needs no exact class names.
_INVALID_ARGUMENT = 2
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_DRIVER_NOT_LOADED = 9
_LIBRARY_NOT_FOUND = 12
_FUNCTION_NOT_FOUND = 13
_GPU_IS_LOST = 15
_LIB_RM_VERSION_MISMATCH = 18

# pynvml's NVML_P2P_CAPS_INDEX_READ is the tuple (0,) (a trailing comma), which ctypes rejects.
_P2P_CAPS_INDEX_READ = 0
_NVLINK_DEVICE_TYPE_SWITCH = 2
_FI_DEV_NVLINK_LINK_COUNT = 91
_FEATURE_ENABLED = 1

_HINT = (
    "install or load the NVIDIA driver (reboot after a driver upgrade), or describe the rig: "
    "`advisor detect --from nvidia-smi.xml` with the output of `nvidia-smi -q -x`, or `--gpu 2xrtx-3090`"
)
_INIT_REASONS = {
    _LIBRARY_NOT_FOUND: "the NVIDIA driver library (libnvidia-ml) was not found",
    _DRIVER_NOT_LOADED: "the NVIDIA driver is not loaded",
    _NO_PERMISSION: "no permission to talk to the NVIDIA driver",
    _LIB_RM_VERSION_MISMATCH: "the NVIDIA driver library and kernel module differ (upgraded without a reboot)",
}
_WHY = {
    _NOT_SUPPORTED: "not supported on this GPU",
    _FUNCTION_NOT_FOUND: "not available with this driver",
    _NO_PERMISSION: "no permission",
}


class _GpuLost(Exception):
    """A query answered NVML_ERROR_GPU_IS_LOST."""


class _NoFunction(Exception):
    value = _FUNCTION_NOT_FOUND


MAX_GPUS = 64
"""GPUs NVML may report (as for an nvidia-smi dump, smi_xml.MAX_GPUS): a larger count (2^64-1 from a
broken binding) is not a machine, and is refused before any GPU is asked for."""
MAX_PCIE_GEN, MAX_PCIE_WIDTH = 8, 32
"""PCIe readings past generation 8 or 32 lanes (x32, the widest link the specification defines) are corrupt."""
MAX_NVLINKS = 64
"""NVLinks one GPU may report (NVML_NVLINK_MAX_LINKS is 18 on Hopper and Blackwell)."""

TIMEOUT_S = 10.0
"""How long the whole NVML read may take. A wedged driver can block an NVML call for ever
(nvml-facts.md: a GPU falling off the bus, a hung persistence daemon); past this the machine is
reported unreadable and the advisor goes on, CPU-only, with a warning."""


def read_nvml(nvml_module: Any = None, timeout_s: float | None = None) -> Detection:
    """Read every GPU NVML can see, within `timeout_s` (default TIMEOUT_S); `nvml_module` replaces
    `pynvml` (tests inject a fake). The read runs in a daemon thread, so a call stuck in the
    driver cannot hold the advisor (or its exit) hostage."""
    import threading

    limit = TIMEOUT_S if timeout_s is None else timeout_s
    box: list[Any] = []

    def work() -> None:
        try:
            box.append(_read_nvml(nvml_module))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, where a bug still surfaces
            box.append(exc)

    worker = threading.Thread(target=work, name="advisor-nvml", daemon=True)
    worker.start()
    worker.join(limit)
    if not box:
        return _unreadable(f"NVML did not answer within {limit:g} s (a stuck driver or a GPU that fell off the "
                           "bus: check `nvidia-smi` and `dmesg`)")
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def _read_nvml(nvml_module: Any = None) -> Detection:
    nvml = nvml_module
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return _unreadable("the NVML Python binding (nvidia-ml-py) is not installed")
    try:
        nvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 - any failure to start means "can't read GPUs here"
        code = getattr(e, "value", None)
        return _unreadable(_INIT_REASONS.get(code, f"NVML could not start ({e})"))
    try:
        return _Reader(nvml).read()
    except _GpuLost as e:  # while counting GPUs: no GPU to pin it on
        return _unreadable(f"a GPU stopped answering ({e}); check `dmesg` for Xid 79")
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001, S110 - shutting down cannot make the result worse
            pass


def _unreadable(reason: str) -> Detection:
    return Detection(source="none", warnings=(f"Can't read NVIDIA GPUs here: {reason}. Hint: {_HINT}.",))


class _Reader:
    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.warnings: list[str] = []

    # -- calling NVML ---------------------------------------------------------------------------

    def call(self, fn_name: str, *args: Any, **kwargs: Any) -> tuple[Any, Exception | None]:
        """(value, None) or (None, error); a lost GPU raises `_GpuLost`."""
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:
            return None, _NoFunction(f"{fn_name} is not in this nvidia-ml-py")
        try:
            return fn(*args, **kwargs), None
        except Exception as e:  # noqa: BLE001 - NVMLError, and ctypes.ArgumentError from binding bugs
            if getattr(e, "value", None) == _GPU_IS_LOST:
                raise _GpuLost(str(e)) from e
            return None, e

    def reading(self, who: str, what: str, value: Any, lo: int, hi: int) -> int | None:
        """A numeric reading checked by type and range: unknown (None, with a warning) otherwise."""
        out = whole(value, lo, hi)
        if out is None and value is not None:
            self.warnings.append(f"{who}: {what} reading {str(value)[:40]!r} is not plausible; left unknown")
        return out

    def query(self, who: str, what: str, fn_name: str, *args: Any, unsupported: Any = None, **kwargs: Any) -> Any:
        """One optional query: its value, or None plus a warning. `unsupported` (when given) is
        returned silently for NotSupported, for queries where that is an answer (MIG on GeForce)."""
        value, err = self.call(fn_name, *args, **kwargs)
        if err is None:
            return value
        code = getattr(err, "value", None)
        if code == _NOT_SUPPORTED and unsupported is not None:
            return unsupported
        self.warnings.append(f"{who}: {what} unknown ({_WHY.get(code, str(err) or type(err).__name__)})")
        return None

    # -- the whole machine ----------------------------------------------------------------------

    def read(self) -> Detection:
        driver = text(self.query("NVML", "driver version", "nvmlSystemGetDriverVersion"))
        cuda_int = self.reading("NVML", "CUDA driver version",
                                self.query("NVML", "CUDA driver version", "nvmlSystemGetCudaDriverVersion"), 1, 10**6)
        cuda = f"{cuda_int // 1000}.{(cuda_int % 1000) // 10}" if cuda_int else None
        raw_count, err = self.call("nvmlDeviceGetCount")
        if err is not None:
            return _unreadable(f"NVML could not count the GPUs ({err})")
        count = whole(raw_count, 0, MAX_GPUS)
        if count is None:
            return _unreadable(f"NVML reported {str(raw_count)[:40]!r} GPUs, not a count of up to {MAX_GPUS} "
                               "(a broken nvidia-ml-py or driver)")
        gpus: list[DetectedGpu] = []
        handles: list[Any] = []
        for i in range(count):
            gpu, handle = self.read_gpu(i)
            if gpu is not None:
                gpus.append(gpu)
                handles.append(handle)
        if not gpus:
            self.warnings.append("NVML found no NVIDIA GPU on this machine")
            return Detection(source="nvml", driver_version=driver, cuda_version=cuda, warnings=tuple(self.warnings))
        links = self.nvlink_matrix(gpus, handles)
        gpus = [
            dataclasses.replace(g, nvlink_peers=tuple(gpus[j].index for j, n in enumerate(links[k]) if n and j != k))
            for k, g in enumerate(gpus)
        ]
        for k, h in enumerate(handles):
            if h is None and not gpus[k].lost:  # lost while reading its NVLinks
                gpus[k] = dataclasses.replace(gpus[k], lost=True)
        return Detection(
            source="nvml",
            driver_version=driver,
            cuda_version=cuda,
            gpus=tuple(gpus),
            topology=self.topology(gpus, handles, links),
            p2p=self.p2p(gpus, handles),
            warnings=tuple(self.warnings),
        )

    # -- one GPU --------------------------------------------------------------------------------

    def read_gpu(self, i: int) -> tuple[DetectedGpu | None, Any]:
        who = f"GPU {i}"
        name = ""
        f: dict[str, Any] = {}
        try:
            handle, err = self.call("nvmlDeviceGetHandleByIndex", i)
            if err is not None:
                self.warnings.append(f"{who}: skipped, NVML gave no handle for it ({err})")
                return None, None
            name = text(self.query(who, "name", "nvmlDeviceGetName", handle)) or ""
            who = f"GPU {i} ({name})" if name else who
            f["uuid"] = text(self.query(who, "UUID", "nvmlDeviceGetUUID", handle))
            pci = self.query(who, "PCI bus id", "nvmlDeviceGetPciInfo", handle)
            f["pci_bus_id"] = text(getattr(pci, "busId", None)) or text(getattr(pci, "busIdLegacy", None))
            f.update(self.memory(who, handle))
            f["compute_capability"] = self.capability(who, handle)
            mw = self.reading(who, "power limit", self.query(who, "power limit", "nvmlDeviceGetEnforcedPowerLimit",
                                                             handle), 1, int(MAX_WATTS * 1000))
            f["power_limit_w"] = round(mw / 1000, 2) if mw else None
            mig = self.query(who, "MIG mode", "nvmlDeviceGetMigMode", handle, unsupported=(0, 0))
            current = whole(mig[0], 0, 1) if isinstance(mig, (tuple, list)) and mig else None
            f["mig"] = bool(current) if current is not None else None
            if f["mig"]:
                f["mig_memory_bytes"] = self.mig_instances(handle)
            if not f.get("unified_memory"):  # PCIe readings mean nothing on a SoC (DGX Spark)
                f["pcie"] = self.pcie(who, handle)
        except _GpuLost as e:
            self.warnings.append(
                f"{who}: stopped answering while it was read ({e}); reported as lost, the others are unaffected. "
                "Check `dmesg` for Xid 79 (fallen off the bus): power, riser or slot."
            )
            return DetectedGpu(index=i, name=name, lost=True, **f), None
        return DetectedGpu(index=i, name=name, **f), handle

    def capability(self, who: str, handle: Any) -> str | None:
        """`8.6` from the (major, minor) pair, each a small whole number; anything else unknown."""
        cc = self.query(who, "compute capability", "nvmlDeviceGetCudaComputeCapability", handle)
        pair = [whole(v, 0, 99) for v in cc] if isinstance(cc, (tuple, list)) and len(cc) == 2 else [None]
        if None in pair:
            if cc is not None:
                self.warnings.append(f"{who}: compute capability reading {str(cc)[:40]!r} is not plausible; left unknown")
            return None
        return f"{pair[0]}.{pair[1]}"

    def mig_instances(self, handle: Any) -> tuple[int, ...]:
        """The memory of each MIG instance of a MIG-enabled GPU (empty slots are NotFound: skipped)."""
        slots, err = self.call("nvmlDeviceGetMaxMigDeviceCount", handle)
        out = []
        for k in range((whole(slots, 0, 64) or 0) if err is None else 0):
            mig, err = self.call("nvmlDeviceGetMigDeviceHandleByIndex", handle, k)
            m, err = self.call("nvmlDeviceGetMemoryInfo", mig) if err is None else (None, err)
            total = whole(getattr(m, "total", None), 1, MAX_GPU_BYTES) if err is None else None
            if total:
                out.append(total)
        return tuple(out)

    def memory(self, who: str, handle: Any) -> dict[str, Any]:
        """v2 (with `reserved`) where the binding and driver have it, else v1. Each size is a whole
        number of bytes up to the total, the total at most MAX_GPU_BYTES; else unknown."""
        v2 = getattr(self.nvml, "nvmlMemory_v2", None)
        if v2 is not None:
            m, err = self.call("nvmlDeviceGetMemoryInfo", handle, version=v2)
            total = whole(getattr(m, "total", None), 1, MAX_GPU_BYTES) if err is None else None
            if total:
                return {"vram_bytes": total, "vram_reserved_bytes": whole(getattr(m, "reserved", None), 0, total),
                        "vram_free_bytes": whole(getattr(m, "free", None), 0, total)}
        m, err = self.call("nvmlDeviceGetMemoryInfo", handle)
        total = getattr(m, "total", None) if err is None else None
        if (err is None and total == 0) or getattr(err, "value", None) == _NOT_SUPPORTED:
            self.warnings.append(
                f"{who}: no dedicated memory reported (NVML memory query not supported); "
                "treated as unified memory shared with system RAM"
            )
            return {"unified_memory": True}
        if err is not None:
            self.warnings.append(f"{who}: memory unknown ({_WHY.get(getattr(err, 'value', None), err)})")
            return {}
        total = self.reading(who, "memory", total, 1, MAX_GPU_BYTES)
        return {"vram_bytes": total, "vram_free_bytes": whole(getattr(m, "free", None), 0, total)} if total else {}

    def pcie(self, who: str, handle: Any) -> PcieLink | None:
        """Capability (card, card-in-slot) and the current link. The current generation drops at idle,
        so it is recorded, never judged here."""
        def q(what: str, fn_name: str, hi: int) -> int | None:
            return self.reading(who, what, self.query(who, what, fn_name, handle), 1, hi)

        link = PcieLink(
            gen_max=q("PCIe max generation", "nvmlDeviceGetMaxPcieLinkGeneration", MAX_PCIE_GEN),
            width_max=q("PCIe max width", "nvmlDeviceGetMaxPcieLinkWidth", MAX_PCIE_WIDTH),
            gen_card_max=q("PCIe card max generation", "nvmlDeviceGetGpuMaxPcieLinkGeneration", MAX_PCIE_GEN),
            gen_current=q("PCIe current generation", "nvmlDeviceGetCurrPcieLinkGeneration", MAX_PCIE_GEN),
            width_current=q("PCIe current width", "nvmlDeviceGetCurrPcieLinkWidth", MAX_PCIE_WIDTH),
        )
        return link if any(v is not None for v in dataclasses.astuple(link)) else None

    # -- between GPUs ---------------------------------------------------------------------------

    def nvlink_matrix(self, gpus: list[DetectedGpu], handles: list[Any]) -> list[list[int]]:
        """links[a][b]: NVLinks joining positions a and b (direct links counted, NVSwitch = the smaller
        switch-link count of the two, as `nvidia-smi topo -m` shows NV18 on HGX H100)."""
        by_bus = {bus_key(g.pci_bus_id): k for k, g in enumerate(gpus) if bus_key(g.pci_bus_id)}
        n = len(gpus)
        links = [[0] * n for _ in range(n)]
        switch = [0] * n
        for k, handle in enumerate(handles):
            if handle is None:
                continue
            try:
                peers, switch[k] = self.nvlinks(gpus[k], handle, by_bus)
            except _GpuLost as e:
                self.warnings.append(f"GPU {gpus[k].index} ({gpus[k].name}): stopped answering ({e}); reported as lost")
                handles[k] = None
                continue
            for j, count in peers.items():
                if j != k:
                    links[k][j] = max(links[k][j], count)
                    links[j][k] = max(links[j][k], count)
        for a in range(n):
            for b in range(n):
                if a != b and switch[a] and switch[b]:
                    links[a][b] = max(links[a][b], min(switch[a], switch[b]))
        return links

    def nvlinks(self, gpu: DetectedGpu, handle: Any, by_bus: dict[Any, int]) -> tuple[Counter[int], int]:
        """Active links of one GPU: a count per peer position, and the links that end at an NVSwitch."""
        peers: Counter[int] = Counter()
        switch_links = 0
        for link in range(self.link_count(handle)):
            state, err = self.call("nvmlDeviceGetNvLinkState", handle, link)
            if err is not None:
                if link == 0 and getattr(err, "value", None) in (_NOT_SUPPORTED, _FUNCTION_NOT_FOUND):
                    break  # no NVLink on this GPU: an answer, not a failure
                continue  # past the real link count (INVALID_ARGUMENT) or one bad link
            if state != _FEATURE_ENABLED:
                continue
            kind, _ = self.call("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
            if kind == _NVLINK_DEVICE_TYPE_SWITCH:
                switch_links += 1
                continue
            remote, err = self.call("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            peer = by_bus.get(bus_key(text(getattr(remote, "busId", None))))
            if peer is not None:
                peers[peer] += 1
            elif err is not None:
                self.warnings.append(f"GPU {gpu.index} ({gpu.name}): NVLink {link} is up but its far end is unknown ({err})")
        return peers, switch_links

    def link_count(self, handle: Any) -> int:
        """The GPU's real NVLink count (field 91); else the binding's upper bound, whose extra indices
        answer INVALID_ARGUMENT and are skipped."""
        values, err = self.call("nvmlDeviceGetFieldValues", handle, [_FI_DEV_NVLINK_LINK_COUNT])
        try:
            if err is None and values and getattr(values[0], "nvmlReturn", 1) == 0:
                count = whole(values[0].value.uiVal, 0, MAX_NVLINKS)
                if count is not None:
                    return count
        except (AttributeError, TypeError, IndexError, KeyError):  # not the shape NVML gives
            pass
        return whole(getattr(self.nvml, "NVML_NVLINK_MAX_LINKS", 18), 0, MAX_NVLINKS) or 0

    def topology(self, gpus: list[DetectedGpu], handles: list[Any], links: list[list[int]]) -> tuple[tuple[str, ...], ...] | None:
        n = len(gpus)
        cells: list[list[str | None]] = [["X" if a == b else None for b in range(n)] for a in range(n)]
        for a in range(n):
            for b in range(a + 1, n):
                word = nvlink_word(links[a][b]) if links[a][b] else None
                if word is None and handles[a] is not None and handles[b] is not None:
                    try:
                        level, _ = self.call("nvmlDeviceGetTopologyCommonAncestor", handles[a], handles[b])
                    except _GpuLost:
                        level = None
                    word = topology_word(level) if isinstance(level, int) else None
                cells[a][b] = cells[b][a] = word
        if any(c is None for row in cells for c in row):
            self.warnings.append("GPU topology (PCIe paths between GPUs) could not be read for every pair; left unknown")
            return None
        return tuple(tuple(row) for row in cells)  # type: ignore[arg-type]

    def p2p(self, gpus: list[DetectedGpu], handles: list[Any]) -> tuple[tuple[str, ...], ...] | None:
        n = len(gpus)
        cells = [["X" if a == b else "U" for b in range(n)] for a in range(n)]
        answered = 0
        for a in range(n):
            for b in range(n):
                if a == b or handles[a] is None or handles[b] is None:
                    continue
                try:
                    status, _ = self.call("nvmlDeviceGetP2PStatus", handles[a], handles[b], _P2P_CAPS_INDEX_READ)
                except _GpuLost:
                    status = None
                if isinstance(status, int):
                    cells[a][b] = p2p_word(status)
                    answered += 1
        if n > 1 and not answered:
            self.warnings.append("GPU peer-to-peer (P2P) status could not be read; left unknown")
            return None
        return tuple(tuple(row) for row in cells)
