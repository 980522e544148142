"""The rulebook as typed, frozen records: one class per table of rules/{memory,speed,interconnect,plan}.toml.

The engine reads `rules.memory.host.os_reserve_gib`, never `rules["memory"]["host"][...]`: a misspelt
or missing key fails when the catalog is validated (pydantic, unknown keys rejected, ranges in
`advisor.catalog.load.BOUNDS`), not in the middle of an answer. Each value's source is the comment
above it in the TOML file. Entries (`[[quant]]`, `[[runtime]]`) are `advisor.catalog.types`.
"""

from __future__ import annotations

from dataclasses import field, fields, replace

from advisor.record import Record, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_STRICT = {"extra": "forbid", "use_attribute_docstrings": True, "frozen": True}


# --- rules/memory.toml -------------------------------------------------------------------------

@record
class KvCacheRules(Record):
    __pydantic_config__ = _STRICT
    bytes_per_element: dict[str, float]
    """Bytes per cached element of each KV cache type (f16, q8_0, ...)."""
    block_quantized: tuple[str, ...] = ()
    """The KV cache types stored in quantized blocks (ggml_is_quantized: q8_0, q4_0)."""


@record
class DiscreteGpuRules(Record):
    __pydantic_config__ = _STRICT
    nvidia_reserved_mib: float
    """Memory the NVIDIA driver reserves on each card before any process runs, MiB."""
    vendor_reserved_mib: dict[str, float] = field(default_factory=dict)
    """The same for other vendors' discrete cards, by `GpuSpec.vendor` (AMD: what amdgpu keeps back from the
    card's nominal memory), MiB; a vendor not listed: 0."""
    gpu_reserved_mib: dict[str, float] = field(default_factory=dict)
    """What the driver was captured reserving on a catalog card, by GPU id (nvidia-smi -q "Reserved"), MiB: it
    replaces the vendor's figure for that card."""
    category_reserved_mib: dict[str, float] = field(default_factory=dict)
    """NVIDIA's reserve on a card without a capture, by `GpuSpec.category` (the median of the captured cards of
    that category), MiB; a category not listed: `nvidia_reserved_mib`."""

    def reserved_mib(self, gpu_id: str, vendor: str, category: str = "") -> float:
        """What the driver keeps from a discrete card before any process runs, MiB: the card's own captured
        figure, else its category's (NVIDIA), else its vendor's."""
        if gpu_id in self.gpu_reserved_mib:
            return float(self.gpu_reserved_mib[gpu_id])
        if vendor == "nvidia":
            return float(self.category_reserved_mib.get(category, self.nvidia_reserved_mib))
        return float(self.vendor_reserved_mib.get(vendor, 0.0))


@record
class AppleRules(Record):
    __pydantic_config__ = _STRICT
    small_fraction: float
    """Metal's working-set limit as a share of unified memory, up to `small_max_gib`."""
    large_fraction: float
    """The same share above `small_max_gib`."""
    small_max_gib: float
    """Where the small share ends, GiB."""


@record
class UnifiedRules(Record):
    __pydantic_config__ = _STRICT
    os_reserve_gib: dict[str, float]
    """Per unified-memory machine id: memory the firmware keeps from the GPU, GiB."""
    os_reserve_gib_linux: dict[str, float] = field(default_factory=dict)
    """The same under Linux, where the GTT limit (not the firmware's carve-out) decides, GiB."""


@record
class HostRules(Record):
    __pydantic_config__ = _STRICT
    os_reserve_gib: float
    """System RAM the OS keeps for itself when weights are offloaded, GiB (a desktop machine)."""
    headless_max_ram_gib: float
    """Machines with at most this much RAM are planned as headless, GiB."""
    headless_reserve_gib: float
    """System RAM a headless OS keeps for itself, GiB."""
    default_ram_bandwidth_gb_s: float
    """RAM bandwidth assumed when nothing better is known, GB/s."""
    default_ram_gib: float
    """RAM assumed when nothing says how much there is, GiB."""


@record
class SelectionRules(Record):
    __pydantic_config__ = _STRICT
    ladder: dict[str, tuple[str, ...]]
    """Per runtime ladder (a runtime's `quant_ladder`): the quantizations tried, best quality first."""
    fallback: dict[str, str]
    """Per ladder: the quantization shown when none fits."""
    steep_kld: float
    """KL divergence above which a quantization's quality loss is flagged as steep."""
    reading_tokens_per_s: float
    """Decode speed below which a chat reads slower than a person reads, tokens/s."""


