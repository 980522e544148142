"""The CPU catalog (hardware_db/cpus.toml) and CPU decode (issue 26): every CPU cited with the arithmetic of its
peak; the rulebook's compute share is what its cited llama.cpp run gives; a rig names its CPU by --cpu, its rig
file or the probe's string (an unknown one changes nothing); decode from RAM is the slower of the (fabric-capped)
read and the multiply; the CPU-only rows held out of every fit are within the issue's 25%."""

from __future__ import annotations

import re
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.engine.optiontable import option
from advisor.engine.options import Options
from advisor.engine.placement import Placer
from advisor.engine.scenario import Scenario
from advisor.engine.speed import decode_step, host_read_gb_s
from advisor.errors import AdvisorError
from advisor.probe.build import build_rig, match_cpu, with_cpu
from advisor.probe.flags import rig_from_flags

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def test_every_cpu_is_cited_and_its_peak_is_its_arithmetic(catalog):
    assert len(catalog.cpus) >= 7
    for cpu in catalog.cpus.values():
        assert cpu.sources and all(s.startswith("https://") for s in cpu.sources), cpu.id
        stated = re.search(r"= ([\d,.]+) GOPS int8$", cpu.peak_basis)
        assert stated, cpu.id
        assert float(stated.group(1).replace(",", "")) == pytest.approx(cpu.int8_gops, abs=0.05), cpu.id
        if cpu.ccd_read_gb_s:
            assert cpu.ccds and cpu.fabric_basis, cpu.id


def test_the_compute_share_is_its_cited_run(catalog):
    """rules/speed.toml [cpu_decode] compute_efficiency: mainline llama.cpp, Ryzen 9 7950X, 4 threads, LLaMA-3.1-8B Q4_0
    tg128 11.25 t/s (ik_llama.cpp PR #54), 2 ops per multiplied parameter over 4 cores' int8 peak."""
    cpu, model = catalog.cpus["ryzen-9-7950x"], catalog.models["llama-3.1-8b"]
    four_cores = replace(cpu.clusters[0], cores=4).int8_gops
    params = model.params_active - model.vocab_size * model.hidden_size
    assert round(11.25 * 2 * params / 1e9 / four_cores, 4) == catalog.rules.speed.cpu_decode.compute_efficiency


@pytest.mark.parametrize("name, cid", [
    ("AMD Ryzen 9 7950X 16-Core Processor", "ryzen-9-7950x"),
    ("13th Gen Intel(R) Core(TM) i3-1315U", "core-i3-1315u"),
    ("Raspberry Pi 5 Model B Rev 1.0", "raspberry-pi-5"),
    ("CPU only: Cix CP8180 (MetaComputing AI PC Framework 13 mainboard)", "cix-p1"),
    ("Raspberry Pi 500+", None),  # whole words only: `Pi 5` is not in `Pi 500+`
    ("Test CPU", None), ("", None),
])
def test_a_probe_string_names_its_cpu_or_nothing(catalog, name, cid):
    assert match_cpu(catalog, name) == cid


def test_the_cpu_option_is_a_rig_option():
    d = option("cpu")
    assert d.kind == "text" and d.group == "rig" and set(d.commands) == {"check", "fit", "app"} and not d.field


def _cpu_rig(catalog, cpu: str | None, **kw):
    return with_cpu(catalog, rig_from_flags(catalog, [], ram=64, **kw), cpu)


def _decode_s(catalog, rig, model="llama-3.2-3b", quant="Q4_K_M") -> float:
    sc = Scenario.of(catalog.models[model], catalog.quants[quant], catalog.runtimes["llama.cpp"], rig,
                     Options(quant=quant, ctx=512), catalog.rules).at_context(512)
    placement = Placer(sc).at(512)
    assert placement.strategy == "cpu_only"
    return decode_step(sc, placement).host_s


def test_a_weak_cpu_is_compute_bound_and_an_unknown_one_is_as_before(catalog):
    unknown = rig_from_flags(catalog, [], ram=64)
    assert with_cpu(catalog, unknown) == unknown  # no CPU named: nothing changes
    i3 = _cpu_rig(catalog, "core-i3-1315u", ram_bandwidth_gb_s=unknown.ram_bandwidth_gb_s)
    slow = _decode_s(catalog, i3)
    assert slow > _decode_s(catalog, unknown) * 1.3  # its 2 default threads, not its RAM, set the pace
    # compute bound: a smaller quant reads less but multiplies as many weights
    assert _decode_s(catalog, i3, quant="Q8_0") == pytest.approx(slow, rel=0.02)


