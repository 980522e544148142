"""The headless CLI: the contract's JSON, exit codes, errors as one line, import hygiene."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CHECK_KEYS = {"schema_version", "model", "quant", "runtime", "split", "context_tokens", "rig", "fits", "runs",
              "placement", "memory", "max_context_tokens", "speed", "interconnect", "findings"}


def test_check_json_has_every_contract_key(run_cli):
    r = run_cli("check", "llama-3.1-8b", "--gpu", "rtx-3090", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert CHECK_KEYS <= set(d)
    assert set(d["model"]) >= {"id", "name", "params_total", "params_active"}
    assert d["rig"]["gpus"][0]["id"] == "rtx-3090" and d["rig"]["gpus"][0]["vram_bytes"] == 24 * 1024**3
    assert set(d["placement"]["devices"][0]) >= {"device", "weights_bytes", "kv_cache_bytes", "overhead_bytes",
                                                 "total_bytes", "capacity_bytes"}
    assert set(d["memory"]) == {"weights_bytes", "kv_cache_bytes", "overhead_bytes", "total_bytes"}
    assert d["placement"]["strategy"] == "single_gpu"
    assert isinstance(d["speed"]["decode_tokens_per_s"], float) and d["speed"]["basis"]
    assert d["interconnect"]["nvlink"] == "not_applicable"
    assert all(set(f) == {"code", "severity", "message"} for f in d["findings"])
    assert d["context_tokens"] == 8192 and d["fits"] is True


def test_405b_on_a_3090_exits_1(run_cli):
    r = run_cli("check", "llama-3.1-405b", "--gpu", "rtx-3090", "--json")
    assert r.returncode == 1
    d = json.loads(r.stdout)
    assert d["fits"] is False


@pytest.mark.parametrize("args,needle", [
    (["check", "llama-3.1-8c", "--gpu", "rtx-3090"], "llama-3.1-8b"),
    (["check", "llama-3.1-8b", "--gpu", "rtx-3095"], "rtx-3090"),
    (["check", "llama-3.1-8b", "--gpu", "rtx-3090", "--ctx", "abc"], "--ctx"),
    (["check", "llama-3.1-8b", "--gpu", "rtx-3090", "--ctx", "-5"], "--ctx"),
    (["check", "llama-3.1-8b", "--gpu", "rtx-3090", "--quant", "Q9_X"], "quant"),
    (["check", "llama-3.1-8b", "--gpu", "rtx-3090", "--ram", "-3"], "--ram"),
    (["check", "llama-3.1-8b", "--gpu", "999xrtx-3090"], "out of range"),
    (["check", "llama-3.1-8b", "--gpu", "rtx-4090", "--nvlink"], "NVLink"),
    (["check", "llama-3.1-8b", "--gpu", "rtx-3090", "--pcie", "9x99"], "--pcie"),
    (["check", "llama-3.1-8b", "--gpu", "rtx-3090", "--runtime", "foo"], "runtime"),
    (["check", "llama-3.1-8b", "--rig", "/nonexistent/rig.toml"], "cannot read"),
    (["bogus-command-or-model"], "bogus"),
])
def test_bad_input_is_one_line_and_exit_2(run_cli, args, needle):
    r = run_cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert needle.lower() in lines[0].lower()


@pytest.mark.parametrize("args,start", [
    (["check", "--bogus"], "advisor: unrecognized arguments: --bogus"),
    (["check", "llama-3.1-8b", "--split", "diagonal"], "advisor: check: argument --split"),
])
def test_a_usage_error_names_the_program_once(run_cli, args, start):
    r = run_cli(*args)
    assert r.returncode == 2 and r.stderr.startswith(start), r.stderr


def test_malformed_rig_file_is_exit_2(run_cli, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[rig\nram_gib = ")
    r = run_cli("check", "llama-3.1-8b", "--rig", str(bad))
    assert r.returncode == 2 and "malformed TOML" in r.stderr


def test_text_and_markdown(run_cli):
    t = run_cli("check", "llama-3.1-70b", "--gpu", "2xrtx-3090", "--quant", "Q4_K_M")
    assert t.returncode == 0 and "layer split" in t.stdout and "NVLink" in t.stdout and "\x1b[" not in t.stdout
    m = run_cli("check", "llama-3.1-70b", "--gpu", "2xrtx-3090", "--format", "markdown")
    assert m.stdout.startswith("## ") and "| gpu0 |" in m.stdout


def test_headless_check_does_not_import_textual():
    code = ("import sys, io, contextlib\nfrom advisor.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['check', 'llama-3.1-8b', '--gpu', 'rtx-3090', '--json'])\n"
            "print(','.join(m for m in ('textual', 'rich', 'pydantic', 'pynvml') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"headless check imported {r.stdout.strip()}"


def test_models_and_gpus_lists(run_cli):
    m = json.loads(run_cli("models", "--json").stdout)
    for key in ("id", "name", "params_total", "params_active", "layers", "hidden_size", "attention_heads",
                "kv_heads", "head_dim", "vocab_size", "max_context"):
        assert key in m[0]
    g = json.loads(run_cli("gpus", "3090", "--json").stdout)
    assert {x["id"] for x in g} >= {"rtx-3090", "rtx-3090-ti"}
    for key in ("id", "name", "vendor", "vram_bytes", "memory_bandwidth_gb_s", "fp16_tflops", "pcie_gen",
                "pcie_lanes", "nvlink_gb_s", "unified_memory", "price_usd"):
        assert key in g[0]


def test_catalog_validate_path_schema(run_cli, tmp_path):
    assert run_cli("catalog", "validate").returncode == 0
    assert "cfg" in run_cli("catalog", "path").stdout
    schema = json.loads(run_cli("catalog", "schema").stdout)
    assert "vram_gib" in schema["gpu"]["properties"]
    assert schema["gpu"]["properties"]["vram_gib"].get("description")


def test_user_catalog_overrides_by_id(run_cli, tmp_path):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "mine.toml").write_text('[[gpu]]\nid = "rtx-3090"\nprice = { usd = 555, date = "2026-11", source = "my shop" }\n')
    g = json.loads(run_cli("gpus", "rtx-3090", "--json").stdout)
    assert [x["price_usd"] for x in g if x["id"] == "rtx-3090"] == [555]
    (cfg / "bad.toml").write_text('[[gpu]]\nid = "x"\nvram_gib = "lots"\n')
    r = run_cli("catalog", "validate")
    assert r.returncode == 1 and "bad.toml" in r.stdout
    r = run_cli("check", "llama-3.1-8b", "--gpu", "rtx-3090")
    assert r.returncode == 2 and "bad.toml" in r.stderr


def test_rig_file_round_trip(run_cli, tmp_path):
    from advisor.catalog.load import load_catalog
    from advisor.probe.flags import rig_from_flags
    from advisor.probe.rigfile import rig_toml

    cat = load_catalog(user=False)
    rig = rig_from_flags(cat, ["2xrtx-3090"], nvlink=True, pcie="4x8", ram="64")
    path = tmp_path / "rig.toml"
    path.write_text(rig_toml(rig))
    a = json.loads(run_cli("check", "llama-3.1-70b", "--rig", str(path), "--json").stdout)
    b = json.loads(run_cli("check", "llama-3.1-70b", "--gpu", "2xrtx-3090", "--nvlink", "--pcie", "4x8",
                           "--ram", "64", "--json").stdout)
    a["rig"].pop("source"), b["rig"].pop("source")
    assert a == b


def test_import_linter_contracts_hold():
    """pyproject.toml's import-linter contracts: the engine is pure, the headless path never reaches the TUI."""
    from pathlib import Path

    exe = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("content", [
    b"[rig]\nram_gib = 1e309\n",
    b'[[gpu]]\nid = "rtx-3090"\ncount = 100000\n',
    b'[[gpu]]\nid = "x"\nvram_gib = -5\n',
    b'[[gpu]]\nid = "rtx-3090"\npcie = 5\n',
    b'[rig]\nnvlink = [[0, 7]]\n[[gpu]]\nid = "rtx-3090"\n',
    b'[[gpu]]\nid = "rtx-3090"\nmemory_gib = "lots"\n',
    b'[[gpu]]\nid = "m2-ultra-192gb"\n[[gpu]]\nid = "rtx-3090"\n',
    b'[[gpu]]\nid = "rtx-3090"\nnode = 1\n[[gpu]]\nid = "rtx-3090"\n',
    b'[rig]\nnetwork = "carrier-pigeon"\n',
    b'[[gpu]]\nid = 42\n',
    b'[bogus]\nx = 1\n',
    bytes(range(256)) * 8,
], ids=lambda c: c[:24].decode("latin-1").replace("\n", " "))
def test_hostile_rig_files_are_one_line_and_exit_2(run_cli, tmp_path, content):
    path = tmp_path / "rig.toml"
    path.write_bytes(content)
    r = run_cli("check", "llama-3.1-8b", "--rig", str(path))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("entry", [
    '[[model]]\nid = "llama-3.1-8b"\nlayers = 1000000000000\n',
    '[[model]]\nid = "llama-3.1-8b"\nkv_heads = 64\n',
    '[[gpu]]\nid = "rtx-3090"\nmemory_bandwidth_gb_s = -1\n',
    '[[gpu]]\nid = "rtx-3090"\nprice = { usd = -5, date = "x", source = "y" }\n',
    '[[quant]]\nid = "Q4_K_M"\nbits_per_weight = 0\n',
])
def test_absurd_user_entries_are_refused(run_cli, tmp_path, entry):
    cfg = tmp_path / "cfg"
    cfg.mkdir(exist_ok=True)
    (cfg / "mine.toml").write_text(entry)
    r = run_cli("check", "llama-3.1-8b", "--gpu", "rtx-3090")
    assert r.returncode == 2 and "mine.toml" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_no_terminal_no_app_but_an_answer(run_cli):
    """`advisor` in a pipe or a script answers in text instead of starting the app."""
    r = run_cli()
    assert r.returncode in (0, 1) and ("What runs on" in r.stdout or "No GPU" in r.stdout)
    assert "not a terminal" in r.stderr
    r = run_cli("llama-3.1-8b", "--gpu", "rtx-3090")
    assert r.returncode == 0 and "FITS" in r.stdout