@record
class RecurrentRules(Record):
    __pydantic_config__ = _STRICT
    bytes_per_element: float
    """Bytes per value of a recurrent layer's state (its convolution and scan states)."""


@record
class CompressedKvRules(Record):
    """How runtimes store DeepSeek V4's compressed-attention cache (rules/memory.toml [compressed_kv])."""
    __pydantic_config__ = _STRICT
    indexer_ratio: int
    """The compress ratio whose layers carry the lightning indexer (compressed sparse attention)."""
    rope_bytes_per_element: dict[str, float]
    """Per KV cache type that packs an entry: bytes per value of its RoPE part (kept in bf16)."""
    entry_scale_bytes: dict[str, int]
    """Per KV cache type that packs an entry: scale bytes per cached K=V entry."""
    indexer_scale_bytes: dict[str, int]
    """Per KV cache type: scale bytes per indexer key."""
    state_bytes_per_element: float
    """Bytes per value of the compressors' per-sequence decode state."""


@record
class RowSplitMemoryRules(Record):
    """How ggml's CUDA split buffer cuts a matrix (llama.cpp -sm row), rules/memory.toml [row_split]."""
    __pydantic_config__ = _STRICT
    mmq_rows: dict[str, int]
    """Rows a device's share is rounded down to (its MMQ tile height): `nvidia` (compute capability
    `volta_cc` and up), `nvidia_pre_volta`, `amd`."""
    volta_cc: float
    """Compute capability from which NVIDIA GPUs take the larger tile."""
    row_padding: int
    """Each device's last row is padded to a multiple of this many values (MATRIX_ROW_PADDING)."""


@record
class TensorSplitMemoryRules(Record):
    """How llama.cpp's meta device (-sm tensor) cuts a matrix, rules/memory.toml [tensor_split]."""
    __pydantic_config__ = _STRICT
    ffn_columns: dict[str, int]
    """Feed-forward columns per block it deals out, by the quant's kernel class (`default` for the rest)."""


@record
class ParametricFormat(Record):
    """A format whose bits per weight the user names (`--quant exl3-4.0`), rules/memory.toml [parametric]."""
    __pydantic_config__ = _STRICT
    min_bpw: float
    """Lowest average bits per weight of the linear layers its converter takes."""
    max_bpw: float
    """Highest."""
    basis: str
    """What the number means and where the bounds come from."""
    head_bits: float | None = None
    """Bits of the output head when the format quantizes it on its own (None: counted at 16 bits)."""


@record
class MemoryRules(Record):
    __pydantic_config__ = _STRICT
    kv_cache: KvCacheRules
    discrete_gpu: DiscreteGpuRules
    apple: AppleRules
    unified: UnifiedRules
    host: HostRules
    selection: SelectionRules
    recurrent: RecurrentRules = RecurrentRules(bytes_per_element=4.0)
    """Hybrid and Mamba models' fixed per-sequence state (rules/memory.toml [recurrent])."""
    compressed_kv: CompressedKvRules
    """DeepSeek V4's compressed-attention cache (rules/memory.toml [compressed_kv])."""
    row_split: RowSplitMemoryRules
    """llama.cpp -sm row: how a split matrix's rows are dealt out (rules/memory.toml [row_split])."""
    tensor_split: TensorSplitMemoryRules = TensorSplitMemoryRules(ffn_columns={"default": 128})
    """llama.cpp -sm tensor: the feed-forward column blocks its meta device deals out ([tensor_split])."""
    parametric: dict[str, ParametricFormat] = field(default_factory=dict)
    """Formats named by their bits per weight (EXL2, EXL3), by format id ([parametric])."""


# --- rules/speed.toml ---------------------------------------------------------------------------

