"""Local model stores: Ollama's (`ollama:NAME[:TAG]`) and the Hugging Face cache (`hf:ORG/NAME`).

Both are read from disk only; no server, no network (a reference that is not in them is read
remotely by `remote`).

Ollama: `$OLLAMA_MODELS` (else `~/.ollama/models`, else the Linux service's
`/usr/share/ollama/.ollama/models`) holds `manifests/<host>/<namespace>/<name>/<tag>` (JSON, an
OCI-style manifest) whose layer of mediaType `application/vnd.ollama.image.model` names the GGUF
blob `blobs/sha256-<digest>`. `NAME` is `model` (library), `user/model` or `host/user/model`.

Hugging Face: `$HF_HUB_CACHE` (else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`) holds
`models--ORG--NAME/refs/<ref>` (a commit hash) and `snapshots/<hash>/` with the files as
`huggingface_hub` downloaded them. The layout is read directly, so the optional `huggingface_hub`
package is not needed and `HF_HUB_OFFLINE` is honoured trivially: nothing is fetched.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

from advisor.errors import AdvisorError
from advisor.modelfile import limits
from advisor.modelfile.build import from_folder, from_gguf
from advisor.modelfile.limits import bad_file
from advisor.engine.loaded import LoadedModel

MODEL_MEDIA_TYPE = "application/vnd.ollama.image.model"
PROJECTOR_MEDIA_TYPE = "application/vnd.ollama.image.projector"
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_DIGEST = re.compile(r"^sha256[:-]([0-9a-f]{64})$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def ollama_root() -> Path:
    env = os.environ.get("OLLAMA_MODELS")
    if env:
        return Path(env).expanduser()
    home = Path.home() / ".ollama" / "models"
    service = Path("/usr/share/ollama/.ollama/models")
    return service if not home.is_dir() and service.is_dir() else home


def find_ollama(ref: str) -> Path | None:
    """The manifest of `NAME[:TAG]` in the local store, or None when the store does not have it."""
    name, tag = _split_tag(ref)
    parts = name.split("/")
    if not 1 <= len(parts) <= 3 or not all(_PART.match(p) for p in parts) or not _PART.match(tag):
        return None
    folder, _ = _manifest_folder(parts)
    for candidate in (folder / tag, folder / tag.lower()):
        if candidate.is_file():
            return candidate
    return None


def _manifest_folder(parts: list[str]) -> tuple[Path, Path]:
    host, namespace = "registry.ollama.ai", "library"
    if len(parts) == 3:
        host, namespace = parts[0], parts[1]
    elif len(parts) == 2:
        namespace = parts[0]
    root = ollama_root()
    return root / "manifests" / host / namespace / parts[-1], root


def read_ollama(ref: str, *, mmproj: bool = True) -> LoadedModel:
    """A model in the local Ollama store, with its vision projector layer when it has one (and `mmproj`)."""
    name, tag = _split_tag(ref)
    parts = name.split("/")
    if not 1 <= len(parts) <= 3 or not all(_PART.match(p) for p in parts) or not _PART.match(tag):
        raise AdvisorError(f"ollama:{ref[:200]!r} is not a model name", "write ollama:NAME[:TAG], e.g. ollama:llama3.2:3b")
    folder, root = _manifest_folder(parts)
    manifest = folder / tag
    if not manifest.is_file() and (folder / tag.lower()).is_file():
        manifest = folder / tag.lower()
    display = f"{name}:{tag}"
    if not manifest.is_file():
        have = sorted(p.name for p in folder.iterdir())[:10] if folder.is_dir() else []
        hint = f"tags here: {', '.join(have)}" if have else f"run `ollama pull {display}`, or set OLLAMA_MODELS to the store"
        raise AdvisorError(f"ollama model {display} is not in the local store {root}", hint)
    data = limits.read_json(manifest, limits.MAX_SMALL_JSON, "Ollama manifest")
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        bad_file(manifest, "the Ollama manifest has no layers list")
    digests = [layer.get("digest") for layer in layers if isinstance(layer, dict) and layer.get("mediaType") == MODEL_MEDIA_TYPE]
    if len(digests) != 1 or not isinstance(digests[0], str) or not (m := _DIGEST.match(digests[0])):
        bad_file(manifest, f"the Ollama manifest does not name one model layer ({MODEL_MEDIA_TYPE})")
    blob = root / "blobs" / f"sha256-{m.group(1)}"
    if not blob.is_file():
        raise AdvisorError(f"ollama model {display}: its weights blob {blob.name[:19]}… is missing from {root / 'blobs'}",
                           f"run `ollama pull {display}` again")
    loaded = from_gguf(blob, source="ollama store", name=display, sources=(f"ollama:{display}", str(blob)))
    loaded = replace(loaded, ollama=display)
    projectors = [layer.get("digest") for layer in layers
                  if isinstance(layer, dict) and layer.get("mediaType") == PROJECTOR_MEDIA_TYPE]
    if not mmproj or not projectors:
        return loaded
    if not isinstance(projectors[0], str) or not (p := _DIGEST.match(projectors[0])):
        bad_file(manifest, "the Ollama manifest's projector layer has no sha256 digest")
    projector = root / "blobs" / f"sha256-{p.group(1)}"
    if not projector.is_file():
        raise AdvisorError(f"ollama model {display}: its projector blob {projector.name[:19]}… is missing from "
                           f"{root / 'blobs'}", f"run `ollama pull {display}` again, or pass --no-mmproj for text only")
    from advisor.modelfile.vision import attach, from_mmproj, rules

    return attach(loaded, from_mmproj(projector, rules()))


def _split_tag(ref: str) -> tuple[str, str]:
    head, _, last = ref.rpartition("/")
    if ":" in last:
        last, _, tag = last.partition(":")
    else:
        tag = "latest"
    return (f"{head}/{last}" if head else last), tag


def hf_root() -> Path:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    home = os.environ.get("HF_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".cache" / "huggingface") / "hub"


def has_hf_snapshot(repo: str, rev: str = "") -> bool:
    """Whether the local Hugging Face cache holds a snapshot of `repo` at `rev` (default main)."""
    parts = repo.split("/")
    if len(parts) != 2 or not all(_PART.match(p) for p in parts):
        return False
    repo_dir = hf_root() / f"models--{parts[0]}--{parts[1]}"
    rev = rev or "main"
    if _COMMIT.match(rev):
        return (repo_dir / "snapshots" / rev).is_dir()
    ref_file = repo_dir / "refs" / rev
    try:
        commit = ref_file.read_text(encoding="ascii", errors="replace").strip()[:64] if ref_file.is_file() else ""
    except OSError:
        return False
    return bool(_COMMIT.match(commit)) and (repo_dir / "snapshots" / commit).is_dir()


def read_hf(ref: str) -> LoadedModel:
    repo, _, rev = ref.partition("@")
    parts = repo.split("/")
    if len(parts) != 2 or not all(_PART.match(p) for p in parts) or (rev and not _PART.match(rev)):
        raise AdvisorError(f"hf:{ref[:200]!r} is not a Hugging Face model id", "write hf:ORG/NAME, e.g. hf:Qwen/Qwen3-8B")
    root = hf_root()
    repo_dir = root / f"models--{parts[0]}--{parts[1]}"
    rev = rev or "main"
    commit = rev if _COMMIT.match(rev) else None
    ref_file = repo_dir / "refs" / rev
    if commit is None and ref_file.is_file():
        if limits.file_size(ref_file) > 1024:
            bad_file(ref_file, "is not a commit reference")
        commit = ref_file.read_text(encoding="ascii", errors="replace").strip()
        if not _COMMIT.match(commit):
            bad_file(ref_file, "is not a commit reference")
    snapshot = repo_dir / "snapshots" / commit if commit else None
    if snapshot is None or not snapshot.is_dir():
        raise AdvisorError(f"hf:{repo}: not in the local Hugging Face cache {root}",
                           f"download it first (`hf download {repo} --include '*.json' '*.safetensors'`); nothing is fetched from the network")
    return from_folder(snapshot, source="hf cache", name=repo, sources=(f"hf:{repo}", str(snapshot)))
