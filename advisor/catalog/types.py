"""The catalog's entry types: what exists (GPUs, LLMs) and the rulebook's tables (quants, runtimes).

They are frozen records (`advisor.record`: dataclasses without generated code) so that the
headless path can build them without importing pydantic (pydantic alone costs more start-up time
than `advisor check --json` may take). The same classes are the pydantic schema: `advisor.catalog.schema` validates every file against them with
unknown keys rejected (`__pydantic_config__`), `advisor catalog validate` and the test-suite run that
validation over the built-in files, and user files are always validated before use.

Sizes are integer bytes or GiB floats as named; bandwidth is GB/s (10^9 B/s); compute is dense TFLOPS.
"""

from __future__ import annotations

from dataclasses import field
from advisor.record import Record, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from advisor.catalog.rulebook import Rulebook

GIB = 1024**3
LAYER_KINDS = ("a", "r", "-")
"""`ModelSpec.layer_pattern` letters: own KV cache, recurrent state, nothing of its own."""

# pydantic reads this plain dict as the ConfigDict of each dataclass (no pydantic import needed).
_STRICT = {"extra": "forbid", "use_attribute_docstrings": True, "frozen": True}


@record
class Price(Record):
    """A price in US dollars, with when and where it was seen."""

    __pydantic_config__ = _STRICT

    usd: float
    """Price in USD."""
    date: str
    """When the price was seen (YYYY-MM or YYYY-MM-DD)."""
    source: str
    """Where the price comes from (a URL or a named document)."""
    condition: str = "new"
    """`new`, `used` or `msrp` (the launch list price)."""


@record
class NvlinkSpec(Record):
    """A GPU's NVLink capability."""

    __pydantic_config__ = _STRICT

    generation: int
    """NVLink generation (1 to 5)."""
    gb_s: float
    """Total NVLink bandwidth per GPU, both directions summed, GB/s."""
    max_gpus: int
    """How many GPUs one bridge or fabric joins all-to-all (2 for a bridge pair, 8 for HGX)."""
    topology: str = "bridge"
    """`bridge` (a connector joining a pair), `switch` (NVSwitch all-to-all) or `mesh` (direct links)."""


@record
class GpuSpec(Record):
    """A GPU or unified-memory machine in the catalog."""

    __pydantic_config__ = _STRICT

    id: str
    """Stable lower-case id, e.g. `rtx-3090`."""
    name: str
    """Marketing name."""
    vendor: str
    """`nvidia`, `amd`, `intel` or `apple`."""
    category: str
    """`consumer`, `workstation`, `datacenter` or `unified`."""
    arch: str
    """Architecture family used by the speed rules (e.g. `ampere`, `ada`, `hopper`, `apple-m2`)."""
    vram_gib: float
    """Memory the GPU can address, GiB (unified machines: the whole unified memory)."""
    memory_bandwidth_gb_s: float
    """Peak memory bandwidth, GB/s."""
    fp16_tflops: float
    """Dense FP16/BF16 tensor (matrix) throughput, TFLOPS; the FP16 vector rate where there are no tensor cores."""
    power_w: float
    """Board power (TDP/TGP), watts."""
    sources: tuple[str, ...]
    """Where the numbers come from."""
    fp16_tflops_basis: str = ""
    """How `fp16_tflops` was derived (dense vs sparse, accumulate type, clock)."""
    pcie_gen: int | None = None
    """PCIe generation of the GPU's own host link (None for SoCs)."""
    pcie_lanes: int | None = None
    """PCIe lanes of the GPU's own host link (None for SoCs)."""
    pcie_p2p: bool = False
    """Peer-to-peer over PCIe works on the stock driver."""
    nvlink: NvlinkSpec | None = None
    """NVLink capability, if any."""
    unified_memory: bool = False
    """CPU and GPU share one memory pool (Apple silicon, DGX Spark, Strix Halo)."""
    compute_capability: float | None = None
    """NVIDIA CUDA compute capability (major.minor, e.g. 8.6); None for other vendors or when unknown."""
    backend: str = ""
    """The GPU programming interface runtimes use on it: `cuda`, `rocm`, `metal`, `sycl` or `vulkan`."""
    gfx_target: str = ""
    """AMD GPUs: the LLVM target its kernels are compiled for (`gfx906`, `gfx942`, `gfx1100`), as ROCm's GPU
    specifications list it; a runtime's `gfx_targets` say which it has kernels for. Empty: not an AMD GPU, or
    unknown."""
    price: Price | None = None
    """A representative price."""
    used_price: Price | None = None
    """A dated used-market price beside a new one (`plan --used` takes the cheaper)."""
    sold_in: tuple[int, ...] = ()
    """SXM/OAM modules: the GPU counts of the baseboards they are sold on (HGX: 4 or 8); empty for
    cards and machines sold one at a time. `plan` offers such parts only in these counts."""
    aliases: tuple[str, ...] = ()
    """Other names people type for this GPU."""
    notes: str = ""
    """Anything a reader of the entry should know."""

    @property
    def vram_bytes(self) -> int:
        return int(round(self.vram_gib * GIB))

    @property
    def nvlink_gb_s(self) -> float:
        return self.nvlink.gb_s if self.nvlink else 0.0


@record
class CpuCluster(Record):
    """Cores of one kind in a CPU (a hybrid chip has several clusters: performance and efficiency cores)."""

    __pydantic_config__ = _STRICT

    cores: int
    """Physical cores of this kind."""
    ghz: float
    """Their highest clock as the vendor states it (max boost), GHz."""
    simd_bits: int
    """Width of the vector datapath an int8 dot product runs on (128 for NEON, 256 for AVX2 or AVX-512 run on
    256-bit halves, 512 for a full-width AVX-512 unit)."""
    pipes: int
    """Vector pipes that issue int8 dot products (SDOT, VPDPBUSD, VPMADDUBSW) each cycle."""
    default_threads: bool = True
    """llama.cpp runs a thread on these cores by default: `cpu_get_num_math` (common/common.cpp) counts the
    physical cores, and on a hybrid x86 chip only its performance cores."""

    @property
    def int8_gops(self) -> float:
        """Peak int8 dot-product rate: cores x GHz x (simd_bits / 8) lanes x pipes x 2 (a multiply and an add)."""
        return self.cores * self.ghz * self.simd_bits / 8 * self.pipes * 2


