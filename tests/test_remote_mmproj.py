"""A remote GGUF's vision projector, read as `llama-server -hf` fetches it, against the real HTTP server of
tests/hubserver.py (never the live Hub).

llama.cpp (common/download.cpp common_download_get_hf_plan, find_best_mmproj) lists the repo, picks the
mmproj beside the model GGUF and downloads it with the model unless --no-mmproj or an --mmproj file is
given; when that download fails the server does not start. The reader does the same with headers only:
the mmproj files here are real GGUFs written by gguf-py (general.architecture clip, clip.* keys, v.*
tensors), and each test checks what went over the wire in the server's log.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")
pytest.importorskip("gguf")

from hubserver import Repo  # noqa: E402
from test_remote import _cli, files, hub, make_mmproj  # noqa: E402,F401  (files and hub: the shared fixtures)

from advisor.errors import AdvisorError  # noqa: E402
from advisor.modelfile import fetch, read_model  # noqa: E402
from advisor.modelfile.remote import pick_mmproj  # noqa: E402

MIB = 1024**2


# --- which mmproj: llama.cpp's own cases (tests/test-model-resolution.cpp) and real repos' listings ----

FLAT = ["README.md", "model-BF16.gguf", "model-Q4_K_M.gguf", "model-Q8_0.gguf", "mmproj-model-BF16.gguf",
        "mmproj-model-Q8_0.gguf", "mtp-model-BF16.gguf"]
SUBDIR = ["mmproj-model-f16.gguf", "model-mtp-BF16.gguf", "Q3_K_M/model-Q3_K_M-00001-of-00003.gguf",
          "Q3_K_M/model-Q3_K_M-00002-of-00003.gguf", "Q3_K_M/model-Q3_K_M-00003-of-00003.gguf"]
UNSLOTH = ["model-UD-Q8_K_XL.gguf", "mmproj-BF16.gguf", "model-MTP-BF16.gguf"]
QWEN3_VL = ["Qwen3-VL-8B-Instruct-BF16.gguf", "Qwen3-VL-8B-Instruct-F16.gguf", "Qwen3-VL-8B-Instruct-Q4_K_M.gguf",
            "Qwen3-VL-8B-Instruct-UD-Q4_K_XL.gguf", "Qwen3-VL-8B-Instruct-Q8_0.gguf", "mmproj-F32.gguf",
            "mmproj-F16.gguf", "mmproj-BF16.gguf"]
"""unsloth/Qwen3-VL-8B-Instruct-GGUF's shape: three mmproj precisions at the root."""


@pytest.mark.parametrize("listing, model, expected", [
    (FLAT, "model-Q8_0.gguf", "mmproj-model-Q8_0.gguf"),  # llama.cpp "flat exact tag"
    (SUBDIR, "Q3_K_M/model-Q3_K_M-00001-of-00003.gguf", "mmproj-model-f16.gguf"),  # "subdir shards": the root's
    (UNSLOTH, "model-UD-Q8_K_XL.gguf", "mmproj-BF16.gguf"),  # "unsloth suffix mtp"
    (QWEN3_VL, "Qwen3-VL-8B-Instruct-UD-Q4_K_XL.gguf", "mmproj-BF16.gguf"),  # 4 bits: BF16/F16 tie, listing order
    (QWEN3_VL, "Qwen3-VL-8B-Instruct-F16.gguf", "mmproj-BF16.gguf"),
    (QWEN3_VL, "Qwen3-VL-8B-Instruct-Q8_0.gguf", "mmproj-BF16.gguf"),
    (list(reversed(QWEN3_VL)), "Qwen3-VL-8B-Instruct-Q4_K_M.gguf", "mmproj-BF16.gguf"),  # any order given
    (QWEN3_VL + ["F32/Qwen3-VL-8B-Instruct-F32.gguf"], "F32/Qwen3-VL-8B-Instruct-F32.gguf", "mmproj-F32.gguf"),
    (["a/model-Q4_K_M.gguf", "b/mmproj-F16.gguf"], "a/model-Q4_K_M.gguf", ""),  # another folder: not looked at
    (["a/model-Q4_K_M.gguf", "a/mmproj-F16.gguf", "mmproj-F32.gguf"], "a/model-Q4_K_M.gguf", "a/mmproj-F16.gguf"),
    (["model-Q4_K_M.gguf", "MMPROJ-F16.gguf", "mmproj-notes.txt"], "model-Q4_K_M.gguf", ""),  # case-sensitive, .gguf
], ids=["flat", "subdir", "unsloth", "qwen3vl-q4", "qwen3vl-f16", "qwen3vl-q8", "qwen3vl-reversed",
        "qwen3vl-f32-folder", "other-folder", "deepest-first", "case"])
