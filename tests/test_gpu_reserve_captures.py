"""Each catalog card captured in shared/data/nvidia_smi plans with the reserve its driver was seen keeping
(rules/memory.toml [discrete_gpu] gpu_reserved_mib): the median of the "Reserved" figures of its captures, real
`nvidia-smi -q` / `-q -x` outputs of public sources (the folder's INDEX.md names each one). A capture of a card the
catalog has, left out of the table, fails; so does a figure that is not its captures' median."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from advisor.probe.build import match_gpu

CAPTURES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nvidia_smi"
# one GPU's section: its product name, then every FB memory block in it (a MIG device's come first in XML)
_GPU = re.compile(r"<gpu id=|\nGPU [0-9A-Fa-f]{8}:")
_NAME = re.compile(r"<product_name>(.+?)</product_name>|Product Name\s*:\s*(.+)")
_WDDM = re.compile(r"<current_dm>WDDM</current_dm>|Current\s*:\s*WDDM")
_FB = re.compile(r"<fb_memory_usage>\s*<total>(\d+) MiB</total>\s*<reserved>(\d+) MiB</reserved>"
                 r"|FB Memory Usage\s*\n\s*Total\s*:\s*(\d+) MiB\s*\n\s*Reserved\s*:\s*(\d+) MiB")


def captured(catalog) -> dict[str, list[int]]:
    """Catalog GPU id -> the Reserved MiB of each captured GPU of that card (one per file and card: a file of
    eight identical cards is one capture). A MIG instance's block (smaller total) is not the card's. A card under
    Windows' display driver model (WDDM) is left out: there the OS's video memory manager, not the driver alone,
    keeps the card's memory, so its "Reserved" is another platform's figure (one capture: an RTX 2080 at 182 MiB
    against 406 on Linux)."""
    seen: dict[str, list[int]] = {}
    for f in sorted(CAPTURES.iterdir()):
        per_file = {}
        for part in _GPU.split(f.read_text(errors="ignore"))[1:]:
            if _WDDM.search(part):
                continue
            name = next((a or b for a, b in _NAME.findall(part)), "").strip()
            blocks = [(int(a or c), int(b or d)) for a, b, c, d in _FB.findall(part)]
            if not name or not blocks:
                continue
            total, reserved = max(blocks)
            gpu = match_gpu(catalog, name, total * 2**20)
            if gpu:
                per_file[gpu] = reserved
        for gpu, reserved in per_file.items():
            seen.setdefault(gpu, []).append(reserved)
    return seen


@pytest.fixture(scope="module")
def captures(catalog):
    if not CAPTURES.is_dir():
        pytest.skip("shared/data/nvidia_smi is not beside the checkout")
    return captured(catalog)


def test_every_captured_card_plans_with_the_median_of_its_captures(catalog, captures):
    table = catalog.rules.memory.discrete_gpu.gpu_reserved_mib
    assert len(captures) >= 20
    assert {g: statistics.median(r) for g, r in captures.items()} == table


def test_the_a100_40gb_total_is_what_vllm_logs(catalog):
    """vLLM logs total_gpu_memory 39.38 GiB on an A100 40GB (tests/data/oom_reports.csv vllm-16570): its 40,960 MiB
    less the 612.5 MiB reserve is 39.40 GiB, where the flat 400 MiB gave 39.61."""
    spec = catalog.gpus["a100-sxm4-40gb"]
    left = spec.vram_gib * 1024 - catalog.rules.memory.discrete_gpu.reserved_mib(spec.id, spec.vendor)
    assert abs(left / 1024 - 39.38) < 0.03



def test_the_rtx_5090_total_is_what_nvidia_smi_and_vllm_report(catalog):
    """The 5090 is 32,607 MiB as nvidia-smi reports it (club-3090 #769, driver 595.71.05; hardware_db notes), not
    32 GiB; less the consumer reserve it is within 0.1 GiB of vLLM's logged 'total_gpu_memory (31.37GiB)'
    (vllm-project/vllm #14452), where 32 GiB gave 31.62."""
    spec = catalog.gpus["rtx-5090"]
    assert spec.vram_gib * 1024 == 32607
    left = spec.vram_gib * 1024 - catalog.rules.memory.discrete_gpu.reserved_mib(spec.id, spec.vendor, spec.category)
    assert abs(left / 1024 - 31.37) < 0.1

def test_a_card_without_a_capture_takes_its_categorys_median(catalog, captures):
    """An uncaptured NVIDIA card plans with the median of its category's captured cards (data-centre cards keep
    more than GeForce ones); another vendor keeps its own figure."""
    gpu = catalog.rules.memory.discrete_gpu
    by: dict[str, list[float]] = {}
    for g in captures:
        by.setdefault(catalog.gpus[g].category, []).append(gpu.gpu_reserved_mib[g])
    assert gpu.category_reserved_mib == {c: statistics.median(v) for c, v in by.items()}
    h200, r5090 = catalog.gpus["h200-sxm"], catalog.gpus["rtx-5090"]
    assert "h200-sxm" not in gpu.gpu_reserved_mib and "rtx-5090" not in gpu.gpu_reserved_mib
    assert gpu.reserved_mib(h200.id, h200.vendor, h200.category) == gpu.category_reserved_mib["datacenter"] == 536
    assert gpu.reserved_mib(r5090.id, r5090.vendor, r5090.category) == gpu.category_reserved_mib["consumer"] == 387
    assert gpu.reserved_mib("rx-7900-xtx", "amd", "consumer") == 16
