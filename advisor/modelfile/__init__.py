"""Read a real model's files: architecture and exact weight sizes, without loading any weights.

`read_model(text)` takes a `.gguf` file (split `-00001-of-0000N.gguf` sets read whole), a folder
with `config.json` and `*.safetensors` (with or without `model.safetensors.index.json`), a bare
`config.json` (architecture only: weights estimated at BF16), `ollama:NAME[:TAG]` (the local Ollama
store, else the Ollama library), `hf:ORG/NAME[@REV][:TAG]` (the local Hugging Face cache, else the
Hub), or an `https://` URL of a `.gguf` file or a Hub repo. Remote references (`remote`) read only
metadata, by range requests, bounded and cached (`fetch`). Only headers are read, every count and
length is bounded before use (`limits`), nothing from a file is executed, and any bad input is an
`AdvisorError` with one line.
"""

from __future__ import annotations

import gc
import struct
from pathlib import Path

from advisor.errors import AdvisorError
from advisor.modelfile.build import from_config, from_folder, from_gguf
from advisor.modelfile.limits import display
from advisor.engine.loaded import LoadedModel
from advisor.modelfile.stores import has_hf_snapshot, read_hf

__all__ = ["LoadedModel", "read_model", "read_reference", "looks_like_model_path"]

_HINT = "pass a .gguf file, a model folder, a config.json, ollama:NAME[:TAG], hf:ORG/NAME or a .gguf URL"


def read_model(path_or_spec: str, progress=None, *, mmproj: bool = True) -> LoadedModel:
    """The model at a path, in a local store or at a remote reference, as its own files describe it.
    `progress(text)` receives progress for slow remote reads (stderr in the CLI). `mmproj`: also read the
    vision projector a remote GGUF repo or Ollama manifest ships with the model (False: `--no-mmproj`, or
    the user names the mmproj file: no request is made for it)."""
    paused = gc.isenabled()
    gc.disable()  # a header of 10^6 tensors builds millions of small objects: GC passes would triple the time
    try:
        return _read(path_or_spec, progress, mmproj)
    except AdvisorError:
        raise
    except OSError as exc:
        raise AdvisorError(_line(f"{display(path_or_spec)}: can't read it ({exc.strerror or exc})"), "check the path and permissions") from None
    except (struct.error, UnicodeError, OverflowError, RecursionError, MemoryError) as exc:
        raise AdvisorError(_line(f"{display(path_or_spec)}: malformed model file ({type(exc).__name__})"),
                           "the file may be incomplete or corrupted: download it again") from None
    finally:
        if paused:
            gc.enable()


PREFIXES = ("ollama:", "hf:", "https://", "http://")


def looks_like_model_path(text: str) -> bool:
    """Whether a MODEL argument names a file, folder, store or URL rather than a catalog id."""
    if text.startswith(PREFIXES) or text.endswith((".gguf", ".json", ".safetensors")):
        return True
    try:
        return bool(text) and Path(text).expanduser().exists()
    except (OSError, ValueError):
        return False


def read_reference(text: str, progress=None, *, mmproj: bool = True) -> LoadedModel | None:
    """A plain remote reference (`ORG/NAME[:TAG]`, `NAME:TAG`), or None when `text` is not one.
    The caller tries files and the catalog first."""
    from advisor.modelfile import remote

    ref = remote.parse_ref(text)
    return None if ref is None else read_model(f"{ref.kind}:{text}", progress, mmproj=mmproj)


def _read(text: str, progress=None, mmproj: bool = True) -> LoadedModel:
    if text.startswith(PREFIXES):
        from advisor.modelfile import remote

        ref = remote.parse_ref(text)
        if ref.kind == "hf" and not ref.tag and not ref.filename and has_hf_snapshot(ref.repo, ref.revision):
            return read_hf(f"{ref.repo}@{ref.revision}" if ref.revision else ref.repo)
        return remote.read_remote(ref, progress, mmproj=mmproj)
    if not text.strip():
        raise AdvisorError("empty model path", _HINT)
    path = Path(text).expanduser()
    if path.is_dir():
        return from_folder(path)
    if not path.exists():
        if not text.endswith((".gguf", ".json", ".safetensors")):
            from advisor.modelfile import remote

            ref = remote.parse_ref(text)
            if ref is not None:
                return _read(f"{ref.kind}:{text}", progress, mmproj)
        raise AdvisorError(_line(f"{display(text)}: no such file or folder"), _HINT)
    if path.suffix == ".json":
        return from_config(path)
    if path.suffix == ".safetensors":
        return from_folder(path.parent)
    from advisor.files import open_regular

    with open_regular(path, _HINT) as f:
        magic = f.read(4)
    if magic == b"GGUF" or path.suffix == ".gguf":
        return from_gguf(path)
    raise AdvisorError(_line(f"{display(text)}: not a model file this reader knows"), _HINT)


def _line(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)[:2000]