@record
class CpuMemory(Record):
    """A CPU's memory interface as its vendor specifies it, every channel populated."""

    __pydantic_config__ = _STRICT

    type: str
    """`DDR4`, `DDR5`, `LPDDR4X`, `LPDDR5X`..."""
    mt_s: int
    """Transfers per second, millions (the fastest the vendor supports)."""
    channels: int
    """Channels."""
    channel_bits: int = 64
    """Width of one channel, bits (64 for a DDR DIMM channel, LPDDR as its package is wired)."""

    @property
    def peak_gb_s(self) -> float:
        return self.channels * self.channel_bits / 8 * self.mt_s / 1000


@record
class CpuSpec(Record):
    """A CPU: what bounds decode on it (its int8 dot-product peak, its RAM, its chiplets' fabric links)."""

    __pydantic_config__ = _STRICT

    id: str
    """Stable lower-case id, e.g. `ryzen-9-7950x`."""
    name: str
    """Marketing name."""
    vendor: str
    """`amd`, `intel`, `arm`, `apple`, `broadcom`, ..."""
    arch: str
    """Core microarchitecture(s), in words."""
    clusters: tuple[CpuCluster, ...]
    """Its cores, by kind."""
    peak_basis: str
    """Where the clusters' clocks, widths and pipes come from."""
    sources: tuple[str, ...]
    """Where the numbers come from."""
    memory: CpuMemory | None = None
    """Its memory interface (None: not stated; the rig's RAM bandwidth then stands)."""
    ccds: int = 0
    """Core chiplets (AMD CCDs) that reach memory over a fabric link each; 0 for a monolithic die."""
    ccd_read_gb_s: float = 0.0
    """Read bandwidth of one CCD's fabric link (AMD GMI), GB/s: a CPU with few CCDs cannot pull all of its
    channels' bandwidth. 0: not capped (monolithic, or no cited figure)."""
    fabric_basis: str = ""
    """Where the fabric link figure comes from."""
    aliases: tuple[str, ...] = ()
    """Other names people type, and the names a probe reads (`/proc/cpuinfo`, the Mac's brand string)."""
    notes: str = ""

    @property
    def int8_gops(self) -> float:
        """Peak int8 dot-product rate of the cores llama.cpp runs on by default, GOPS."""
        return sum(c.int8_gops for c in self.clusters if c.default_threads)

    @property
    def fabric_gb_s(self) -> float | None:
        """What its chiplets can read from memory together, GB/s (None: no fabric cap)."""
        return self.ccds * self.ccd_read_gb_s if self.ccds and self.ccd_read_gb_s else None


@record
class RecurrentSpec(Record):
    """The fixed per-sequence state of recurrent layers (Mamba, Mamba2, Gated DeltaNet), in llama.cpp's
    terms (`{arch}.ssm.*` GGUF keys). Each recurrent layer keeps, per sequence, a convolution state of
    (conv_kernel - 1) x (inner_size + 2 x group_count x state_size) values and a scan state of
    state_size x inner_size values (llama_hparams::n_embd_r / n_embd_s), whatever the context length.
    Gated DeltaNet maps onto it as llama.cpp's converter does: inner_size = linear_num_value_heads x
    linear_value_head_dim, state_size = linear_key_head_dim, group_count = linear_num_key_heads."""

    __pydantic_config__ = _STRICT

    kind: str
    """`mamba`, `mamba2` or `gated_deltanet`."""
    conv_kernel: int
    """Width of the short convolution (`conv_kernel`, `mamba_d_conv`, `linear_conv_kernel_dim`)."""
    inner_size: int
    """Channels of the scan (Mamba `d_inner`; Gated DeltaNet value heads x value head size)."""
    state_size: int
    """State per channel (Mamba `d_state`; Gated DeltaNet key head size)."""
    group_count: int = 0
    """B/C groups (Mamba2 `n_groups`; Gated DeltaNet key heads; 0 for Mamba 1)."""
    scan_bytes: float = 0.0
    """Bytes of one scan-state value where the config fixes its dtype (`mamba_ssm_dtype`: float32 -> 4 in every
    Qwen3.5 / 3.6 config); 0: the runtime's own (vLLM keeps it in the model's dtype)."""

    @property
    def elements(self) -> int:
        """State values per layer and sequence (convolution + scan)."""
        conv = max(self.conv_kernel - 1, 0) * (self.inner_size + 2 * self.group_count * self.state_size)
        return conv + self.state_size * self.inner_size


@record
class VisionDims(Record):
    """A vision tower's shape, as its checkpoint's vision_config gives it (advisor/modelfile/vision.py
    `from_config` counts the same dims; tests/test_catalog_vision.py holds the two together): what vLLM's
    encoder profile needs beyond the parameter count."""

    __pydantic_config__ = _STRICT

    kind: str
    """The config's model_type, the key of rules/vision.toml's per-kind tables (`qwen3_5_moe`, `gemma3`)."""
    hidden_size: int
    """Encoder width (n_embd)."""
    ff_size: int
    """Encoder MLP width (n_ff)."""
    layers: int
    heads: int
    patch_size: int
    merge: int = 1
    """Patches merged per side into one language-model token."""
    image_size: int = 0
    """The encoder's native image side, pixels (fixed-size encoders; 0: dynamic resolution)."""
    out_hidden: int = 0
    """Width of one output token (the language model's hidden size)."""


