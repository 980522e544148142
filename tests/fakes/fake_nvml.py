"""A hand-written fake of the `pynvml` module (nvidia-ml-py), with named scenarios.

Only what `advisor.probe.nvml` calls is here. It behaves like the real binding where that matters:
errors are `NVMLError` subclasses carrying `.value` (the NVML return code), every call before
`nvmlInit()` fails with `Uninitialized`, `NVML_P2P_CAPS_INDEX_READ` is the tuple `(0,)` as in the
real binding (passing it on fails like ctypes does), memory v1 has no `reserved`, links past a GPU's
real NVLink count answer `InvalidArgument`.

    fake = scenario("rtx3090_nvlink_pair")
    detection = read_nvml(nvml_module=fake)
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable

MIB = 1024**2

# NVML return codes (nvml.h)
UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED, NO_PERMISSION = 1, 2, 3, 4
DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, FUNCTION_NOT_FOUND, GPU_IS_LOST = 9, 12, 13, 15

TOPO = {"PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}
P2P_OK, P2P_GPU_NOT_SUPPORTED, P2P_NOT_SUPPORTED = 0, 2, 5


class NVMLError(Exception):
    value = 999

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML Error with code {self.value}")


_MESSAGES = {
    UNINITIALIZED: "Uninitialized",
    INVALID_ARGUMENT: "Invalid Argument",
    NOT_SUPPORTED: "Not Supported",
    NO_PERMISSION: "Insufficient Permissions",
    DRIVER_NOT_LOADED: "Driver Not Loaded",
    LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    FUNCTION_NOT_FOUND: "Function Not Found",
    GPU_IS_LOST: "GPU is lost",
}


def _error_class(name: str, code: int) -> type[NVMLError]:
    return type(name, (NVMLError,), {"value": code})


NVMLError_Uninitialized = _error_class("NVMLError_Uninitialized", UNINITIALIZED)
NVMLError_InvalidArgument = _error_class("NVMLError_InvalidArgument", INVALID_ARGUMENT)
NVMLError_NotSupported = _error_class("NVMLError_NotSupported", NOT_SUPPORTED)
NVMLError_NoPermission = _error_class("NVMLError_NoPermission", NO_PERMISSION)
NVMLError_DriverNotLoaded = _error_class("NVMLError_DriverNotLoaded", DRIVER_NOT_LOADED)
NVMLError_LibraryNotFound = _error_class("NVMLError_LibraryNotFound", LIBRARY_NOT_FOUND)
NVMLError_FunctionNotFound = _error_class("NVMLError_FunctionNotFound", FUNCTION_NOT_FOUND)
NVMLError_GpuIsLost = _error_class("NVMLError_GpuIsLost", GPU_IS_LOST)
_BY_CODE = {c.value: c for c in NVMLError.__subclasses__()}


@dataclass
class FakeGpu:
    """One GPU as the fake driver reports it."""

    name: str
    bus_id: str
    total_mib: int = 24576
    reserved_mib: int = 422
    free_mib: int = 24152
    cc: tuple[int, int] = (8, 6)
    power_mw: int = 350_000
    mig: tuple[int, int] = (0, 0)
    gen_max: int = 4
    width_max: int = 16
    gen_card_max: int = 4
    gen_current: int = 4
    width_current: int = 16
    nvlinks: list[str] = field(default_factory=list)
    """One entry per physical link: a remote PCI bus id, "switch", or "" (link down)."""
    link_count_field: bool = True
    """Whether field 91 (NVLink count) answers; if not, callers loop and get INVALID_ARGUMENT past the end."""
    errors: dict[str, int] = field(default_factory=dict)
    """Function name -> NVML error code it raises for this GPU."""
    lost_at: str | None = None
    """Function whose call makes this GPU fall off the bus (it and every later call: GPU_IS_LOST)."""
    lost: bool = False
    uuid: str = ""


class FakeNvml:
    """Stands in for the `pynvml` module."""

    NVMLError = NVMLError
    NVMLError_Uninitialized = NVMLError_Uninitialized
    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    nvmlMemory_v2 = 0x02000028
    NVML_NVLINK_MAX_LINKS = 36
    NVML_P2P_CAPS_INDEX_READ = (0,)  # sic: the real binding's trailing-comma bug
    NVML_FI_DEV_NVLINK_LINK_COUNT = 91

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        *,
        init_error: int | None = None,
        driver: str = "550.54.15",
        cuda: int = 12040,
        topology: Callable[[int, int], int] | None = None,
        p2p: Callable[[int, int], int] | None = None,
    ) -> None:
        self.gpus = gpus or []
        self.init_error = init_error
        self.driver = driver
        self.cuda = cuda
        self.topology = topology or (lambda a, b: TOPO["PHB"])
        self.p2p_status = p2p or (lambda a, b: P2P_OK)
        self.initialized = 0
        self.init_calls = 0
        self.shutdown_calls = 0
        self.calls: list[tuple] = []
        for i, g in enumerate(self.gpus):
            g.uuid = g.uuid or f"GPU-{i:08x}-0000-0000-0000-000000000000"

    # -- plumbing -----------------------------------------------------------------------------

    def _raise(self, code: int) -> None:
        raise _BY_CODE[code]()

    def _check(self) -> None:
        if not self.initialized:
            self._raise(UNINITIALIZED)

    def _gpu(self, handle: int, fn: str) -> FakeGpu:
        self._check()
        self.calls.append((fn, handle))
        g = self.gpus[handle]
        if g.lost_at == fn:
            g.lost = True
        if g.lost:
            self._raise(GPU_IS_LOST)
        if fn in g.errors:
            self._raise(g.errors[fn])
        return g

    # -- system -------------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            self._raise(self.init_error)
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        self._check()
        self.shutdown_calls += 1
        self.initialized -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check()
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._check()
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._gpu(index, "nvmlDeviceGetHandleByIndex")
        return index

    # -- one device ---------------------------------------------------------------------------

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._gpu(h, "nvmlDeviceGetName").name

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._gpu(h, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetPciInfo(self, h: int) -> SimpleNamespace:
        g = self._gpu(h, "nvmlDeviceGetPciInfo")
        return SimpleNamespace(busId=g.bus_id, busIdLegacy=g.bus_id[4:])

    def nvmlDeviceGetMemoryInfo(self, h: int, version: int | None = None) -> SimpleNamespace:
        g = self._gpu(h, "nvmlDeviceGetMemoryInfo_v2" if version else "nvmlDeviceGetMemoryInfo")
        total, free = g.total_mib * MIB, g.free_mib * MIB
        if version:
            assert version == self.nvmlMemory_v2
            reserved = g.reserved_mib * MIB
            return SimpleNamespace(version=version, total=total, reserved=reserved, free=free, used=total - reserved - free)
        return SimpleNamespace(total=total, free=free, used=total - free)

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return self._gpu(h, "nvmlDeviceGetCudaComputeCapability").cc

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return self._gpu(h, "nvmlDeviceGetEnforcedPowerLimit").power_mw

    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:
        return list(self._gpu(h, "nvmlDeviceGetMigMode").mig)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return self._gpu(h, "nvmlDeviceGetMaxPcieLinkGeneration").gen_max

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, h: int) -> int:
        return self._gpu(h, "nvmlDeviceGetGpuMaxPcieLinkGeneration").gen_card_max

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return self._gpu(h, "nvmlDeviceGetMaxPcieLinkWidth").width_max

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrPcieLinkGeneration").gen_current

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrPcieLinkWidth").width_current

    # -- NVLink -------------------------------------------------------------------------------

    def nvmlDeviceGetFieldValues(self, h: int, field_ids: list) -> list[SimpleNamespace]:
        g = self._gpu(h, "nvmlDeviceGetFieldValues")
        out = []
        for fid in field_ids:
            ok = fid == self.NVML_FI_DEV_NVLINK_LINK_COUNT and g.link_count_field
            out.append(SimpleNamespace(fieldId=fid, nvmlReturn=0 if ok else NOT_SUPPORTED,
                                       value=SimpleNamespace(uiVal=len(g.nvlinks) if ok else 0)))
        return out

    def _link(self, h: int, link: int, fn: str) -> str:
        g = self._gpu(h, fn)
        if not g.nvlinks:
            self._raise(NOT_SUPPORTED)
        if not 0 <= link < len(g.nvlinks):
            self._raise(INVALID_ARGUMENT)
        return g.nvlinks[link]

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        return 1 if self._link(h, link, "nvmlDeviceGetNvLinkState") else 0

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: int, link: int) -> int:
        remote = self._link(h, link, "nvmlDeviceGetNvLinkRemoteDeviceType")
        return 2 if remote == "switch" else 0

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> SimpleNamespace:
        remote = self._link(h, link, "nvmlDeviceGetNvLinkRemotePciInfo")
        if not remote:
            self._raise(NOT_SUPPORTED)
        return SimpleNamespace(busId="00000000:FF:00.0" if remote == "switch" else remote)

    # -- between devices ----------------------------------------------------------------------

    def nvmlDeviceGetTopologyCommonAncestor(self, h1: int, h2: int) -> int:
        self._gpu(h1, "nvmlDeviceGetTopologyCommonAncestor")
        self._gpu(h2, "nvmlDeviceGetTopologyCommonAncestor")
        return self.topology(h1, h2)

    def nvmlDeviceGetP2PStatus(self, h1: int, h2: int, index: int) -> int:
        self._gpu(h1, "nvmlDeviceGetP2PStatus")
        self._gpu(h2, "nvmlDeviceGetP2PStatus")
        if not isinstance(index, int):  # what ctypes does with the binding's (0,)
            raise ctypes.ArgumentError("argument 3: TypeError: Don't know how to convert parameter 3")
        assert index == 0, "the probe asks for the READ capability"
        return self.p2p_status(h1, h2)


# -- scenarios --------------------------------------------------------------------------------


def _rtx3090(bus: str, **kw) -> FakeGpu:
    return FakeGpu(name="NVIDIA GeForce RTX 3090", bus_id=bus, **kw)


def _rtx4090(bus: str, **kw) -> FakeGpu:
    kw = {"total_mib": 24564, "reserved_mib": 354, "free_mib": 24208, "cc": (8, 9), "power_mw": 450_000, **kw}
    return FakeGpu(name="NVIDIA GeForce RTX 4090", bus_id=bus, **kw)


def _pairs_same(word: str) -> Callable[[int, int], int]:
    return lambda a, b: TOPO[word]


def no_library() -> FakeNvml:
    return FakeNvml(init_error=LIBRARY_NOT_FOUND)


def driver_not_loaded() -> FakeNvml:
    return FakeNvml(init_error=DRIVER_NOT_LOADED)


def no_permission() -> FakeNvml:
    return FakeNvml(init_error=NO_PERMISSION)


def zero_gpus() -> FakeNvml:
    return FakeNvml([])


def rtx3090_nvlink_pair() -> FakeNvml:
    """Two RTX 3090 with an NVLink bridge: 4 links each (nvtop PR #469), idle at Gen1, field 91
    unanswered so the probe walks link indices until INVALID_ARGUMENT."""
    a, b = "00000000:41:00.0", "00000000:81:00.0"
    idle = {"gen_current": 1}
    return FakeNvml(
        [_rtx3090(a, nvlinks=[b] * 4, link_count_field=False, **idle),
         _rtx3090(b, nvlinks=[a] * 4, link_count_field=False, **idle)],
        driver="560.35.03", cuda=12060, topology=_pairs_same("SYS"),
    )


def mixed_4090_3090_chipset() -> FakeNvml:
    """A 4090 on CPU lanes and a 3090 in a chipset slot wired Gen4 x4; no NVLink on the 4090,
    an unbridged 3090 (links down); P2P not supported."""
    return FakeNvml(
        [_rtx4090("00000000:01:00.0", errors={"nvmlDeviceGetNvLinkState": NOT_SUPPORTED}),
         _rtx3090("00000000:0A:00.0", width_max=4, width_current=4, nvlinks=["", "", "", ""])],
        topology=_pairs_same("PHB"),
        p2p=lambda a, b: P2P_NOT_SUPPORTED,
    )


def h100_sxm_nvswitch_8x() -> FakeNvml:
    """HGX H100: 8 GPUs, 18 NVLinks each, every one to an NVSwitch; two NUMA nodes."""
    gpus = [
        FakeGpu(name="NVIDIA H100 80GB HBM3", bus_id=f"00000000:{bus:02X}:00.0", total_mib=81559, reserved_mib=553,
                free_mib=81004, cc=(9, 0), power_mw=700_000, mig=(0, 0), gen_max=5, gen_card_max=5, gen_current=5,
                nvlinks=["switch"] * 18)
        for bus in (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
    ]
    return FakeNvml(gpus, driver="535.161.08", cuda=12020,
                    topology=lambda a, b: TOPO["NODE"] if (a < 4) == (b < 4) else TOPO["SYS"])


def mig_a100() -> FakeNvml:
    return FakeNvml(
        [FakeGpu(name="NVIDIA A100-SXM4-80GB", bus_id="00000000:01:00.0", total_mib=81920, reserved_mib=0,
                 free_mib=81907, cc=(8, 0), power_mw=500_000, mig=(1, 1))],
        driver="535.54.03", cuda=12020,
    )


def dgx_spark() -> FakeNvml:
    """GB10: no framebuffer (memory v1 and v2 NotSupported), no power limit, PCIe readings meaningless."""
    gb10 = FakeGpu(
        name="NVIDIA GB10", bus_id="0000000F:01:00.0", cc=(12, 1), gen_max=1, width_max=1, gen_current=1,
        width_current=1, errors={"nvmlDeviceGetMemoryInfo": NOT_SUPPORTED, "nvmlDeviceGetMemoryInfo_v2": NOT_SUPPORTED,
                                 "nvmlDeviceGetEnforcedPowerLimit": NOT_SUPPORTED, "nvmlDeviceGetMigMode": NOT_SUPPORTED},
    )
    return FakeNvml([gb10], driver="580.95.05", cuda=13000)


def gpu_lost() -> FakeNvml:
    """Two 3090s; GPU 1 falls off the bus when its memory is read."""
    return FakeNvml([_rtx3090("00000000:01:00.0"), _rtx3090("00000000:02:00.0", lost_at="nvmlDeviceGetMemoryInfo_v2")])


def idle_gen1() -> FakeNvml:
    """One 4090 idling at PCIe Gen1 x16 in a Gen4 slot: not a downgraded link."""
    return FakeNvml([_rtx4090("00000000:01:00.0", gen_current=1, errors={"nvmlDeviceGetNvLinkState": NOT_SUPPORTED})])


def old_driver() -> FakeNvml:
    """A driver without nvmlDeviceGetMemoryInfo_v2 or GpuMaxPcieLinkGeneration (FunctionNotFound)."""
    g = _rtx3090("00000000:01:00.0", errors={"nvmlDeviceGetMemoryInfo_v2": FUNCTION_NOT_FOUND,
                                             "nvmlDeviceGetGpuMaxPcieLinkGeneration": FUNCTION_NOT_FOUND})
    return FakeNvml([g], driver="470.74", cuda=11040)


SCENARIOS: dict[str, Callable[[], FakeNvml]] = {
    f.__name__: f
    for f in (no_library, driver_not_loaded, no_permission, zero_gpus, rtx3090_nvlink_pair, mixed_4090_3090_chipset,
              h100_sxm_nvswitch_8x, mig_a100, dgx_spark, gpu_lost, idle_gen1, old_driver)
}


def scenario(name: str) -> FakeNvml:
    """A fresh fake for the named scenario."""
    return SCENARIOS[name]()
