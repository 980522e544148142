"""Remote references against a real HTTP server on 127.0.0.1 (tests/hubserver.py), never the live Hub.

huggingface_hub is pointed at it through HF_ENDPOINT, the Ollama registry through
ADVISOR_OLLAMA_REGISTRY. The files it serves are real: GGUF written by gguf-py's GGUFWriter,
safetensors by the safetensors package (tests/test_modelfile.py's writers). Each test checks the
exact bytes against the file's own tensors, and what went over the wire (only headers, by range).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")
pytest.importorskip("gguf")
pytest.importorskip("safetensors")

from hubserver import Hub, Repo, Server  # noqa: E402
from test_modelfile import LLAMA_CFG, Tiny, make_gguf, make_st_folder  # noqa: E402

from advisor.errors import AdvisorError  # noqa: E402
from advisor.modelfile import fetch, read_model  # noqa: E402
from advisor.modelfile.remote import parse_ref  # noqa: E402

BIG = Tiny(layers=4, hidden=1024, ffn=4096, vocab=4000)
"""65 MB of tensor data behind a header of a few KB: reading more than the header shows."""


def make_mmproj(path: Path, *, hidden: int = 1152, rows: int = 1024, dtype=np.float16) -> dict[str, int]:
    """An mmproj GGUF as llama.cpp's converter writes one (general.architecture clip, clip.* keys, v.* tensors),
    by gguf-py's GGUFWriter; `hidden` tells files apart, `rows` sizes the tensor data behind the header.
    Returns {tensor name: bytes}."""
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), "clip")
    w.add_string("clip.projector_type", "gemma3")
    w.add_bool("clip.has_vision_encoder", True)
    for key, value in (("embedding_length", hidden), ("feed_forward_length", 4304), ("block_count", 27),
                       ("attention.head_count", 16), ("image_size", 896), ("patch_size", 14), ("projection_dim", 2560)):
        w.add_uint32(f"clip.vision.{key}", value)
    tensors = {"v.patch_embd.weight": np.zeros((rows, 1024), dtype=dtype),
               "v.blk.0.attn_q.weight": np.zeros((64, 64), dtype=dtype),
               "v.blk.0.ln1.weight": np.zeros((64,), dtype=np.float32)}
    for name, a in tensors.items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {name: a.nbytes for name, a in tensors.items()}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, object]:
    d = tmp_path_factory.mktemp("files")
    out: dict[str, object] = {}
    out["big_expected"] = make_gguf(d / "big.gguf", BIG)
    out["big"] = (d / "big.gguf").read_bytes()
    out["small_expected"] = make_gguf(d / "small.gguf")
    out["small"] = (d / "small.gguf").read_bytes()
    split_dir = d / "split"
    split_dir.mkdir()
    out["split_expected"] = make_gguf(split_dir / "Tiny-UD-Q4_K_XL.gguf", Tiny(), split_max_tensors=8)
    out["split"] = {p.name: p.read_bytes() for p in sorted(split_dir.iterdir())}
    st = d / "st"
    out["st_tensors"] = make_st_folder(st, shards=3)
    out["st"] = {p.name: p.read_bytes() for p in st.iterdir()}
    out["mmproj_expected"] = make_mmproj(d / "mmproj.gguf")
    out["mmproj"] = (d / "mmproj.gguf").read_bytes()
    return out


@pytest.fixture
def hub(files, tmp_path, monkeypatch):
    h = Hub()
    h.repos["org/Tiny"] = Repo(files=dict(files["st"]))
    split = {f"UD-Q4_K_XL/{name}": data for name, data in files["split"].items()}
    h.repos["org/Tiny-GGUF"] = Repo(files={"Tiny-Q8_0.gguf": files["big"], "Tiny-UD-Q2_K_XL.gguf": files["small"],
                                           "mmproj-F16.gguf": files["mmproj"], "README.md": b"# tiny", **split})
    h.repos["org/Gated"] = Repo(files=dict(files["st"]), gated=True)
    with Server(h) as url:
        h.url = url
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setenv("ADVISOR_OLLAMA_REGISTRY", url)
        monkeypatch.setenv("ADVISOR_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no saved token, an empty HF cache
        monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))  # an empty local store
        yield h


def _cli(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})


def _exact(lm, expected: dict[str, int]) -> None:
    assert lm.exact
    assert lm.layout.total_bytes == sum(expected.values())
    assert lm.layout.embed_bytes == expected["token_embd.weight"]


# --- references ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, kind, repo, tag, filename", [
    ("Qwen/Qwen3-32B", "hf", "Qwen/Qwen3-32B", "", ""),
    ("hf:Qwen/Qwen3-32B", "hf", "Qwen/Qwen3-32B", "", ""),
    ("unsloth/Qwen3-235B-A22B-GGUF:UD-Q4_K_XL", "hf", "unsloth/Qwen3-235B-A22B-GGUF", "UD-Q4_K_XL", ""),
    ("https://huggingface.co/Qwen/Qwen3-32B", "hf", "Qwen/Qwen3-32B", "", ""),
    ("https://huggingface.co/unsloth/x-GGUF/resolve/main/UD-Q4_K_XL/x-00001-of-00002.gguf", "hf", "unsloth/x-GGUF", "",
     "UD-Q4_K_XL/x-00001-of-00002.gguf"),
    ("https://example.com/models/x-Q4_K_M.gguf", "url", "", "", ""),
    ("ollama:llama3.1:70b", "ollama", "", "70b", ""),
    ("llama3.1:70b", "ollama", "", "70b", ""),
])
def test_parse_ref(text, kind, repo, tag, filename) -> None:
    ref = parse_ref(text)
    assert (ref.kind, ref.repo, ref.tag, ref.filename) == (kind, repo, tag, filename)


@pytest.mark.parametrize("text", ["llama-3.1-70b", "Llama 3.1 70B", "rtx-3090", "./model.gguf", "a b/c"])
def test_plain_names_are_not_references(text) -> None:
    assert parse_ref(text) is None


# --- Hugging Face ------------------------------------------------------------------------------

def test_hf_safetensors_repo_exact_and_cached(hub, files) -> None:
    lm = read_model("hf:org/Tiny")
    tensors = files["st_tensors"]
    assert lm.exact and lm.source == "hf remote" and lm.spec.name == "org/Tiny"
    assert lm.layout.total_bytes == sum(a.nbytes for a in tensors.values())
    assert lm.spec.layers == LLAMA_CFG["num_hidden_layers"] and lm.spec.max_context == LLAMA_CFG["max_position_embeddings"]
    assert any("/api/models/org/Tiny" in p for p, _, _ in hub.log)
    assert all(r.startswith("bytes=") for p, r, _ in hub.log if p.endswith(".safetensors") or "/cdn/" in p)
    before = len(hub.log)
    assert read_model("org/Tiny").layout == lm.layout  # the second ask: from the cache, no request
    assert len(hub.log) == before


def test_hf_gguf_repo_lists_its_files(hub) -> None:
    with pytest.raises(AdvisorError) as err:
        read_model("org/Tiny-GGUF")
    text = str(err.value)
    assert "holds 3 GGUF models" in text and "org/Tiny-GGUF:TAG" in text
    assert "UD-Q4_K_XL" in text and "(3 parts)" in text and "UD-Q2_K_XL" in text and "Q8_0 65.6 MB" in text
    assert "mmproj" not in text


def test_hf_gguf_tag_reads_only_the_header(hub, files) -> None:
    lm = read_model("org/Tiny-GGUF:Q8_0")
    _exact(lm, files["big_expected"])
    assert lm.quant.id == "Q8_0"
    assert hub.sent("Tiny-Q8_0") < 2 * fetch.MIB < len(files["big"]) / 30


def test_hf_gguf_split_tag_in_a_folder(hub, files) -> None:
    lm = read_model("org/Tiny-GGUF:UD-Q4_K_XL")
    _exact(lm, files["split_expected"])
    assert lm.quant.id == "UD-Q4_K_XL" and "file's own type says Q8_0" in lm.quant.bpw_basis
    parts = {p for p, r, _ in hub.log if "/cdn/" in p and "UD-Q4_K_XL" in p and r.startswith("bytes=0-")}
    assert len(parts) == 3  # every part's header
    assert all(r.startswith("bytes=") for p, r, _ in hub.log if "UD-Q4_K_XL" in p)  # by range only
    assert not any("agent-harnesses" in p for p, _, _ in hub.log)  # nothing but what the reference needs


def test_hf_gguf_unknown_tag_names_the_closest(hub) -> None:
    with pytest.raises(AdvisorError, match="no GGUF file tagged Q4_K_XL") as err:
        read_model("org/Tiny-GGUF:Q4_K_XL")
    assert err.value.hint.startswith("its GGUF files: UD-Q4_K_XL")


def test_hf_file_url(hub, files) -> None:
    lm = read_model(f"{hub.url}/org/Tiny-GGUF/resolve/main/Tiny-Q8_0.gguf")
    _exact(lm, files["big_expected"])


def test_hf_repo_own_quant(hub, files, tmp_path) -> None:
    cfg = {**LLAMA_CFG, "quantization_config": {
        "quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                                      "weights": {"num_bits": 4, "type": "int", "group_size": 32, "strategy": "group"}}}}}
    folder = tmp_path / "q"
    make_st_folder(folder, cfg)
    hub.repos["org/Tiny-W4A16"] = Repo(files={p.name: p.read_bytes() for p in folder.iterdir()})
    assert read_model("org/Tiny-W4A16").quant.id == "W4A16"


def test_hf_config_only_keeps_its_own_context(hub) -> None:
    cfg = {**LLAMA_CFG, "max_position_embeddings": 262144}
    hub.repos["org/Only-Config"] = Repo(files={"config.json": json.dumps(cfg).encode()})
    lm = read_model("org/Only-Config")
    assert lm.spec.max_context == 262144 and not lm.exact


def test_gated_repo_asks_for_hf_token(hub, monkeypatch) -> None:
    with pytest.raises(AdvisorError, match="answered 401 .gated or private.") as err:
        read_model("org/Gated")
    assert "set HF_TOKEN" in err.value.hint
    monkeypatch.setenv("HF_TOKEN", "hf_good")
    assert read_model("org/Gated").exact


def test_missing_repo_names_the_closest(hub) -> None:
    with pytest.raises(AdvisorError, match="org/Tinny: no such model") as err:
        read_model("org/Tinny")
    assert "org/Tiny" in err.value.hint


@pytest.mark.parametrize("status, headers, words", [
    (403, {}, "answered 403"),
    (404, {}, "no such model"),
    (429, {"retry-after": "7"}, "rate limiting"),
    (503, {}, "answered HTTP 503"),
])
def test_http_errors_are_one_line(hub, status, headers, words) -> None:
    hub.status["/api/models/org/Tiny"] = (status, headers)
    with pytest.raises(AdvisorError, match=words) as err:
        read_model("org/Tiny")
    assert "\n" not in str(err.value)
    if status == 429:
        assert "try again in 7 s" in err.value.hint


def test_file_errors_are_one_line(hub) -> None:
    hub.status["/cdn/org/Tiny-GGUF/Tiny-Q8_0.gguf"] = (403, {})
    with pytest.raises(AdvisorError, match="Tiny-Q8_0.gguf: .* answered 403"):
        read_model("org/Tiny-GGUF:Q8_0")
    hub.status.clear()
    hub.truncate = True
    with pytest.raises(AdvisorError) as err:
        read_model("org/Tiny-GGUF:Q8_0")
    assert "\n" not in str(err.value)


def test_server_without_ranges_is_read_no_further_than_needed(hub, files) -> None:
    hub.no_range = True
    lm = read_model("org/Tiny-GGUF:Q8_0", mmproj=False)  # the model file alone (its mmproj: test_remote_mmproj.py)
    _exact(lm, files["big_expected"])
    # the connection is closed once the header is in (what the server wrote into socket buffers may be more)
    assert fetch.METER.bytes < 2 * fetch.MIB


def test_the_byte_bound(hub, monkeypatch) -> None:
    monkeypatch.setattr(fetch, "MAX_REMOTE_BYTES", 300_000)
    hub.no_range = True
    with pytest.raises(AdvisorError, match="more than 0 MiB"):
        read_model("org/Tiny-GGUF:Q8_0")
    assert fetch.METER.bytes < 400_000


def test_offline(hub, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(AdvisorError, match="HF_HUB_OFFLINE is set, and it has not been read before"):
        read_model("org/Tiny")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    lm = read_model("org/Tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    n = len(hub.log)
    assert read_model("org/Tiny").layout == lm.layout and len(hub.log) == n


# --- any URL, the Ollama library ---------------------------------------------------------------------

def test_gguf_url_and_split_url(hub, files) -> None:
    hub.plain["/files/big-Q8_0.gguf"] = files["big"]
    _exact(read_model(f"{hub.url}/files/big-Q8_0.gguf"), files["big_expected"])
    assert hub.sent("/files/big") < 2 * fetch.MIB
    for name, data in files["split"].items():
        hub.plain[f"/files/{name}"] = data
    first = sorted(files["split"])[0]
    _exact(read_model(f"{hub.url}/files/{first}"), files["split_expected"])
    with pytest.raises(AdvisorError, match="not found"):
        read_model(f"{hub.url}/files/missing.gguf")


def test_ollama_library(hub, files) -> None:
    hub.add_ollama("tiny", "1b", files["big"])
    lm = read_model("ollama:tiny:1b")
    _exact(lm, files["big_expected"])
    assert lm.source == "ollama library" and lm.spec.id == "tiny-1b"
    assert hub.sent("/blobstore/") < 2 * fetch.MIB
    with pytest.raises(AdvisorError, match="not in the Ollama library") as err:
        read_model("ollama:tiny:70b")
    assert "1b" in err.value.hint


def test_ollama_hf_co_names_read_the_hub(hub, files) -> None:
    _exact(read_model("ollama:hf.co/org/Tiny-GGUF:UD-Q4_K_XL"), files["split_expected"])
    with pytest.raises(AdvisorError, match="no GGUF file tagged Q4_K_M"):  # Ollama's default tag, absent here
        read_model("ollama:hf.co/org/Tiny-GGUF")


# --- the command line ------------------------------------------------------------------------------

def test_cli_plain_ollama_name_and_json_stdout_clean(hub, files) -> None:
    hub.add_ollama("tiny", "1b", files["small"])
    hub.slow_s = 0.15  # about 2 s for the first MiB: progress on stderr
    r = _cli("check", "tiny:1b", "--gpu", "rtx-3090", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["memory"]["weights_bytes"] == sum(files["small_expected"].values())
    assert "reading the metadata of ollama:tiny:1b" in r.stderr


def test_cli_catalog_names_never_touch_the_network(hub) -> None:
    r = _cli("check", "Qwen/Qwen3-32B", "--gpu", "rtx-3090", "--json")
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["model"]["id"] == "qwen3-32b"
    assert hub.log == []


def test_cli_other_release_is_read_as_itself(hub) -> None:
    """A release the catalog only lists as related (Kimi K2 Instruct-0905) is never answered as another."""
    r = _cli("check", "moonshotai/Kimi-K2-Instruct-0905", "--gpu", "rtx-3090")
    assert r.returncode == 2
    assert "different release from the catalog's kimi-k2" in r.stderr and r.stderr.count("\n") == 1


def test_cli_kimi_k2_thinking_is_its_own_builtin(hub) -> None:
    """Kimi K2 Thinking is a catalog entry of its own (native INT4, 262,144 context), answered offline."""
    r = _cli("check", "moonshotai/Kimi-K2-Thinking", "--gpu", "rtx-3090", "--json")
    assert r.returncode in (0, 1), r.stderr
    model = json.loads(r.stdout)["model"]
    assert model["id"] == "kimi-k2-thinking" and model["source"] == "catalog"
    assert hub.log == []


@pytest.mark.parametrize("ref", ["org/Tiny", "hf:org/Tiny", "org/Tiny-GGUF:UD-Q4_K_XL",
                                 "http://127.0.0.1:9/files/x-Q4_K_M.gguf", "llama3.1:70b", "ollama:llama3.1:70b",
                                 "https://huggingface.co/org/Tiny"])
def test_cli_unreachable_is_one_line_fast(tmp_path, ref) -> None:
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "ADVISOR_OLLAMA_REGISTRY": "http://127.0.0.1:9",
           "ADVISOR_CACHE_DIR": str(tmp_path), "HF_HOME": str(tmp_path / "hf"), "OLLAMA_MODELS": str(tmp_path / "o")}
    start = time.monotonic()
    r = _cli("check", ref, "--gpu", "rtx-3090", "--json", env=env)
    assert time.monotonic() - start < 60  # catches a hang only; bench/hostile.py measures how fast
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_cli_server_that_never_answers(hub, tmp_path) -> None:
    hub.stall_s = 30
    start = time.monotonic()
    r = _cli("check", "org/Tiny", "--gpu", "rtx-3090", env={"ADVISOR_CACHE_DIR": str(tmp_path / "c")})
    assert time.monotonic() - start < 25  # the 6 s stall deadline applied: the server stalls for 30 s (bench/hostile.py holds the 10 s goal)
    assert r.returncode == 2 and "did not answer within 6 s" in r.stderr and r.stderr.count("\n") == 1
