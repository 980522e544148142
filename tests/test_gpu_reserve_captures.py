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
_FB = re.compile(r"<fb_memory_usage>\s*<total>(\d+) MiB</total>\s*<reserved>(\d+) MiB</reserved>"
                 r"|FB Memory Usage\s*\n\s*Total\s*:\s*(\d+) MiB\s*\n\s*Reserved\s*:\s*(\d+) MiB")


def captured(catalog) -> dict[str, list[int]]:
    """Catalog GPU id -> the Reserved MiB of each captured GPU of that card (one per file and card: a file of
    eight identical cards is one capture). A MIG instance's block (smaller total) is not the card's."""
    seen: dict[str, list[int]] = {}
    for f in sorted(CAPTURES.iterdir()):
        per_file = {}
        for part in _GPU.split(f.read_text(errors="ignore"))[1:]:
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


def test_a_card_without_a_capture_keeps_its_vendors_reserve(catalog):
    gpu = catalog.rules.memory.discrete_gpu
    assert "rtx-5090" not in gpu.gpu_reserved_mib and gpu.reserved_mib("rtx-5090", "nvidia") == 400
    assert gpu.reserved_mib("rtx-4090", "nvidia") == 346 and gpu.reserved_mib("rx-7900-xtx", "amd") == 16