@record
class ModelSpec(Record):
    """An open-weights LLM, with the architecture values of its real `config.json`."""

    __pydantic_config__ = _STRICT

    id: str
    """Stable lower-case id, e.g. `llama-3.1-70b`."""
    name: str
    """Display name."""
    family: str
    """Model family (llama, qwen, mistral, gemma, phi, deepseek, gpt-oss, glm, command-r...)."""
    params_total: int
    """Total parameters."""
    params_active: int
    """Parameters used per token (equal to the total for dense models)."""
    layers: int
    """Transformer blocks (`num_hidden_layers`)."""
    hidden_size: int
    """Residual width (`hidden_size`)."""
    intermediate_size: int
    """Dense MLP width (`intermediate_size`)."""
    attention_heads: int
    """Query heads (`num_attention_heads`)."""
    kv_heads: int
    """Key/value heads (`num_key_value_heads`); equal to heads without GQA."""
    head_dim: int
    """Per-head dimension (`head_dim`, or hidden/heads when absent)."""
    vocab_size: int
    """Vocabulary size."""
    max_context: int
    """Maximum context (`max_position_embeddings`, or the documented extended context)."""
    sources: tuple[str, ...]
    """Where the values come from (config.json copies, model cards)."""
    released: str = ""
    """The month the open weights were published (`YYYY-MM`); empty: not known to the catalog."""
    tied_embeddings: bool = False
    """Input embedding and output head share one matrix."""
    experts: int = 0
    """Routed experts per MoE layer (0 for dense models)."""
    experts_active: int = 0
    """Routed experts used per token."""
    shared_experts: int = 0
    """Always-on shared experts per MoE layer."""
    moe_intermediate_size: int = 0
    """Width of one expert's MLP."""
    dense_layers: int = 0
    """Leading layers that use a dense MLP instead of experts (DeepSeek `first_k_dense_replace`)."""
    sliding_window: int = 0
    """Sliding-window size of the local-attention layers (0: none)."""
    sliding_window_layers: int = 0
    """How many of the layers use the sliding window (the rest attend globally)."""
    attention_chunk_size: int = 0
    """The windowed layers attend within fixed chunks of this many tokens (Llama 4's chunked local attention,
    config.json `attention_chunk_size`) rather than a sliding window; 0: a sliding window, or none."""
    rotary_dims: int = 0
    """Dimensions of a head that RoPE rotates, where the config's `partial_rotary_factor` leaves some unrotated
    (0: the whole head)."""
    kv_lora_rank: int = 0
    """Multi-head latent attention: compressed KV rank (0: not MLA)."""
    qk_rope_head_dim: int = 0
    """Multi-head latent attention: decoupled RoPE key dimension cached beside the latent. DeepSeek V4
    (`compress_ratios`): the RoPE slice of its K=V head, which a packed fp8 cache keeps in bf16."""
    expert_layers: tuple[int, ...] = ()
    """Layers that carry the routed experts when they are not simply every layer after `dense_layers`
    (Nemotron-H's `E` blocks, Jamba's every other layer); empty: layers `dense_layers` onwards."""
    expert_matrices: int = 3
    """Weight matrices per expert: 3 for gated MLPs (gate, up, down), 2 for Nemotron-H's relu^2 (up, down)."""
    layer_pattern: str = ""
    """What each layer keeps per sequence, one letter per layer: `a` attention with its own KV cache,
    `r` a fixed recurrent state (`recurrent`), `-` nothing of its own (an MLP-only block, or attention
    that reuses an earlier layer's KV cache: Gemma 3n/4 `num_kv_shared_layers`). Empty: every layer `a`."""
    recurrent: RecurrentSpec | None = None
    """The state of the `r` layers (hybrid linear-attention and Mamba models)."""
    global_kv_heads: int = 0
    """KV heads of the full-attention layers when they differ from the sliding-window ones (Gemma 4
    `num_global_key_value_heads`; 0: same as `kv_heads`)."""
    global_head_dim: int = 0
    """Head size of the full-attention layers when it differs (Gemma 4 `global_head_dim`; 0: `head_dim`)."""
    per_layer_embed_params: int = 0
    """Per-layer embedding table (Gemma 3n/4 `vocab_size_per_layer_input` x layers x
    `hidden_size_per_layer_input`): looked up like the token embedding, kept with it on the host."""
    indexer_head_dim: int = 0
    """DeepSeek V3.2 sparse-attention indexer: the key size it caches per token and layer beside the
    MLA latent (`index_head_dim`; 0: no indexer)."""
    compress_ratios: tuple[int, ...] = ()
    """DeepSeek V4 compressed attention, one ratio per layer (config.json `compress_ratios`): every layer
    caches one shared K=V vector of `head_dim` per token of its `sliding_window`; a layer of ratio r > 0
    adds one compressed entry per r tokens of the whole context, and the layers of ratio 4 (compressed
    sparse attention) add the lightning indexer's key of `indexer_head_dim` per entry. Empty: not V4."""
    mtp_layers: int = 0
    """Multi-token-prediction layers in the files (`num_nextn_predict_layers`): not in `layers` nor in
    `params_total`, and not loaded unless speculative decoding asks for them."""
    vision_params: int = 0
    """Parameters of the vision tower (and projector) shipped with the model, not in `params_total`:
    runtimes that serve images load it (a GGUF's separate mmproj file)."""
    vision: VisionDims | None = None
    """The vision tower's shape (its vision_config), where the catalog records it beside `vision_params`."""
    assumptions: tuple[str, ...] = ()
    """What the reader of a model file had to assume because the file did not say (reported as a finding)."""
    architecture: str = ""
    """The checkpoint's config.json `architectures` class (`Llama4ForConditionalGeneration`) when the model was
    read from one; a runtime that lists the classes it implements (`architectures`) refuses any other. Empty:
    not known (catalog entries name what a runtime lacks in its `unsupported_models`)."""
    native_quant: str = ""
    """The format the weights are published in when it is not 16-bit and files keep it (gpt-oss:
    MXFP4 experts in every GGUF); the advisor then starts its quantization choice there."""
    native_expert_bits: float = 0.0
    """Bits per weight its routed experts keep in every GGUF, whatever the file's quantization (gpt-oss:
    llama-quantize leaves the MXFP4 expert tensors as they are, 4.25 bits); 0 when requants requantize them."""
    aliases: tuple[str, ...] = ()
    """Other names people type for this model: the same release (same weights, same config) only."""
    other_releases: tuple[str, ...] = ()
    """Names of other releases with this architecture but their own config or weights (a longer
    context, a native INT4 checkpoint): they never resolve to this entry; asked for, they are read
    from their own files, and a failure to read them names this entry as the nearest in the catalog."""
    notes: str = ""
    """Anything a reader of the entry should know."""

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    def pattern_problems(self) -> list[str]:
        """Inconsistencies between `layer_pattern`, `recurrent` and the layer count."""
        out = []
        p = self.layer_pattern
        if p and len(p) != self.layers:
            out.append(f"layer_pattern has {len(p)} letters for {self.layers} layers")
        if any(k not in LAYER_KINDS for k in p):
            out.append(f"layer_pattern may only hold {', '.join(repr(k) for k in LAYER_KINDS)}")
        if "r" in p and self.recurrent is None:
            out.append("layer_pattern has recurrent ('r') layers but no recurrent state table")
        if p and "a" not in p and "r" not in p:
            out.append("layer_pattern keeps no cache on any layer")
        if self.compress_ratios and len(self.compress_ratios) != self.layers:
            out.append(f"compress_ratios has {len(self.compress_ratios)} entries for {self.layers} layers")
        if self.compress_ratios and not self.sliding_window:
            out.append("compress_ratios needs the sliding_window every layer keeps")
        return out

    @property
    def is_hybrid(self) -> bool:
        """Some layers keep no KV cache of their own (recurrent, MLP-only or KV-shared layers)."""
        return bool(self.layer_pattern) and any(k != "a" for k in self.layer_pattern)