@record
class DecodeRules(Record):
    __pydantic_config__ = _STRICT
    arch_efficiency: dict[str, float]
    """Achievable share of peak memory bandwidth per GPU architecture (`default` for the rest)."""
    kernel_factor: dict[str, float]
    """Multiplier per quant kernel class."""
    per_layer_us: dict[str, float]
    """Fixed cost per layer per token per backend, microseconds."""
    per_token_us: float
    """Fixed cost per token, microseconds."""
    cpu_efficiency: float
    """Achievable share of system-RAM bandwidth in CPU matrix-vector products."""
    backend_efficiency: dict[str, float] = field(default_factory=dict)
    """Achievable share of peak bandwidth per backend family (cuda, metal, rocm, vulkan, sycl): for a GPU whose
    architecture has no fitted entry, or that runs another backend than its vendor's own (Vulkan)."""
    cpu_gflops: float = 0.0
    """CPU-only decode compute ceiling, GFLOP/s of matrix-vector work (0: bandwidth only)."""
    family_moe_compute: dict[str, float] = field(default_factory=dict)
    """A runtime family's factor on its MoE matrix fraction for the products of a mixture-of-experts model's decode
    step (advisor.engine.speed.decode_step; fitted by bench/paged_fit.py), keyed `family:kernel` where the
    experts take a kernel of their own (`moe_kernels` names it), else `family`; missing: 1."""
    moe_kernels: dict[str, dict[str, str]] = field(default_factory=dict)
    """The MoE kernel a quantization's experts (by quant id) run through on a GPU architecture where it is not the
    runtime's default fused-MoE kernel (`{ "mxfp4-bf16" = { ampere = "mxfp4-marlin" } }`); it keys
    `family_moe_compute` and `family_moe_serial` as `family:mxfp4-marlin` where those have the key."""
    family_moe_serial: dict[str, float] = field(default_factory=dict)
    """The share of the shorter of a MoE decode step's weight stream and its products that runs after the longer
    instead of under it (0: they overlap, the roofline's max; 1: they add), keyed as `family_moe_compute`, else the
    family's; missing: 0."""


@record
class PrefillRules(Record):
    __pydantic_config__ = _STRICT
    arch_efficiency: dict[str, float]
    """Achievable share of dense FP16 tensor throughput per GPU architecture."""
    kernel_factor: dict[str, float]
    """Multiplier per quant kernel class."""
    per_layer_us: dict[str, float]
    """Fixed cost per layer per prompt per backend, microseconds."""
    attention_efficiency: float
    """Achievable share of dense FP16 throughput in attention without flash attention."""
    backend_efficiency: dict[str, float] = field(default_factory=dict)
    """As DecodeRules.backend_efficiency, of dense FP16 tensor throughput."""
    flash_attention_efficiency: dict[str, float] = field(default_factory=dict)
    """Achievable share of dense FP16 throughput in fused (flash) attention, per backend (`default`: the
    non-fused attention_efficiency)."""
    moe_efficiency: dict[str, float] = field(default_factory=dict)
    """Multiplier on the matrix throughput of a mixture-of-experts model's prompt processing per backend
    (tokens spread over experts make small matrix products); missing: 1."""
    pipeline_microbatches: int
    """Micro-batches a batch is pipelined in across the GPUs of a layer split."""
    token_tile: dict[str, float] = field(default_factory=dict)
    """Tokens per tile of the backend's prompt matrix-product kernel, per backend (`default` for the rest): each
    tile reads the weights it multiplies once (advisor.engine.speed.tile_reads_bytes); missing: not counted."""
    family_efficiency: dict[str, float] = field(default_factory=dict)
    """A runtime family's factor on the fractions above (fitted on llama.cpp's rows) for its own matrix-product
    kernels (advisor.engine.speed.matmul_efficiency); missing: 1."""
    family_moe_efficiency: dict[str, float] = field(default_factory=dict)
    """A runtime family's factor on its own fraction for a mixture-of-experts model's matrix products (its
    grouped expert kernels, as `moe_efficiency` for llama.cpp's); missing: 1."""
    fused_attention_families: tuple[str, ...] = ()
    """The runtime families whose prompt attention always runs a fused (flash) kernel, whatever --flash-attn says
    (advisor.engine.speed.attention_efficiency)."""
    token_tile_families: tuple[str, ...] = ()
    """The runtime families (rules/runtimes.toml `family`) whose prompt kernels `token_tile` describes."""
    cpu_gflops: float
    """CPU-only prompt processing throughput, GFLOP/s."""


@record
class FixedCosts(Record):
    __pydantic_config__ = _STRICT
    per_token_us: float | None = None
    """A runtime's own fitted fixed cost per token, microseconds."""
    per_layer_us: float | None = None
    """A runtime's own fitted fixed cost per layer per token, microseconds."""


