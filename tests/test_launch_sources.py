"""The "Run it" line names the model as the program can be given it: a local GGUF by its real path (a file,
the Hugging Face cache's snapshot file, the Ollama store's blob), a GGUF URL by llama.cpp's `-mu URL`, an
Ollama model by `FROM NAME:TAG` in Ollama and, for llama.cpp, by its blob when the store has it, else a note
that says to pull it (never a made-up `-m NAME.gguf`); and `--cmd` reads each line back to the same answer."""

from __future__ import annotations

import json
import shlex
import shutil

import pytest

pytest.importorskip("gguf")
pytest.importorskip("huggingface_hub")

from test_modelfile import _ollama_store, make_gguf  # noqa: E402
from test_remote import _cli, files, hub  # noqa: E402,F401  (files and hub: the shared fixtures)


def _check(*args: str, env: dict | None = None) -> dict:
    r = _cli("check", *args, "--gpu", "rtx-3090", "--json", env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _model_words(cmd: str) -> list[str]:
    words = shlex.split(cmd)
    return [words[i + 1] for i, w in enumerate(words) if w in ("-m", "-mu", "-hf")]


def _round_trip(doc: dict, env: dict | None = None) -> None:
    again = _check("--cmd", doc["launch"]["command"], env=env)
    assert again["memory"] == doc["memory"] and not again.get("command_notes")
    assert again["launch"]["command"] == doc["launch"]["command"]


def test_a_local_file_is_given_by_its_path(tmp_path) -> None:
    f = tmp_path / "models" / "tiny-Q8_0.gguf"
    f.parent.mkdir()
    make_gguf(f)
    doc = _check(str(f))
    assert _model_words(doc["launch"]["command"]) == [str(f)]
    _round_trip(doc)


def test_a_gguf_url_is_given_by_model_url(hub) -> None:
    url = f"{hub.url}/files/tiny-Q8_0.gguf"
    hub.plain["/files/tiny-Q8_0.gguf"] = hub.repos["org/Tiny-GGUF"].files["Tiny-Q8_0.gguf"]
    doc = _check(url)
    cmd = doc["launch"]["command"]
    assert _model_words(cmd) == [url] and cmd.startswith(f"llama-server -mu {url} ") and ".gguf -c" not in cmd.replace(url, "")
    _round_trip(doc)


def test_the_hf_cache_file_is_given_by_its_snapshot_path(tmp_path, files) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    snap = tmp_path / "hub" / "models--org--Tiny-GGUF" / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "Tiny-Q8_0.gguf").write_bytes(files["big"])
    (snap.parent.parent / "refs").mkdir()
    (snap.parent.parent / "refs" / "main").write_text(commit)
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    doc = _check("hf:org/Tiny-GGUF", env=env)
    assert _model_words(doc["launch"]["command"]) == [str(snap / "Tiny-Q8_0.gguf")]
    _round_trip(doc, env)


def test_an_ollama_store_model_is_given_by_its_blob(tmp_path) -> None:
    src = tmp_path / "src.gguf"
    make_gguf(src)
    root = tmp_path / "ollama"
    digest = _ollama_store(root, src)
    env = {"OLLAMA_MODELS": str(root)}
    doc = _check("ollama:tiny:1b", env=env)
    assert _model_words(doc["launch"]["command"]) == [str(root / "blobs" / f"sha256-{digest}")]
    _round_trip(doc, env)
    r = _cli("check", "ollama:tiny:1b", "--runtime", "ollama", "--gpu", "rtx-3090", "--json", env=env)
    assert r.returncode == 0, r.stderr
    launch = json.loads(r.stdout)["launch"]
    assert launch["modelfile"].splitlines()[0] == "FROM tiny:1b"  # the Ollama model itself, with the settings


def test_an_ollama_library_model_says_to_pull_it(hub, files) -> None:
    hub.add_ollama("tiny", "1b", files["small"])
    doc = _check("ollama:tiny:1b")
    launch = doc["launch"]
    assert launch["command"] is None
    assert "`ollama pull tiny:1b`" in launch["note"] and "`ollama run tiny:1b`" in launch["note"]
    r = _cli("check", "ollama:tiny:1b", "--gpu", "rtx-3090")
    assert r.returncode == 0 and "ollama pull tiny:1b" in r.stdout and ".gguf" not in r.stdout.split("Run it")[-1]
    r = _cli("check", "ollama:tiny:1b", "--runtime", "ollama", "--gpu", "rtx-3090", "--json")
    assert json.loads(r.stdout)["launch"]["modelfile"].splitlines()[0] == "FROM tiny:1b"