@record
class QuantSpec(Record):
    """A weight quantization format."""

    __pydantic_config__ = _STRICT

    id: str
    """Id as printed, e.g. `Q4_K_M`, `fp8`, `exl2-4.65`."""
    format: str
    """`gguf`, `safetensors`, `exl2`, `mlx`."""
    bits_per_weight: float
    """Average bits per weight of a whole model file in this format."""
    bpw_basis: str
    """Where the bits per weight come from."""
    runtimes: tuple[str, ...]
    """Runtimes that load this format."""
    kld: float | None = None
    """Mean KL divergence against the 16-bit model (Llama 3.1 8B unless `quality_basis` says otherwise)."""
    ppl_delta_pct: float | None = None
    """Perplexity increase against the 16-bit model, percent."""
    quality_basis: str = ""
    """Where the quality numbers come from."""
    kernel: str = ""
    """Kernel class for the speed rules (`f16`, `q8`, `kquant`, `iquant`, `legacy`, `fp8`, `int4`...)."""
    linear_bits: float | None = None
    """Formats that keep the embedding and output matrices in 16 bit: bits per weight of every other
    (linear-layer) weight. The model's weights are then exact for any size; `bits_per_weight` is the
    whole-file average of the model it was measured on."""
    embed_bits: float = 16.0
    """Bits per weight of the embedding and output matrices when `linear_bits` is set."""
    expert_bits: float | None = None
    """Bits per weight of a MoE model's routed-expert tensors when the format stores them apart from
    the rest (MXFP4: 4.25 for the experts, `linear_bits` for attention and dense weights)."""
    head_bits: float | None = None
    """Bits per weight of an untied output head when the format quantizes it apart from the embedding
    (EXL3's `--head_bits`, 6 by default); None: `embed_bits`."""
    mlp_bits: float | None = None
    """Bits per weight of the dense MLPs and shared experts when the format stores them apart from attention
    (NVIDIA's ModelOpt mixed layouts: NVFP4 MLPs, FP8 attention); None: `linear_bits`."""
    aliases: tuple[str, ...] = ()
    """Other names repos and tools use for this format (`compressed-tensors-w4a16`, `auto-round`)."""
    ggml_tables: tuple[str, ...] = ()
    """GGUF files: the ggml type tables beyond the common one that its tensors need (`ik_llama.cpp` for
    IQ4_KS and the other ik_llama.cpp types, `llama.cpp` for ids only mainline defines); a runtime loads
    the file only when it reads every one (RuntimeSpec.ggml_tables)."""

    @property
    def body_bits(self) -> float:
        """Bits per weight of the repeating layers' matrices: `linear_bits` where the format states them, else
        the whole-file average."""
        return self.linear_bits if self.linear_bits is not None else self.bits_per_weight


@record
class MultiNode(Record):
    """How a runtime runs one model on GPUs in several machines (rules/runtimes.toml `[runtime.multinode]`).

    Commands are templates: `{command}` is the answer's own command line, `{port}` the runtime's port,
    `{head}` the first machine's address, `{workers}` the other machines as `host:port,...`, `{rank}` a
    machine's place (0 first), `{nodes}` how many there are, `{model}` the model as the command names it."""

    __pydantic_config__ = _STRICT

    split: str = "none"
    """What it does across machines by default: `none` (it runs on one machine only), `layer` (whole layers
    per machine, llama.cpp RPC), `tp_in_node` (tensor parallel over each machine's GPUs, pipeline stages across
    machines: vLLM with Ray), `tensor` (tensor parallel over every GPU of every machine: SGLang's multi-node
    example) or `pipeline` (one pipeline stage per machine: exo's default)."""
    tensor: bool = False
    """`--split tensor` runs tensor parallel across machines (exo's Tensor sharding)."""
    tensor_basis: str = ""
    """Where it says whether `--split tensor` spans machines."""
    protocol: str = ""
    """How machines talk: a rules/interconnect.toml [protocol] key (messages per hop and per all-reduce)."""
    port: int = 0
    """The port the bring-up commands use."""
    head: tuple[str, ...] = ()
    """Commands on the first machine, in order."""
    worker: tuple[str, ...] = ()
    """Commands on every other machine, in order."""
    order: str = "any"
    """`workers_first`, `head_first` (the head's first command, then the workers, then the rest) or `any`."""
    weights_over_network: bool = False
    """The first machine sends every other machine its weights at load (llama.cpp RPC); False: each machine
    reads its own copy of the model."""
    sharding: dict[str, str] = field(default_factory=dict)
    """`{sharding}` in a command: its word for a `layer` and a `tensor` split across machines (exo: Pipeline, Tensor)."""
    transport: dict[str, str] = field(default_factory=dict)
    """`{transport}` in a command: its word for a `tcp` and an `rdma` network (exo: MlxRing, MlxJaccl)."""
    basis: str = ""
    """The engine's documentation this follows."""


