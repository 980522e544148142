"""Read a real model's files: architecture and exact weight sizes, without loading any weights.

`read_model(text)` takes a `.gguf` file (split `-00001-of-0000N.gguf` sets read whole), a folder
with `config.json` and `*.safetensors` (with or without `model.safetensors.index.json`), a bare
`config.json` (architecture only: weights estimated at BF16), `ollama:NAME[:TAG]` from the local
Ollama store, or `hf:ORG/NAME[@REV]` from the local Hugging Face cache. Only headers are read, every
count and length is bounded before use (`limits`), nothing from a file is executed, and any bad
input is an `AdvisorError` with one line.
"""

from __future__ import annotations

import gc
import struct
from pathlib import Path

from advisor.errors import AdvisorError
from advisor.modelfile.build import from_config, from_folder, from_gguf
from advisor.modelfile.limits import display
from advisor.engine.loaded import LoadedModel
from advisor.modelfile.stores import read_hf, read_ollama

__all__ = ["LoadedModel", "read_model", "looks_like_model_path"]

_HINT = "pass a .gguf file, a model folder, a config.json, ollama:NAME[:TAG] or hf:ORG/NAME"


def read_model(path_or_spec: str) -> LoadedModel:
    """The model at a path or in a local store, as its own files describe it."""
    paused = gc.isenabled()
    gc.disable()  # a header of 10^6 tensors builds millions of small objects: GC passes would triple the time
    try:
        return _read(path_or_spec)
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


def looks_like_model_path(text: str) -> bool:
    """Whether a MODEL argument names a file, folder or store rather than a catalog id."""
    if text.startswith(("ollama:", "hf:")) or text.endswith((".gguf", ".json", ".safetensors")):
        return True
    try:
        return bool(text) and Path(text).expanduser().exists()
    except (OSError, ValueError):
        return False


def _read(text: str) -> LoadedModel:
    if text.startswith("ollama:"):
        return read_ollama(text[len("ollama:"):])
    if text.startswith("hf:"):
        return read_hf(text[len("hf:"):])
    if not text.strip():
        raise AdvisorError("empty model path", _HINT)
    path = Path(text).expanduser()
    if path.is_dir():
        return from_folder(path)
    if not path.exists():
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