@record
class CpuRules(Record):
    """CPU decode's compute ceiling (rules/speed.toml [cpu_decode]; not fitted by bench/calibrate.py)."""

    __pydantic_config__ = _STRICT
    compute_efficiency: float = 0.0
    """Share of a CPU's peak int8 dot-product rate (hardware_db/cpus.toml) llama.cpp reaches in decode
    (0: no compute ceiling)."""
    prefill_efficiency: float = 0.0
    """Share of that peak llama.cpp reaches in CPU-only prompt processing (0: [prefill] cpu_gflops for every
    CPU)."""


@record
class SpeedRules(Record):
    __pydantic_config__ = _STRICT
    decode: DecodeRules
    prefill: PrefillRules
    by_runtime: dict[str, FixedCosts] = field(default_factory=dict)
    """Runtimes' own fitted fixed costs, by the name a runtime's `speed_terms` gives."""
    cpu_decode: CpuRules = field(default_factory=CpuRules)
    """CPU decode's compute ceiling, for a rig whose CPU is in the catalog."""


# --- rules/interconnect.toml --------------------------------------------------------------------

@record
class PcieRules(Record):
    __pydantic_config__ = _STRICT
    per_lane_gb_s: dict[str, float]
    """Payload bandwidth per lane per direction by PCIe generation, GB/s."""
    efficiency: float
    """Achievable share of the payload rate."""
    copy_latency_us: dict[str, float]
    """One-way latency of a small device-to-device copy (`p2p`, `host_staged`), microseconds."""
    host_staged_factor: float
    """Bandwidth share left when transfers are staged through host memory (no P2P)."""
    chipset_bandwidth_factor: float
    """Bandwidth share left for a GPU behind the chipset or across CPU sockets."""


@record
class AllreduceRules(Record):
    __pydantic_config__ = _STRICT
    latency_us: dict[str, float]
    """Latency of one small all-reduce between two GPUs per link kind, microseconds."""
    ring_step_us: dict[str, float]
    """What each further ring step costs per link kind beyond a pair's two (NCCL: 2(n-1) steps), microseconds."""
    host_staged_factor: float
    """Share of the PCIe rate an all-reduce staged through host memory reaches (fitted, bench/nvlink_tp.py)."""
    nccl_families: list[str]
    """Runtime families (rules/runtimes.toml `family`) whose tensor-parallel all-reduce is NCCL's ring."""


@record
class RowSplitRules(Record):
    """llama.cpp's row split (-sm row): every split weight matrix is one synchronised multiply."""
    __pydantic_config__ = _STRICT
    sync_us: float
    """Fixed cost of one split matrix multiply (events, the main GPU waiting), microseconds."""
    per_gpu_us: dict[str, float]
    """Added per GPU beyond the first, by whether the copies go peer to peer (`peer`) or through host
    memory (`staged`), microseconds."""
    peer_max_batch: int
    """Tokens per micro-batch up to which peer access is on (GGML_CUDA_PEER_MAX_BATCH_SIZE)."""
    col_stride: int
    """Tokens per synchronised slice of a larger batch (MUL_MAT_SRC1_COL_STRIDE)."""
    src1_bytes: dict[str, float]
    """Bytes per input activation sent to each other GPU: `quantized` weights take q8_1 blocks, `float` f32."""
    matrices: dict[str, int]
    """Split weight matrices per layer: `attention` (Q, K, V, output) and `feed_forward` (gate, up, down)."""


@record
class NvlinkRules(Record):
    __pydantic_config__ = _STRICT
    efficiency: float
    """Achievable share of NVLink bandwidth in all-reduce."""


@record
class NetworkRules(Record):
    __pydantic_config__ = _STRICT
    gb_s: dict[str, float]
    """Bandwidth per direction of links between machines, GB/s."""
    latency_us: dict[str, float]
    """One small message's one-way latency across them, microseconds (TCP, or verbs on an RDMA network)."""
    rdma: tuple[str, ...] = ()
    """The networks whose messages go by RDMA (InfiniBand, RoCE, RDMA over Thunderbolt 5)."""
    label: dict[str, str] = field(default_factory=dict)
    """Each network in words."""


@record
class ProtocolRules(Record):
    """How a distributed runtime's machines talk (rules/interconnect.toml [protocol.ID])."""

    __pydantic_config__ = _STRICT
    hop_messages: float
    """One-way messages in series per pipeline-stage boundary that crosses machines, per step."""
    allreduce_messages_per_peer: float
    """One-way messages in series per all-reduce, per further machine (a ring: 2 per peer)."""
    prefill_overlap: bool
    """Prompt micro-batches overlap across machines' pipeline stages."""
    basis: str = ""