@record
class RuntimeRelease(Record):
    """Start-up defaults of a range of a runtime's releases that differ from today's (rules/runtimes.toml
    `[[runtime.releases]]`), applied when the answer is asked for that release (`--runtime-version`)."""

    __pydantic_config__ = _STRICT

    since: str = ""
    """The first release it covers, `X.Y.Z` (empty: every release before `before`)."""
    before: str = ""
    """The first release it no longer covers (empty: up to today's)."""
    max_num_seqs: int | None = None
    """Its default most requests per step (None, as every field below: as today's)."""
    max_num_seqs_large: int | None = None
    """The same on GPUs of `large_gpu_gib` and more."""
    sampler_copies: float | None = None
    """Its sampler warm-up's f32 copies of (requests x vocabulary) at the peak (None: as today's)."""
    cuda_graph_mib: float | None = None
    """CUDA graph memory it takes out of the KV pool for its first capture (0: none, its graphs are captured after
    the pool, out of the memory the utilization fraction leaves; None: as today's)."""
    gpu_memory_utilization: float | None = None
    """Its default share of each GPU when none is given (None: as today's)."""
    in_flight_batches: int | None = None
    """Scheduler steps a request may have in flight at once (None: as today's)."""
    basis: str = ""
    """Where these come from (the source files and pull requests)."""


