"""What one benchmark output says: its speed tests, the devices it ran on, the memory it allocated."""

from __future__ import annotations

from advisor.record import Record, record


@record
class Test(Record):
    """One timed test, as llama-bench names them: `pp512` (prefill 512 tokens), `tg128` (decode 128)."""

    test: str
    """`pp` (prompt processing / prefill) or `tg` (text generation / decode)."""
    n_prompt: int
    n_gen: int
    tokens_per_s: float
    depth: int = 0
    """Tokens already in the context when the test started (llama-bench `-d`, `@ dN`)."""
    stddev: float | None = None

    @property
    def label(self) -> str:
        n = self.n_prompt if self.test == "pp" else self.n_gen
        return f"{self.test}{n}" + (f" @ d{self.depth}" if self.depth else "")


@record
class DeviceMemory(Record):
    """What the runtime said one device holds, bytes (llama.cpp's buffer lines; vLLM's weights line)."""

    device: str
    """`gpu0`, `gpu1`... or `cpu` (host buffers: CPU, CPU_Mapped, CUDA_Host)."""
    weights_bytes: int = 0
    kv_cache_bytes: int = 0
    compute_bytes: int = 0
    nvml_bytes: int = 0
    """The device's peak use above what it held before the run, read through NVML while it ran (the CUDA
    context included); 0 when not sampled."""

    @property
    def total_bytes(self) -> int:
        return self.nvml_bytes or self.weights_bytes + self.kv_cache_bytes + self.compute_bytes


@record
class Measured(Record):
    """Everything one benchmark output or log states that the comparison can use."""

    kind: str
    """What produced it: `llama-bench`, `llama-server log`, `vLLM log`, `vllm bench serve`, `Ollama timings`."""
    runtime: str
    """The runtime id it ran (`llama.cpp`, `ollama`, `vllm`)."""
    tests: tuple[Test, ...] = ()
    backend: str = ""
    """The compute backend as the program printed it (`CUDA`, `Metal`, `Vulkan`, `CPU`, `BLAS`)."""
    gpus: tuple[str, ...] = ()
    """GPU names as printed (`NVIDIA GeForce RTX 4080`)."""
    cpu: str = ""
    model_file: str = ""
    model_type: str = ""
    """llama.cpp's description (`qwen2 7B Q4_K - Medium`) or the model name the output gives."""
    n_gpu_layers: int | None = None
    offloaded: tuple[int, int] | None = None
    """llama.cpp's `offloaded N/M layers to GPU`."""
    flash_attn: str = ""
    """`on`, `off` or `auto` as the run had it; empty when not stated."""
    type_k: str = ""
    memory: tuple[DeviceMemory, ...] = ()
    kv_cache_tokens: int | None = None
    """vLLM's `GPU KV cache size: N tokens`."""
    started: bool | None = None
    """True: it loaded and ran; False: it failed for memory (the fit verdict's evidence); None: not stated."""
    failure: str = ""
    """The line that says why it did not start."""
    build: str = ""
    n_ctx: int | None = None
    """The context the run allocated, where the output says (llama.cpp's `n_ctx = N`, vLLM's tokens per request)."""
    concurrency: int | None = None
    """Requests at once (`vllm bench serve --max-concurrency`); single-stream tests have 1."""
    notes: tuple[str, ...] = ()