@record
class VerdictRules(Record):
    __pydantic_config__ = _STRICT
    long_prompt_tokens: int
    """A prompt at least this long makes prefill the phase that decides the verdict."""
    helps_above: float
    """NVLink speedup from which the verdict is `helps`."""
    needed_above: float
    """NVLink speedup from which the verdict is `needed`."""
    same_speed_within: float = 0.05
    """Two splits whose decode differs by less than this fraction 'decode about as fast' (SPL002)."""
    link_matters_above: float = 1.01
    """A faster link that changes a step by less than this factor 'would change little' (SPL002)."""


@record
class TrainingRules(Record):
    __pydantic_config__ = _STRICT
    mfu: float


@record
class SmTensorScore(Record):
    """How llama.cpp -sm tensor estimates held up on public runs no constant was fitted on
    (rules/interconnect.toml [sm_tensor], printed by bench/sm_tensor.py, checked by tests/test_sm_tensor.py)."""
    __pydantic_config__ = _STRICT
    decode_rows: int
    decode_ratio_median_pct: float
    """Median |predicted / measured - 1| of the -sm tensor / -sm layer decode ratio."""
    decode_ratio_bias_pct: float
    """Median signed error of that ratio (positive: the engine expects more of tensor parallel than was measured)."""


@record
class InterconnectRules(Record):
    __pydantic_config__ = _STRICT
    pcie: PcieRules
    allreduce: AllreduceRules
    row_split: RowSplitRules
    nvlink: NvlinkRules
    network: NetworkRules
    protocol: dict[str, ProtocolRules]
    """Per protocol (rules/runtimes.toml multinode.protocol): messages per hop and per all-reduce."""
    verdict: VerdictRules
    training: TrainingRules
    sm_tensor: SmTensorScore
    """llama.cpp -sm tensor's held-out score, quoted by SPL002."""


# --- rules/plan.toml ----------------------------------------------------------------------------

@record
class PlatformRules(Record):
    __pydantic_config__ = _STRICT
    name: str
    categories: tuple[str, ...]
    """GPU categories (consumer, workstation, datacenter) built on this platform."""
    max_gpus: int
    """Cards the platform takes (slots and lanes)."""
    psu_w: float
    """Power supplies' rating, watts."""
    load_fraction: float
    """Share of the PSU rating the rig may draw."""
    base_w: float
    """The platform's own draw (CPU, board, RAM, drives), watts."""
    usd: float | None = None
    """What the platform adds to a plan's price; None: not known (see `price_basis`) unless owned."""
    owned: bool = False
    """The user is taken to have one already (the desktop): it adds nothing to a plan's price."""
    price_basis: str = ""


@record
class MoeHostRules(Record):
    __pydantic_config__ = _STRICT
    name: str
    usd: float
    date: str
    source: str
    ram_gib: float
    ram_bandwidth_gb_s: float
    base_w: float


@record
class CoolingRules(Record):
    __pydantic_config__ = _STRICT
    passive_categories: tuple[str, ...]
    """GPU categories whose cards have passive heatsinks (no fan): they need a chassis's airflow."""
    passive_words: str
    """What a passive card needs, in words, said in each plan option that has one."""


@record
class PlanRules(Record):
    __pydantic_config__ = _STRICT
    electricity_usd_per_kwh: float
    electricity_basis: str
    nvlink_bridge_usd: float
    nvlink_bridge_basis: str
    default_ram_gib: float
    moe_host: MoeHostRules
    """A CPU platform with many memory channels for MoE experts in RAM, with its dated price."""
    nvlink_bridge_sold_for: tuple[str, ...] = ()
    """GPU ids for which an NVLink bridge is still sold at `nvlink_bridge_usd`."""
    platform: dict[str, PlatformRules] = field(default_factory=dict)
    """Where PCIe cards go: desktop, workstation, server."""
    second_machine_network: str = ""
    """The network a plan joins two machines with (rules/interconnect.toml [network]); empty: no two-machine
    options."""
    builtin_network: dict[str, str] = field(default_factory=dict)
    """Per unified machine id: the network its own port gives two of them (DGX Spark: ConnectX-7)."""
    second_machine_basis: str = ""
    prices_as_of: str = ""
    """`YYYY-MM` of the newest market prices in hardware_db: list prices are judged against it."""
    list_price_months: float = 0.0
    """A launch list price older than this (before `prices_as_of`) is not offered; 0: every list price is."""
    cooling: CoolingRules | None = None
    """Passive data-centre cards: what they need, said in the plan."""