def test_pick_mmproj_as_llama_cpp(listing, model, expected) -> None:
    assert pick_mmproj(listing, model) == expected


# --- a repo with a projector ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def vl(tmp_path_factory) -> dict[str, object]:
    d = tmp_path_factory.mktemp("vl")
    out: dict[str, object] = {}
    for name, hidden, rows, dtype in (("bf16", 1001, 8192, np.float16), ("f16", 1002, 64, np.float16),
                                      ("f32", 1003, 64, np.float32)):
        out[f"{name}_expected"] = make_mmproj(d / f"{name}.gguf", hidden=hidden, rows=rows, dtype=dtype)
        out[name] = (d / f"{name}.gguf").read_bytes()
    return out


@pytest.fixture
def repos(hub, files, vl):
    hub.repos["org/VL-GGUF"] = Repo(files={"VL-Q4_K_M.gguf": files["small"], "mmproj-F16.gguf": vl["bf16"]})
    hub.repos["org/Many-GGUF"] = Repo(files={"Many-Q4_K_M.gguf": files["small"], "Many-F32.gguf": files["small"],
                                             "mmproj-BF16.gguf": vl["bf16"], "mmproj-F16.gguf": vl["f16"],
                                             "mmproj-F32.gguf": vl["f32"]})
    hub.repos["org/Text-GGUF"] = Repo(files={"Text-Q4_K_M.gguf": files["small"]})
    return hub


def _mmproj_paths(hub) -> list[str]:
    return [p for p, _, _ in hub.log if "mmproj" in p]


