"""Runtime families: what the engine asks a runtime to do, behind one small interface.

A runtime declares its family in rules/runtimes.toml (`family`): `ggml` (llama.cpp, Ollama, ik_llama.cpp,
LM Studio), `exllama` (ExLlamaV2/V3), `torch` (transformers, MLX) keep a KV cache slot per sequence as asked
(llama.cpp `-np`); `paged` (vLLM, SGLang) gives all memory left after weights, activations and CUDA graphs to
one pool of KV pages, starts when one request of the full context fits, and serves every request from it.
Everything else a runtime does is a constant of its entry; the engine calls these methods and never asks a
runtime's name or family. Adding a runtime of a known family is data only.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from advisor.catalog.types import RuntimeSpec
    from advisor.engine.options import Options
    from advisor.engine.placement import Placement, Placer
    from advisor.engine.result import Serving
    from advisor.engine.scenario import Scenario


class SlotKV:
    """KV cache slots per sequence, allocated as asked."""

    def kv_sequences(self, options: Options) -> int:
        """Sequences whose KV cache a placement holds: every one of `--concurrency` (`-np`)."""
        return options.concurrency

    def micro_batch(self, ubatch: int, cells: int) -> int:
        """Tokens the compute graph is reserved for: a micro-batch never longer than the cache (n_ctx)."""
        return min(ubatch, max(cells, 1))

    def serving(self, sc: Scenario, placement: Placement, placer: Placer) -> Serving | None:
        """The serving answer (a KV pool and its queue): none, each sequence has its own slot."""
        return None


class PagedPool(SlotKV):
    """One paged KV pool shared by all requests (advisor.engine.serving)."""

    def kv_sequences(self, options: Options) -> int:
        """A placement holds one request of the full context: the pool starts when it fits, the rest is shared."""
        return 1

    def micro_batch(self, ubatch: int, cells: int) -> int:
        """It profiles its full token budget whatever the context."""
        return ubatch

    def serving(self, sc: Scenario, placement: Placement, placer: Placer) -> Serving | None:
        if not sc.rig.gpus or sc.options.workload != "inference":
            return None
        from advisor.engine.serving import serve

        return serve(sc, placement, max_num_seqs=placer.batch_defaults()[1])


FAMILIES = {"ggml": SlotKV(), "exllama": SlotKV(), "torch": SlotKV(), "paged": PagedPool()}
"""Each family's behaviour (rules/runtimes.toml `family`)."""


def family_of(runtime: RuntimeSpec) -> SlotKV:
    return FAMILIES[runtime.family]