# --- rules/quality.toml -------------------------------------------------------------------------

@record
class FloorRules(Record):
    __pydantic_config__ = _STRICT
    max_kld: float
    """Published KL divergence (Llama 3 8B) above which a quantization is below the quality floor."""
    min_bpw: float
    """For formats without a published KL divergence: bits per weight below which they are below the floor."""
    basis: str
    """Where the floor comes from, in one sentence."""
    native_is_floor: bool = True
    """A model published in a low-bit format (gpt-oss MXFP4) never goes below it."""
    model: dict[str, str] = field(default_factory=dict)
    """Model id -> the lowest quantization chosen for it, where its own measurements say so."""


@record
class TargetRules(Record):
    __pydantic_config__ = _STRICT
    kv_types: tuple[str, ...]
    """KV cache types the automatic choice may use, best quality first."""
    comfort_factor: float
    """The choice steps down for speed while its pick decodes under this many times the speed target."""
    step_quant: str
    """A quantization id: one step down may add at most its published KL divergence (vs 16-bit)."""
    comfort_basis: str
    """Where the comfortable speed comes from, in one sentence."""


@record
class KvKldRules(Record):
    __pydantic_config__ = _STRICT
    f16: float
    q8_0: float
    basis: str


@record
class RankRules(Record):
    __pydantic_config__ = _STRICT
    density_doubling_months: float
    """Months in which the capability per parameter of open LLMs doubles (`fit` ranks by effective size)."""
    reference_month: str
    """`YYYY-MM` at which effective size equals parameters; models without a release month are ranked there."""
    basis: str


@record
class QualityRules(Record):
    __pydantic_config__ = _STRICT
    floor: FloorRules
    targets: TargetRules
    kv_kld: KvKldRules
    rank: RankRules


# --- rules/training.toml ------------------------------------------------------------------------

@record
class TrainDefaults(Record):
    __pydantic_config__ = _STRICT
    optimizer: str
    """The optimizer assumed when --optimizer is not given."""
    lora_rank: int
    """LoRA rank assumed on every linear layer."""


@record
class OptimizerRules(Record):
    __pydantic_config__ = _STRICT
    state_bytes: dict[str, float]
    """Optimizer state per trainable parameter, bytes, by optimizer id."""


@record
class FullRules(Record):
    __pydantic_config__ = _STRICT
    weight_bytes: float
    grad_bytes: float
    master_bytes: float


@record
class AdapterRules(Record):
    __pydantic_config__ = _STRICT
    weight_bytes: float
    grad_bytes: float


@record
class ActivationRules(Record):
    __pydantic_config__ = _STRICT
    ckpt_bytes_per_hidden: float
    layer_bytes_per_hidden: float
    logits_bytes_per_vocab: float


@record
class TrainRuntimeRules(Record):
    __pydantic_config__ = _STRICT
    fragmentation: float
    """Peak reserved over allocated memory of PyTorch's caching allocator."""


@record
class TrainingMemoryRules(Record):
    __pydantic_config__ = _STRICT
    defaults: TrainDefaults
    optimizer: OptimizerRules
    full: FullRules
    adapter: AdapterRules
    activations: ActivationRules
    allocator: TrainRuntimeRules


# --- rules/speed_bands.toml (generated by bench/accuracy.py) -----------------------------------

@record
class SpeedBand(Record):
    """Held-out error of one kind of answer: p50/p90 of |predicted / measured - 1|, percent."""

    __pydantic_config__ = _STRICT
    decode_rows: int
    prefill_rows: int
    decode_p50_pct: float | None = None
    decode_p90_pct: float | None = None
    prefill_p50_pct: float | None = None
    prefill_p90_pct: float | None = None
    sources: str = ""
    """The rows' source URLs, space-separated."""


@record
class SpeedBands(Record):
    __pydantic_config__ = _STRICT
    min_rows: int = 0
    """Rows a kind needs for percentiles; fewer: "not measured"."""
    band: dict[str, SpeedBand] = field(default_factory=dict)
    """By pool: a kind of answer (advisor.engine.speed.answer_kind), a backend family, or all rows."""
    p90_coverage_pct: dict[str, float] = field(default_factory=dict)
    """Share of the 2025-26 held-out rows within the p90 band of their pool, each band built without the row's
    source, percent, per test (`decode`, `prefill`)."""