def test_the_cpu_gives_the_ram_bandwidth_unless_the_rig_states_it(catalog):
    assert _cpu_rig(catalog, "raspberry-pi-5").ram_bandwidth_gb_s == pytest.approx(17.068)
    assert _cpu_rig(catalog, "raspberry-pi-5", ram_bandwidth_gb_s=30.0).ram_bandwidth_gb_s == 30.0
    assert _cpu_rig(catalog, "2xepyc-9175f").ram_bandwidth_gb_s == pytest.approx(2 * 614.4)


def test_few_ccds_cannot_pull_every_channel(catalog):
    """A 2-CCD Ryzen on an 8-channel board reads at most its two fabric links (2 x 51.2 GB/s)."""
    rig = _cpu_rig(catalog, "ryzen-9-5900x", ram_bandwidth_gb_s=204.8)
    assert host_read_gb_s(rig) == pytest.approx(102.4)
    assert host_read_gb_s(replace(rig, cpu_spec=None)) == 204.8


def test_a_rig_file_and_the_flag_name_the_cpu(catalog, tmp_path):
    f = tmp_path / "rig.toml"
    f.write_text('[rig]\ncpu = "AMD Ryzen 9 7950X 16-Core Processor"\nram_gib = 64\n')
    rig = build_rig(catalog, rig_file=f)
    assert rig.cpu_spec.id == "ryzen-9-7950x" and rig.ram_bandwidth_gb_s == pytest.approx(83.2)
    pi = with_cpu(catalog, rig, "Raspberry Pi 5")  # --cpu over the rig file's: its channels too
    assert pi.cpu_spec.id == "raspberry-pi-5" and pi.ram_bandwidth_gb_s == pytest.approx(17.068)
    stated = with_cpu(catalog, build_rig(catalog, rig_file=f, ram_bw="ddr5-6000x2"), "raspberry-pi-5")
    assert stated.ram_bandwidth_gb_s == 96.0  # --ram-bw is the rig's own: kept
    with pytest.raises(AdvisorError, match="unknown cpu"):
        with_cpu(catalog, rig, "xeon-9999")
    f.write_text('[rig]\ncpu = "Some Future CPU"\n')
    assert build_rig(catalog, rig_file=f).cpu_spec is None


# Reached on the CPU-only rows held out of every fit (bench/accuracy.py --heldout): 10.7% median over 3 sources
# (Cix P1 8.8%, i3-1315U 10.7%, Ryzen AI Max 385 753%: its own prefill, 4.6 t/s at pp512, is far below what
# 8 Zen 5 cores do); 50.7% with the CPU unknown. The target: 25%.
CPU_ONLY_DECODE_MEDIAN_MAX = 0.25


def test_cpu_only_decode_held_out(catalog):
    from accuracy import cpu_only_decode, held_out_2025

    by_source = cpu_only_decode(held_out_2025([]))
    now = [e for errs, _ in by_source.values() for e in errs]
    before = [e for _, errs in by_source.values() for e in errs]
    assert len(by_source) >= 3 and statistics.median(now) <= CPU_ONLY_DECODE_MEDIAN_MAX < statistics.median(before)


def test_the_compute_ceiling_leaves_the_bandwidth_bound_runs_bandwidth_bound(catalog):
    """The public CPU-only runs that state their RAM (tests/data/cpu_ram_decode.csv) read at 0.27-0.84 of their
    RAM's peak, so they are bandwidth bound: where the catalog has the CPU and the row names its model, the compute
    ceiling is above the measured speed."""
    import cpu_ram_share

    checked = 0
    for r, b, _ in cpu_ram_share.shares(catalog):
        cid = match_cpu(catalog, r["cpu"])
        if cid is None or not r["model"]:
            continue
        cpu, quant = catalog.cpus[cid], catalog.quants[r["quant"]]
        params = b / (quant.bits_per_weight / 8)
        peak = cpu.int8_gops * int(r["sockets"]) * 1e9
        ceiling = peak * catalog.rules.speed.cpu_decode.compute_efficiency / (2 * params)
        assert ceiling > float(r["tok_s"]) * 1.5, (r["machine"], ceiling, r["tok_s"])
        checked += 1
    assert checked >= 3