def test_one_mmproj_attached_from_its_header(repos, files, vl) -> None:
    lm = read_model("org/VL-GGUF:Q4_K_M")
    assert lm.layout.total_bytes == sum(files["small_expected"].values())  # the projector is not in the layout
    t = lm.vision
    assert t is not None and (t.source, t.kind, t.exact, t.path) == ("mmproj", "gemma3", True, "")
    assert t.weight_bytes == sum(vl["bf16_expected"].values()) and t.hidden_size == 1001
    assert t.fetched == "org/VL-GGUF/mmproj-F16.gguf" and t.warmup_patches == (896 // 14) ** 2
    assert (lm.hf_repo, lm.hf_file) == ("org/VL-GGUF:Q4_K_M", "") and lm.spec.vision_params == t.params
    assert all(r.startswith("bytes=") for p, r, _ in repos.log if "mmproj" in p)  # by range only
    assert repos.sent("mmproj") < 2 * MIB < len(vl["bf16"]) / 8  # the header, not the 16 MB of tensors


def test_several_mmproj_llama_cpp_choice(repos, vl) -> None:
    """Three precisions at the root: a 4-bit model gets the BF16 one (16 bits from 4, as F16; BF16 sorts
    first), an F32 model the F32 one; only the chosen file is requested."""
    lm = read_model("org/Many-GGUF:Q4_K_M")
    assert lm.vision.hidden_size == 1001 and lm.vision.fetched == "org/Many-GGUF/mmproj-BF16.gguf"
    assert {p.rsplit("/", 1)[-1] for p in _mmproj_paths(repos)} == {"mmproj-BF16.gguf"}
    repos.log.clear()
    lm = read_model("org/Many-GGUF:F32")
    assert lm.vision.hidden_size == 1003 and lm.vision.weight_bytes == sum(vl["f32_expected"].values())
    assert {p.rsplit("/", 1)[-1] for p in _mmproj_paths(repos)} == {"mmproj-F32.gguf"}


def test_repo_without_mmproj_reads_none(repos) -> None:
    lm = read_model("org/Text-GGUF:Q4_K_M")
    assert lm.vision is None and _mmproj_paths(repos) == []


def test_mmproj_false_makes_no_request_and_the_cache_serves_both(repos, monkeypatch) -> None:
    assert read_model("org/VL-GGUF:Q4_K_M", mmproj=False).vision is None
    assert _mmproj_paths(repos) == []
    with_it = read_model("org/VL-GGUF:Q4_K_M")  # the record lacks the projector: read again, live
    assert with_it.vision is not None and _mmproj_paths(repos)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the second ask: from the cache alone
    n = len(repos.log)
    assert read_model("org/VL-GGUF:Q4_K_M").vision == with_it.vision
    assert read_model("org/VL-GGUF:Q4_K_M", mmproj=False).vision is None
    assert len(repos.log) == n


def test_server_without_ranges_reads_only_the_mmproj_header(repos, vl) -> None:
    repos.no_range = True
    lm = read_model("org/VL-GGUF:Q4_K_M")
    assert lm.vision.weight_bytes == sum(vl["bf16_expected"].values())
    assert fetch.METER.bytes < 4 * MIB < len(vl["bf16"]) / 4  # model and projector headers, then closed


# --- the command line: --no-mmproj, the launch line, failures ------------------------------------------------

def test_cli_attaches_it_and_launches_by_repo(repos, vl) -> None:
    r = _cli("check", "org/VL-GGUF:Q4_K_M", "--gpu", "rtx-3090", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    v = doc["vision"]
    assert (v["source"], v["file"], v["devices"]) == ("mmproj", "org/VL-GGUF/mmproj-F16.gguf", ["gpu0"])
    assert v["weights_bytes"] == sum(vl["bf16_expected"].values())
    cmd = doc["launch"]["command"]
    assert cmd.startswith("llama-server -hf org/VL-GGUF:Q4_K_M ")  # -hf fetches the mmproj itself
    assert "--mmproj" not in cmd and "--no-mmproj" not in cmd and " -m " not in cmd


def test_cli_no_mmproj_makes_no_request(repos) -> None:
    r = _cli("check", "org/VL-GGUF:Q4_K_M", "--gpu", "rtx-3090", "--json", "--no-mmproj")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert "vision" not in doc and _mmproj_paths(repos) == []
    assert "-hf org/VL-GGUF:Q4_K_M --no-mmproj " in doc["launch"]["command"]


def test_cmd_no_mmproj_and_a_given_mmproj_make_no_request(repos, tmp_path) -> None:
    r = _cli("check", "--cmd", "llama-server -hf org/VL-GGUF:Q4_K_M --no-mmproj -c 4096", "--gpu", "rtx-3090", "--json")
    assert r.returncode == 0, r.stderr
    assert "vision" not in json.loads(r.stdout) and _mmproj_paths(repos) == []
    make_mmproj(tmp_path / "mine.gguf", hidden=1234, rows=8)
    r = _cli("check", "org/VL-GGUF:Q4_K_M", "--mmproj", str(tmp_path / "mine.gguf"), "--gpu", "rtx-3090", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["vision"]["file"] == str(tmp_path / "mine.gguf") and _mmproj_paths(repos) == []
    assert f"--mmproj {tmp_path / 'mine.gguf'}" in doc["launch"]["command"]


def test_cmd_reads_back_the_launch_line(repos) -> None:
    first = json.loads(_cli("check", "org/VL-GGUF:Q4_K_M", "--gpu", "rtx-3090", "--json").stdout)
    r = _cli("check", "--cmd", first["launch"]["command"], "--gpu", "rtx-3090", "--json")
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert again["vision"] == first["vision"] and again["memory"] == first["memory"]
    assert not again.get("command_notes")


def test_cli_file_url_launches_with_hf_file(repos) -> None:
    url = f"{repos.url}/org/VL-GGUF/resolve/main/VL-Q4_K_M.gguf"
    doc = json.loads(_cli("check", url, "--gpu", "rtx-3090", "--json").stdout)
    assert doc["vision"]["source"] == "mmproj"  # llama.cpp picks the mmproj for an --hf-file too
    cmd = doc["launch"]["command"]
    assert cmd.startswith("llama-server -hf org/VL-GGUF -hff VL-Q4_K_M.gguf ")
    r = _cli("check", "--cmd", cmd, "--gpu", "rtx-3090", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["memory"] == doc["memory"]


@pytest.mark.parametrize("status, words", [(404, "not found"), (503, "answered HTTP 503"), (403, "answered 403")])
def test_cli_mmproj_failure_is_one_line(repos, status, words) -> None:
    """llama-server does not start when the mmproj download fails: neither does the answer, in one line
    that says how to answer for text only; with --no-mmproj the same repo answers."""
    repos.status["/cdn/org/VL-GGUF/mmproj-F16.gguf"] = (status, {})
    start = time.monotonic()
    r = _cli("check", "org/VL-GGUF:Q4_K_M", "--gpu", "rtx-3090", "--json")
    assert time.monotonic() - start < 60  # catches a hang only
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "mmproj-F16.gguf" in r.stderr and words in r.stderr and "--no-mmproj" in r.stderr
    r = _cli("check", "org/VL-GGUF:Q4_K_M", "--gpu", "rtx-3090", "--json", "--no-mmproj")
    assert r.returncode == 0, r.stderr


def test_cli_truncated_mmproj_is_one_line(repos, vl) -> None:
    repos.repos["org/VL-GGUF"].files["mmproj-F16.gguf"] = vl["bf16"][:100_000]  # its tensors past the end
    r = _cli("check", "org/VL-GGUF:Q4_K_M", "--gpu", "rtx-3090")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "mmproj-F16.gguf" in r.stderr


def test_a_projector_that_is_not_clip_is_refused(repos, files) -> None:
    repos.repos["org/VL-GGUF"].files["mmproj-F16.gguf"] = files["small"]
    with pytest.raises(AdvisorError, match="mmproj-F16.gguf: is not an mmproj file") as err:
        read_model("org/VL-GGUF:Q4_K_M")
    assert "--no-mmproj" in err.value.hint
    assert read_model("org/VL-GGUF:Q4_K_M", mmproj=False).vision is None


# --- Ollama: the manifest's projector layer ---------------------------------------------------------------

def _add_projector(hub, key: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    hub.blobs[digest] = data
    hub.ollama[key]["layers"].append({"mediaType": "application/vnd.ollama.image.projector", "digest": digest,
                                      "size": len(data)})
    return digest


def test_ollama_library_projector_layer(repos, files, vl) -> None:
    repos.add_ollama("vis", "4b", files["small"])
    digest = _add_projector(repos, "library/vis:4b", vl["bf16"])
    assert read_model("ollama:vis:4b", mmproj=False).vision is None
    assert not any(digest in p for p, _, _ in repos.log)
    lm = read_model("ollama:vis:4b")
    assert lm.vision.weight_bytes == sum(vl["bf16_expected"].values()) and lm.vision.source == "mmproj"
    assert repos.sent(digest[7:]) < 2 * MIB < len(vl["bf16"]) / 8


def test_ollama_local_store_projector(tmp_path, monkeypatch, files, vl) -> None:
    store = tmp_path / "ollama"
    (store / "blobs").mkdir(parents=True)
    layers = []
    for media, data in (("model", files["small"]), ("projector", vl["f16"])):
        h = hashlib.sha256(data).hexdigest()
        (store / "blobs" / f"sha256-{h}").write_bytes(data)
        layers.append({"mediaType": f"application/vnd.ollama.image.{media}", "digest": f"sha256:{h}", "size": len(data)})
    folder = store / "manifests" / "registry.ollama.ai" / "library" / "vis"
    folder.mkdir(parents=True)
    (folder / "4b").write_text(json.dumps({"schemaVersion": 2, "layers": layers}))
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    lm = read_model("ollama:vis:4b")
    assert lm.vision.hidden_size == 1002 and Path(lm.vision.path).parent == store / "blobs"
    assert read_model("ollama:vis:4b", mmproj=False).vision is None


def test_catalog_add_records_the_projector(repos, vl, tmp_path) -> None:
    """A catalog entry written from a VL GGUF repo records its tower's parameters, as one from a checkpoint
    does; asked by its id afterwards (offline, no file), the answer says the tower is left out (ARC003)."""
    env = {"ADVISOR_CONFIG_DIR": str(tmp_path / "cfg")}
    r = _cli("catalog", "add", "org/VL-GGUF:Q4_K_M", env=env)
    assert r.returncode == 0, r.stderr
    e = vl["bf16_expected"]
    params = (e["v.patch_embd.weight"] + e["v.blk.0.attn_q.weight"]) // 2 + e["v.blk.0.ln1.weight"] // 4
    assert f"vision_params = {params}" in (tmp_path / "cfg" / "models-added.toml").read_text()
    r = _cli("check", "vl", "--gpu", "rtx-3090", "--json", env={**env, "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["model"]["id"] == "vl" and "vision" not in doc
    assert any(f["code"] == "ARC003" and "vision tower" in f["message"] for f in doc["findings"])