# --- rules/launch.toml -------------------------------------------------------------------------

@record
class LaunchFlag(Record):
    __pydantic_config__ = _STRICT
    names: tuple[str, ...]
    """How the program spells it (the first is the one the advisor writes)."""
    value: str = "str"
    """`int`, `float`, `str`, `path`, `list`, `switch` (no value), `fa` (on|off|auto, 1|0), `layers` or `words`
    (one or more space-separated values, argparse nargs="+")."""
    why: str = ""
    """For settings the advisor does not use: why (shown with the answer)."""
    values: dict[str, str] = field(default_factory=dict)
    """The program's spelling of a value -> the advisor's (`fp8_e4m3` -> `fp8`); written back as the
    first spelling that maps to the advisor's value (none: the setting is not written)."""
    multiple_of: int = 0
    """Written rounded up to a multiple of this (TabbyAPI's cache_size is whole 256-token pages); 0: as is."""


@record
class Launcher(Record):
    __pydantic_config__ = _STRICT
    program: str
    """The executable people type (`llama-server`) or `ollama`."""
    runtime: str
    """The rules/runtimes.toml id it runs."""
    style: str = "argv"
    """`argv` (program and flags) or `modelfile` (an Ollama Modelfile plus environment variables)."""
    subcommand: str = ""
    """The word after the program (`serve`), if it takes one."""
    positional: str = ""
    """The setting a bare word (not a flag's value) gives, e.g. the model of `PROGRAM serve MODEL`."""
    defaults: dict[str, str] = field(default_factory=dict)
    """Settings a command line that leaves the flag out means (the program's default, as the advisor's value)."""
    like: str = ""
    """Another launcher whose flags this one takes, replacing or adding its own."""
    emit: tuple[str, ...] = ()
    """The settings written, in this order (empty: the `like` launcher's)."""
    flags: dict[str, LaunchFlag] = field(default_factory=dict)
    """Setting name -> how it is spelt."""
    quantize_at_load: tuple[str, ...] = ()
    """Quant ids the program makes from the 16-bit checkpoint as it loads it (vLLM `--quantization fp8`);
    any other quantization is read from a quantized checkpoint (rules/checkpoints.toml)."""
    notes: str = ""


@record
class LaunchRules(Record):
    __pydantic_config__ = _STRICT
    launcher: dict[str, Launcher] = field(default_factory=dict)
    """Each launcher by id."""


# --- rules/vision.toml -------------------------------------------------------------------------

@record
class ClipRules(Record):
    __pydantic_config__ = _STRICT
    activation_bytes: float
    """Bytes per activation of llama.cpp's clip graph (f32)."""
    ffn_embd_multiple: float
    """The feed-forward phase holds n_ff + this many n_embd values per patch."""
    scores_embd_multiple: float
    """Without flash attention: besides every head's f32 scores, this many n_embd values per patch."""
    warmup_merged_tokens: dict[str, int] = field(default_factory=dict)
    """Per projector type: merged tokens of the warm-up image (set_warmup_n_tokens); others warm up with
    their image_size."""


@record
class EncoderProfileRules(Record):
    __pydantic_config__ = _STRICT
    activation_bytes: float
    """Bytes per activation of a 16-bit encoder run."""
    live_embd_multiple: float
    """Live activations per patch, in encoder widths (input, residual, norm, q, k, v)."""
    live_ff_multiple: float
    """Live activations per patch, in MLP widths (the hidden layer and its activation)."""
    pixel_values_per_patch_px: float
    """Input values per patch pixel (3 channels x 2 frames for the Qwen-VL temporal patch)."""
    pixel_bytes: float
    """Bytes per input pixel value."""
    max_image_pixels: dict[str, int] = field(default_factory=dict)
    """Per model_type: the largest image its processor accepts, pixels (dynamic-resolution encoders)."""


@record
class VisionRuntimeRules(Record):
    __pydantic_config__ = _STRICT
    loads: tuple[str, ...]
    """Tower sources this runtime loads: `mmproj` (a file given on its command line), `checkpoint`, `config`."""
    placement: str
    """`main_gpu` (the first GPU, or system RAM when offload is off) or `tensor_parallel_first_stage`."""
    compute: str
    """`clip_graph` (llama.cpp's reserved graph for its warm-up image) or `encoder_profile` (vLLM)."""
    default_limit: int = 1
    """Items per modality per prompt when the command line does not say."""
    source: str = ""


