"""What hardware is here: NVIDIA GPUs through NVML, else AMD GPUs through sysfs, else Apple silicon,
plus the host's RAM and CPU. `detect()` never raises for a machine without GPUs; what it could not
read is `None` plus a warning. `read_smi_xml()` reads a saved `nvidia-smi -q -x` dump instead."""

from __future__ import annotations

import dataclasses
import os
import sys
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a faster start)
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from advisor.probe.system import Runner
    from advisor.probe.types import Detection

_LAZY = {"read_nvml": "advisor.probe.nvml", "read_smi_xml": "advisor.probe.smi_xml",
         "read_topo_matrix": "advisor.probe.smi_xml", "DetectedGpu": "advisor.probe.types",
         "Detection": "advisor.probe.types", "PcieLink": "advisor.probe.types", "SystemInfo": "advisor.probe.types"}


def __getattr__(name: str) -> Any:
    """Readers load on first use, so `--gpu` runs never import the NVML or XML code (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)

__all__ = [
    "DetectedGpu", "Detection", "PcieLink", "SystemInfo",
    "detect", "read_nvml", "read_smi_xml", "read_topo_matrix",
]


def detect(
    nvml_module: Any = None,
    sysfs_root: str | os.PathLike[str] = "/",
    *,
    platform: str | None = None,
    run: "Runner | None" = None,
) -> "Detection":
    """The local machine: NVML first, then AMD (sysfs), then Apple silicon (sysctl)."""
    from advisor.probe.types import Detection, SystemInfo
    from advisor.probe.nvml import read_nvml
    from advisor.probe.system import apple_gpu, read_amd_gpus, read_system

    platform = platform or sys.platform
    warnings: list[str] = []
    try:
        system = read_system(sysfs_root, platform=platform, run=run)
    except Exception as e:  # noqa: BLE001 - the host facts are optional
        system, warnings = SystemInfo(), [f"system memory and CPU unknown ({e})"]
    nv = read_nvml(nvml_module)
    if nv.gpus:
        return dataclasses.replace(nv, system=system, warnings=nv.warnings + tuple(warnings))
    try:
        amd, amd_warnings = read_amd_gpus(sysfs_root)
    except Exception as e:  # noqa: BLE001
        amd, amd_warnings = (), (f"AMD GPUs could not be read from sysfs ({e})",)
    if amd:
        return Detection(source="sysfs", gpus=amd, system=system, warnings=amd_warnings + tuple(warnings))
    gpu = apple_gpu(system) if platform == "darwin" else None
    if gpu is not None:
        return Detection(source="apple", gpus=(gpu,), system=system, warnings=tuple(warnings))
    return dataclasses.replace(nv, system=system, warnings=nv.warnings + amd_warnings + tuple(warnings))
