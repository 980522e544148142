"""On a real GPU machine: does `advisor.probe.detect()` agree with `nvidia-smi`?

    python bench/gpu_check.py /tmp/nvidia-smi.xml

Prints the Detection JSON, saves `nvidia-smi -q -x` to the given path, reads it back with
`read_smi_xml`, and prints one PASS/FAIL line per check. Exit status 1 when any check fails.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.probe import detect, read_smi_xml, read_topo_matrix  # noqa: E402

MIB = 1024**2


def check(name: str, ok: bool, detail: str = "") -> bool:
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    return ok


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "nvidia-smi.xml")
    d = detect()
    print(json.dumps(d.to_json(), indent=2))
    results = [check("nvml source", d.source == "nvml", d.source), check("gpus found", len(d.gpus) > 0, str(len(d.gpus)))]
    if shutil.which("nvidia-smi") is None:
        check("nvidia-smi present", False, "not installed; NVML-only checks above")
        return 0 if all(results) else 1
    out.write_bytes(subprocess.run(["nvidia-smi", "-q", "-x"], capture_output=True, check=True, timeout=120).stdout)
    smi = read_smi_xml(out)
    results.append(check("gpu count", len(smi.gpus) == len(d.gpus), f"nvml {len(d.gpus)}, smi {len(smi.gpus)}"))
    for a, b in zip(d.gpus, smi.gpus):
        results.append(check(f"gpu{a.index} name", a.name == b.name, f"{a.name!r} vs {b.name!r}"))
        diff = abs((a.vram_bytes or 0) - (b.vram_bytes or 0))
        results.append(check(f"gpu{a.index} memory", a.vram_bytes == b.vram_bytes or (a.vram_bytes and diff < MIB),
                             f"nvml {a.vram_bytes}, smi {b.vram_bytes}"))
        results.append(check(f"gpu{a.index} pcie max gen", (a.pcie and a.pcie.gen_max) == (b.pcie and b.pcie.gen_max),
                             f"nvml {a.pcie}, smi {b.pcie}"))
    results.append(check("driver version", d.driver_version == smi.driver_version, f"{d.driver_version} vs {smi.driver_version}"))
    topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=60)
    if topo.returncode == 0:
        words = read_topo_matrix(topo.stdout)
        results.append(check("topology", d.topology == words, f"nvml {d.topology}, smi {words}"))
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