@record
class RuntimeSpec(Record):
    """An inference runtime and what it costs in memory beyond weights and KV cache."""

    __pydantic_config__ = _STRICT

    id: str
    """Stable id as `--runtime` takes it: `llama.cpp`, `ollama`, `vllm`, `exllamav2`, `mlx`, `transformers`."""
    name: str
    """Display name."""
    default_split: str
    """`layer` or `tensor`."""
    formats: tuple[str, ...]
    """Quantization formats it loads."""
    context_mib: float
    """Per-GPU memory taken by the CUDA context and libraries before any tensor, MiB."""
    context_basis: str
    """Where `context_mib` comes from."""
    ubatch: int
    """Micro-batch (tokens per compute step) that sizes the compute buffers."""
    compute_fixed_mib: float
    """Fixed part of the compute buffer per GPU, MiB."""
    compute_basis: str
    """Where the compute-buffer model comes from."""
    ubatch_large: int = 0
    """Micro-batch on large GPUs (0: same as `ubatch`)."""
    large_gpu_gib: float = 0.0
    """GPUs with at least this much memory use `ubatch_large` (and `max_num_seqs_large`)."""
    large_gpu_excluded: tuple[str, ...] = ()
    """GPU id prefixes that keep the small defaults however much memory they have."""
    context_mib_many_gpus: float = 0.0
    """Extra per-GPU memory outside the allocator when 8 or more GPUs talk (NCCL buffers), MiB."""
    gpu_memory_utilization: float = 0.0
    """Fraction of each GPU the runtime reserves up front (vLLM); 0 when it allocates what it needs."""
    embeddings_on_host: bool = False
    """The token-embedding matrix stays in host RAM when all layers are on the GPU (llama.cpp, ExLlamaV2)."""
    kv_types: tuple[str, ...] = ("f16",)
    """KV cache types it supports."""
    supports_tensor_parallel: bool = True
    """It can split each layer across GPUs."""
    supports_cpu_offload: bool = True
    """It can keep part of the weights in system RAM."""
    offloads_experts: bool = True
    """A MoE model that does not fit keeps every layer's attention on the GPUs and moves routed experts to system
    RAM (llama.cpp's --fit); False: it moves whole layers, attention and experts together (Ollama)."""
    offload_basis: str = ""
    """Where `offloads_experts` comes from."""
    vendors: tuple[str, ...] = ("nvidia", "amd", "intel", "apple")
    """GPU vendors it runs on."""
    backends: tuple[str, ...] = ()
    """GPU back-ends (a GPU's `backend`: cuda, rocm, metal, vulkan, sycl) it has kernels for; empty: any of
    its vendors' GPUs."""
    backends_basis: str = ""
    """Where `backends` comes from."""
    gfx_targets: tuple[str, ...] = ()
    """AMD GPUs: the LLVM targets (a GPU's `gfx_target`) its kernels are built for; an AMD GPU with another target
    is refused. Empty: any AMD GPU its vendors and back-ends allow."""
    gfx_targets_basis: str = ""
    """Where `gfx_targets` comes from."""
    cpu_only: bool = True
    """It can run with no GPU at all."""
    like: str = ""
    """The runtime this one behaves like (Ollama, LM Studio and ik_llama.cpp are llama.cpp underneath):
    every field this entry leaves out is taken from that one, and it loads the same quantizations."""
    quant_ladder: str = ""
    """Which list of `[selection]` in rules/memory.toml it tries, best quality first (default: its id)."""
    kv_pad_cells: int = 0
    """The KV cache length is rounded up to a multiple of this many cells (0: allocated as asked)."""
    compute_buffers: str = "activation_peak"
    """How its scratch memory is sized: `ggml_graph` (llama.cpp reserves its compute graph for one
    micro-batch at the full context) or `activation_peak` (PyTorch runtimes: the activation peak of one
    chunk plus `compute_fixed_mib`)."""
    moe_activations: str = "expert_mlp"
    """What a MoE layer holds per token in its activation peak (`activation_peak` runtimes): `expert_mlp` (each
    chosen expert's gate-up output and activation, as a dense MLP of the experts' width) or `fused_workspace`
    (vLLM's fused-expert workspaces, which persist across layers: advisor/engine/memory.py _torch_mlp_width)."""
    eager_attention: bool = False
    """Attention materialises the full score matrix (no fused kernel): its memory grows with the context."""
    tensor_split: str = "heads"
    """How it splits a layer across GPUs: `heads` (attention heads and MLP columns: the head counts must
    divide by the GPU count, the KV cache is sharded) or `rows` (llama.cpp `-sm row`: each layer with
    its KV cache on its own GPU as in a layer split, its 2-D matrices cut into row bands over all GPUs, each
    split multiply synchronised on its own: advisor.engine.placement Placer._row_split) or
    `channels` (heads and MLP channels in proportion to each GPU's memory, each GPU keeping its heads' KV
    cache: no head count has to divide by the GPU count, ExLlamaV3) or `meta` (llama.cpp `-sm tensor`: every
    matrix cut along heads / feed-forward columns / vocabulary rows in `-ts` proportion, even without it, the KV
    cache by heads, the rest mirrored on every GPU: advisor.engine.placement Placer._meta_split)."""
    speed_fitted: bool = False
    """The speed fractions were fitted on this runtime's own measurements (else they are borrowed)."""
    trains: bool = False
    """Fine-tuning runs on it (PyTorch with PEFT): training estimates use its memory overheads."""
    speed_kind: str = ""
    """The runtime part of the kind of answer its error band is kept under (rules/speed_bands.toml,
    bench/accuracy.py); empty: no measurements, so every answer says "not measured"."""
    speed_terms: str = ""
    vision_terms: str = ""
    """The rules/vision.toml `[by_runtime]` entry saying how it loads a vision tower (an mmproj file, the
    checkpoint's encoder) and what it reserves for it; empty: none the advisor models."""
    row_split: bool = False
    """`--split row` is its own mode (llama.cpp `-sm row`): the `rows` placement, whatever `tensor_split`
    says `--split tensor` is."""
    tensor_flash_attention: bool = False
    """`--split tensor` needs flash attention on (llama.cpp: "SPLIT_MODE_TENSOR requires flash_attn")."""
    tensor_kv_types: tuple[str, ...] = ()
    """KV cache types `--split tensor` allows (empty: any of `kv_types`)."""
    tensor_backends: tuple[str, ...] = ()
    """Backends on which its `--split tensor` is documented to run (empty: any)."""
    tensor_unsupported_models: dict[str, str] = field(default_factory=dict)
    """Model id patterns (fnmatch) whose architecture its `--split tensor` refuses, with the reason."""
    tp_activation_bytes: int = 2
    """Bytes per value of the activations a tensor-parallel all-reduce sums (2: fp16/bf16 in PyTorch runtimes;
    4: ggml's f32 matrix-product results, llama.cpp -sm tensor)."""
    tensor_basis: str = ""
    """Where the `tensor_*` fields come from."""
    row_split_removed: tuple[str, ...] = ()
    """Backends (`cuda`, `rocm`, ...) on which today's builds no longer have the `rows` split (llama.cpp
    dropped its CUDA split buffer in Jul 2026): the answer says so."""
    row_split_removed_basis: str = ""
    """Where `row_split_removed` comes from."""
    flash_attention_backends: tuple[str, ...] = ()
    """Backends (`cuda`, `rocm`, `metal`, `vulkan`, `sycl`, `cpu`) where its flash attention runs, so
    `auto` (llama.cpp's default since 2025) resolves to on; elsewhere auto is off."""
    kv_quant_needs_flash_attention: bool = False
    """A quantized V cache needs flash attention (llama.cpp refuses `-ctv q8_0` with `-fa off`)."""
    swa_pads_ubatch: bool = False
    """A sliding-window layer keeps pad(window x sequences + n_ubatch) cells, not just the window (llama.cpp)."""
    kv_rotation_head_multiple: int = 0
    """It rotates a block-quantized K and V cache with a Walsh-Hadamard matrix when the head size is a
    multiple of this (llama.cpp since PR #21038, April 2026: 64); 0: no rotation. The rotated copies of
    Q, K, V and the attention output change how its graph allocator lays out the compute buffer
    (advisor/engine/memory.py compute_buffer_bytes)."""
    default_unified_kv: bool = False
    """Sequences share one KV cache (the whole context is every slot's span) unless told otherwise."""
    """Its own fitted fixed costs per token and layer: a table of `[by_runtime]` in rules/speed.toml."""
    family: str = "ggml"
    """Its family (advisor/engine/family.py): `ggml` (llama.cpp and the runtimes built on it), `exllama`,
    `torch` (transformers, MLX) allocate a KV cache slot per sequence as asked (llama.cpp `-np`); `paged`
    (vLLM, SGLang) gives all memory left after weights, activations and CUDA graphs to one paged KV pool and
    starts when one request of the full context fits."""
    kv_block_tokens: int = 0
    """Tokens per KV cache page of a paged pool (the pool is a whole number of pages)."""
    cuda_graph_mib: float = 0.0
    """Per-GPU memory its CUDA graphs take out of the KV pool, MiB: the first capture's (0: none, or captured
    after the pool is sized; nothing with eager mode). Each further graph adds `cuda_graph_each_mib`
    (advisor/engine/memory.py cuda_graph_bytes)."""
    cuda_graph_each_mib: float = 0.0
    """Per-GPU memory each captured graph after the first of its mode adds, MiB."""
    graph_capture_max: int = 0
    """The largest batch it captures a graph for by default (vLLM: 512), at most `graph_capture_per_seq` x
    max_num_seqs and the profile batch."""
    graph_capture_per_seq: int = 0
    """Captured batch tokens per request of max_num_seqs (vLLM: 2)."""
    rotary_cache_bytes: float = 0.0
    """Bytes per value of the rotary position table it builds on each GPU at load for every position up to the
    model's maximum (vLLM's RotaryEmbedding cos_sin_cache); 0: none counted."""
    max_num_seqs: int = 0
    """Most requests it decodes at once by default (0: no cap beyond memory)."""
    max_num_seqs_large: int = 0
    """The same on GPUs of `large_gpu_gib` and more (0: as `max_num_seqs`)."""
    sampler_copies: float | None = None
    """Paged runtimes that profile their sampler with `max_num_seqs` requests: f32 copies of
    (requests x vocabulary) its warm-up holds at the peak, 0 and up (None: logits for the whole profile batch
    instead)."""
    sampler_basis: str = ""
    """Where `sampler_copies` comes from."""
    sampler_after_forward: bool = False
    """Its profile warms the sampler up after the forward pass has freed its activations (vLLM's profile_run:
    _dummy_run, then _dummy_sampler_run on the batch's hidden states), so the peak is the larger of the two;
    False: both are held at once (a reserve sized for both, as ExLlamaV3's)."""
    kv_groups: bool = False
    """A paged pool shared by layer groups of each attention kind (vLLM's hybrid KV cache manager): a model
    with sliding-window, chunked or recurrent layers is accounted as advisor/engine/kv_groups.py says."""
    recurrent_conv_bytes: float = 0.0
    """Bytes per convolution-state value of a recurrent layer in that pool (the model's dtype)."""
    recurrent_scan_bytes: dict[str, float] = field(default_factory=dict)
    """Bytes per scan-state value by recurrent kind (`default` for the rest)."""
    recurrent_pages: int = 1
    """Pages one request's recurrent state takes in each recurrent group."""
    chunked_groups: bool = False
    """The grouped pool keeps chunked-local layers to their chunk (False: it counts them as full attention)."""
    in_flight_batches: int = 1
    """Scheduler steps one request may have in flight at once: a sliding-window group keeps its window plus
    this many steps' tokens of each request (vLLM's asynchronous scheduling runs one step ahead)."""
    kv_groups_basis: str = ""
    """Where the grouped-pool constants come from."""
    kind_pools: bool = False
    """A pool per attention kind, each with its own token count (SGLang's pool configurators): a model with
    sliding-window or recurrent layers is accounted as advisor/engine/kv_kinds.py says."""
    swa_full_tokens_ratio: float = 0.0
    """Tokens of the sliding-window pool per token of the full-attention pool (SGLang --swa-full-tokens-ratio)."""
    swa_pool_models: tuple[str, ...] = ()
    """Model id patterns (fnmatch) whose sliding-window or chunked-local layers get that pool; on any other model
    the window is a mask only and every layer holds the whole length."""
    swa_pool_architectures: tuple[str, ...] = ()
    """The same, by config.json `architectures` class, for a model read from a config.json."""
    recurrent_memory_ratio: float = 0.0
    """Recurrent-state memory per unit of KV memory when the runtime splits the budget between them (SGLang
    --mamba-full-memory-ratio)."""
    recurrent_slots_per_request: int = 0
    """Recurrent-state slots a running request takes (0: no cap from the state pool)."""
    kind_pools_basis: str = ""
    """Where the per-kind pool constants come from."""
    prefill_beside_decode: bool = True
    """A new prompt's chunks run in the same step as the running requests' decode tokens (vLLM's scheduler);
    False: in a prefill step of their own (SGLang without --enable-mixed-chunk)."""
    pipeline_split: str = "memory"
    """How a layer (pipeline) split cuts the layers: `memory` (in proportion to each GPU's memory, llama.cpp)
    or `even` (equal stages, vLLM's pipeline parallel: the smallest card's stage decides)."""
    pool_spread_mib: float = 0.0
    """How much of a paged runtime's non-KV memory moves between two starts of the same command, MiB: a
    pool with less spare than this over one request may not start."""
    pool_spread_basis: str = ""
    """Where `pool_spread_mib` comes from."""
    remedy_memory_fraction: float = 0.0
    """The highest memory fraction the advisor suggests when a paged runtime does not start (0: none)."""
    remedy_basis: str = ""
    """Where `remedy_memory_fraction` comes from."""
    option_names: dict[str, str] = field(default_factory=dict)
    """Its own command-line names for the serving options (`memory_fraction`, `max_model_len`,
    `kv_cache_dtype`, `eager`, `tensor_parallel`, `pipeline_parallel`, `max_num_seqs`, `cpu_offload_gb`;
    `kv_cache_dtype_fp8`: the whole option for an fp8 cache where the value is not spelt `fp8`)."""
    fraction_of_free: bool = False
    """The memory fraction applies to what is free once the process holds its CUDA context and NCCL
    buffers, and only weights and KV cache live inside it: activations, CUDA graphs and request tables
    come out of the rest (SGLang's mem_fraction_static). False: the fraction is of the whole card and
    everything the runtime allocates comes out of it (vLLM's gpu_memory_utilization)."""
    starts_without_room: bool = False
    """A paged runtime that starts even when one request of the full context does not fit its pool, and
    then refuses longer requests (SGLang); False: it refuses to start (vLLM)."""
    context_mib_nvlink: float = 0.0
    """For a `fraction_of_free` runtime: extra per-GPU memory its distributed start takes when the GPUs
    share NVLink (NCCL and all-reduce buffers), taken off before the fraction, MiB."""
    load_extra_mib: float = 0.0
    """Per-GPU memory loading the weights takes beyond the weight tensors, inside the fraction, MiB."""
    load_extra_basis: str = ""
    """Where `load_extra_mib` (and a `fraction_of_free` runtime's `context_mib`) come from."""
    fraction_rule: dict[str, float] = field(default_factory=dict)
    """How the default memory fraction follows from the card when the user gives none (SGLang
    server_args._handle_gpu_memory_settings): reserved MiB = `base_mib` + `prefill_token_mib` x
    max(chunked prefill, `min_prefill_tokens`) + `graph_batch_mib` x CUDA-graph batch size (none when
    eager) + `rank_mib` x tensor x pipeline size, at least `floor_mib` on cards over `floor_above_mib`;
    fraction = (card MiB - reserved) / card MiB, rounded to `round_digits`. Empty: `gpu_memory_utilization`."""
    fraction_buckets: tuple[tuple[float, ...], ...] = ()
    """For `fraction_rule`: (card memory below this many MiB, 0 for no bound; default chunked prefill
    tokens; CUDA-graph batch size below `large_tp` GPUs per layer; at or above it), the first that matches."""
    requests_rule: tuple[int, ...] = ()
    """Default cap on requests at once from the pool (SGLang): (per-context factor, least, most): the cap
    is min(pool // 2, clamp(pool / context x factor, least, most)). Empty: `max_num_seqs`."""
    basis_urls: dict[str, str] = field(default_factory=dict)
    """Source (file and commit, or URL) of each constant above, by field name."""
    min_compute_capability: float = 0.0
    """Lowest NVIDIA compute capability it runs on (0: no minimum)."""
    max_gpus: int = 0
    """Most GPUs one instance of it uses as the advisor models it (0: any number)."""
    hardware_basis: str = ""
    multinode: MultiNode = field(default_factory=MultiNode)
    """How it runs across machines (split `none`: on one machine only)."""
    releases: tuple[RuntimeRelease, ...] = ()
    """Older releases whose start-up defaults differ from today's (advisor/engine/releases.py)."""
    """Where `min_compute_capability` comes from."""
    quant_min_cc: dict[str, float] = field(default_factory=dict)
    """Lowest NVIDIA compute capability its kernels need for each quantization id it loads."""
    quant_basis: str = ""
    """Where `quant_min_cc` comes from."""
    quant_backends: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """For each quantization id it loads whose kernels exist only for some GPU backends: those backends."""
    unsupported_families: tuple[str, ...] = ()
    """Model families it does not implement (e.g. ExLlamaV2 has no gpt-oss)."""
    families_basis: str = ""
    """Where `unsupported_families` comes from."""
    architectures: tuple[str, ...] = ()
    """The config.json `architectures` classes it implements; a model read from a config.json whose class is not
    among them is refused (empty: not declared)."""
    architectures_basis: str = ""
    """Where `architectures` comes from."""
    unsupported_models: dict[str, str] = field(default_factory=dict)
    """Models it does not implement within families it otherwise runs: a shell pattern over the model's id
    (`llama-4-*`) -> why, with its source (an architecture it lacks, or a config its code refuses)."""
    reserve_mib_other_gpus: float = 0.0
    """Memory its loader leaves free on every GPU after the first, MiB (beyond `context_mib`)."""
    fit_margin_mib: float = 0.0
    """Memory it keeps free on each GPU when it fits a model to the GPUs itself, MiB (llama.cpp's `--fit-target`
    default): an answer that leaves less than this free is `tight` (0: no margin declared)."""
    fit_margin_basis: str = ""
    """Where `fit_margin_mib` comes from."""
    attention_pool_lookahead: float = 0.0
    """Without flash attention, the GPU back-ends of `attention_pool_backends` convert the attention's f32 inputs
    to f16 for cuBLAS/hipBLAS in a memory pool kept beside the compute buffer: one f16 copy of
    (cells x micro-batch x heads) per GPU, times this look-ahead factor of the pool (0: no such pool)."""
    attention_pool_backends: tuple[str, ...] = ()
    """GPU back-ends (advisor.engine.rig.gpu_backend) whose unfused attention takes that pool copy."""
    attention_pool_basis: str = ""
    """Where the attention pool copy comes from."""
    swa_full_cache: bool = False
    """Sliding-window layers keep a cache as long as the global ones (no window-sized cache)."""
    ggml_tables: tuple[str, ...] = ()
    """GGUF runtimes: the ggml type tables it reads beyond the common ids (advisor/modelfile/ggml_types.py):
    `llama.cpp` (mainline's own ids: TQ1_0, TQ2_0, NVFP4) or `ik_llama.cpp` (IQ2_K ... IQ1_KT, *_R4)."""
    ggml_tables_basis: str = ""
    """Where `ggml_tables` comes from."""
    notes: str = ""
    """Anything a reader of the entry should know."""

    @property
    def ladder(self) -> str:
        """The `[selection]` list of quantizations it tries."""
        return self.quant_ladder or self.like or self.id

    def loads(self, quant: QuantSpec) -> bool:
        """It loads this quantization (the quant lists it, or the runtime it behaves like; a quantization read
        from a file that lists no runtime, such as EXL2/EXL3, by the runtimes whose formats include its own),
        and it reads every ggml type table the file's tensors come from."""
        if set(quant.ggml_tables) - set(self.ggml_tables):
            return False
        return (self.id in quant.runtimes or (bool(self.like) and self.like in quant.runtimes)
                or (not quant.runtimes and quant.format in self.formats))


@record
class PresetRig(Record):
    """A named rig people ask about (for the app's picker and examples)."""

    __pydantic_config__ = _STRICT

    id: str
    """Stable id, e.g. `2x-rtx-3090-nvlink`."""
    name: str
    """Display name."""
    gpus: tuple[str, ...]
    """GPU specs as `--gpu` takes them (`2xrtx-3090`)."""
    nvlink: bool = False
    """The GPUs are joined by NVLink as their hardware allows."""
    ram_gib: float = 64.0
    """System RAM, GiB."""
    notes: str = ""
    """What this rig stands for."""


@record
class Catalog(Record):
    """Everything the engine knows, merged from the built-in and user files."""

    gpus: dict[str, GpuSpec]
    models: dict[str, ModelSpec]
    quants: dict[str, QuantSpec]
    runtimes: dict[str, RuntimeSpec]
    presets: dict[str, PresetRig] = field(default_factory=dict)
    rules: Rulebook | None = None
    """The rulebook's tables (memory, speed, interconnect, plan) as typed records."""
    cpus: dict[str, CpuSpec] = field(default_factory=dict)
    """CPUs (hardware_db/cpus.toml): what bounds decode on the CPU."""