@record
class VisionRules(Record):
    __pydantic_config__ = _STRICT
    tensor_prefixes: tuple[str, ...]
    """Names of a checkpoint's vision-tower and projector tensors start with one of these."""
    checkpoint_bytes_per_param: float
    """Bytes per parameter of a tower known only by its count (checkpoints keep it 16-bit)."""
    clip: ClipRules
    encoder_profile: EncoderProfileRules
    by_runtime: dict[str, VisionRuntimeRules] = field(default_factory=dict)
    """Per runtime id: how it loads a tower (absent: it does not, as far as the rulebook knows)."""


@record
class QuantizedRepo(Record):
    __pydantic_config__ = _STRICT
    model: str
    """The catalog model (hardware_db/models.toml id) the checkpoint holds."""
    quant: str
    """Its quantization (rules/quants.toml id)."""
    source: str
    """Where it is published."""
    offered: bool = True
    """An answer in this model and quant names it (one offered repo per model and quant); false: recorded only so
    a command line that names it is read in its real format (a repo whose name says another)."""


@record
class CheckpointRules(Record):
    __pydantic_config__ = _STRICT
    repo: dict[str, QuantizedRepo] = field(default_factory=dict)
    """Quantized checkpoints by Hugging Face repo id (rules/checkpoints.toml)."""


@record
class RequestMix(Record):
    """Traffic as a published trace's requests (rules/traffic.toml): classes of equal weight, each a prompt and
    an output length."""

    __pydantic_config__ = _STRICT
    name: str
    source: str
    """The trace, where it is kept and at which commit."""
    requests: int
    """Requests in the trace."""
    prompt_tokens: tuple[int, ...]
    """Each class's prompt length."""
    output_tokens: tuple[int, ...]
    """Each class's output length (the same order)."""
    mean_prompt_tokens: float
    mean_output_tokens: float
    """The whole trace's means (the classes' means reproduce them)."""
    median_prompt_tokens: int
    median_output_tokens: int
    """The whole trace's medians."""


@record
class TrafficRules(Record):
    __pydantic_config__ = _STRICT
    mix: dict[str, RequestMix] = field(default_factory=dict)
    """Request-length mixes by name (`--request-mix`)."""


@record
class Rulebook(Record):
    """Every table of the rulebook, by file."""

    __pydantic_config__ = _STRICT
    memory: MemoryRules
    speed: SpeedRules
    interconnect: InterconnectRules
    plan: PlanRules
    quality: QualityRules
    training: TrainingMemoryRules
    vision: VisionRules
    speed_bands: SpeedBands = field(default_factory=SpeedBands)
    launch: LaunchRules = field(default_factory=LaunchRules)
    checkpoints: CheckpointRules = field(default_factory=CheckpointRules)
    traffic: TrafficRules = field(default_factory=TrafficRules)


def build_rulebook(data: dict[str, Any]) -> Rulebook:
    """Trusted construction from parsed TOML (the built-in files are validated by the test-suite)."""
    return _build(Rulebook, data)


def with_speed(rulebook: Rulebook, speed: dict[str, Any]) -> Rulebook:
    """The rulebook with its speed tables built anew from `speed` (rules/speed.toml as a plain dict): what a
    fitting script varies, without rebuilding the rest of the rulebook for every trial."""
    return replace(rulebook, speed=_build(SpeedRules, speed))


def _build(cls: type, data: dict[str, Any]) -> Any:
    kwargs = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value, kind = data[f.name], str(f.type).removesuffix(" | None")  # an optional table is built alike
        nested = globals().get(kind)
        if isinstance(nested, type) and issubclass(nested, Record):
            value = _build(nested, value)
        elif kind.startswith("dict[str, ") and isinstance(globals().get(kind[10:-1]), type):
            value = {k: _build(globals()[kind[10:-1]], v) for k, v in value.items()}
        elif kind.startswith("dict[str, tuple"):
            value = {k: tuple(v) for k, v in value.items()}
        elif kind.startswith("tuple[") and isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def rulebook_to_dict(rulebook: Rulebook) -> dict[str, Any]:
    """The rulebook as the plain nested dict its TOML files parse to (for fitting scripts that vary it)."""
    def plain(value: Any) -> Any:
        if isinstance(value, Record):
            return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, tuple):
            return list(value)
        return value

    return plain(rulebook)
