"""`LoadedModel`: a model as read from its own files, ready for the engine."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.catalog.types import ModelSpec, QuantSpec
from advisor.engine.memory import WeightsLayout
from advisor.engine.vision import VisionTower


@dataclass(frozen=True)
class LoadedModel:
    """A model read from a file, folder or local store.

    With `exact`, `layout` is the sum of the real tensors' bytes (by tensor name) and
    `quant.bits_per_weight` is total bytes x 8 / total parameters; without it (a bare config.json)
    the layout is `weights_layout(spec, quant)` at BF16 from parameters counted from the shapes.
    """

    spec: ModelSpec
    """Architecture from the file's own metadata."""
    quant: QuantSpec
    """What the weights are stored as."""
    layout: WeightsLayout
    """Where the weight bytes sit: embedding, output head, each layer, each layer's routed experts."""
    source: str
    """`gguf file`, `safetensors folder`, `config.json`, `ollama store` or `hf cache`."""
    exact: bool
    """The layout comes from real tensor sizes (True) or from an estimate (False)."""
    vision: VisionTower | None = None
    """The vision tower the files ship beside the language model (not in `layout`)."""
    hf_repo: str = ""
    """A GGUF read from the Hub: the `ORG/NAME[:TAG]` a program that downloads by repo is given
    (`llama-server -hf`, which also fetches the repo's mmproj), else ""."""
    hf_file: str = ""
    """The GGUF's path in that repo when it was named by file (`--hf-file`), else ""."""
    path: str = ""
    """A GGUF on this machine (a file, the Hugging Face cache's snapshot file, the Ollama store's blob): the
    file a program that runs a file is given (a split set's first part), else ""."""
    url: str = ""
    """A GGUF read from a URL (not a Hub repo): the URL a program that downloads by URL is given (`-mu`)."""
    ollama: str = ""
    """A model read as an Ollama model: its `NAME:TAG` (a Modelfile's `FROM NAME:TAG`), else ""."""

    @property
    def other_bytes(self) -> int:
        """Weights in none of the layout's parts (final norm, rope tables), less those not
        loaded by default (MTP layers)."""
        lay = self.layout
        head = 0 if self.spec.tied_embeddings else lay.output_bytes
        return max(lay.total_bytes - lay.embed_bytes - head - sum(lay.layer_bytes) - lay.unloaded_bytes, 0)
