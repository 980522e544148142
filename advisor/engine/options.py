"""What the user asked for, besides the model and the rig."""

from __future__ import annotations

from advisor.record import Record, record
from advisor.engine.vision import VisionTower

KV_TYPES = ("f16", "q8_0", "q4_0", "fp8")
SPLITS = ("layer", "tensor", "row")
WORKLOADS = ("inference", "lora", "qlora", "full-finetune")
SHARDINGS = ("auto", "ddp", "zero1", "zero2", "zero3", "fsdp", "fsdp-offload")
"""--sharding: auto picks the least that fits; fsdp is ZeRO-3 (weights, gradients and state sharded);
fsdp-offload keeps the shards in system RAM and brings one layer at a time to the GPU (FSDP
CPUOffload, ZeRO-Infinity's offload: Answer.AI's recipe for 70B on 2x 24 GB)."""
FLASH_ATTN = ("auto", "on", "off")
DEFAULT_CTX = 8192
DEFAULT_PROMPT_TOKENS = 512


@record
class Options(Record):
    """The model options of the contract (`--quant`, `--ctx`, ...), with their defaults."""

    quant: str | None = None
    """Quantization id; None: the best quality that fits."""
    ctx: int | None = None
    """Context tokens to allocate KV cache for; None: 8192 capped at the model's maximum."""
    prompt_tokens: int = DEFAULT_PROMPT_TOKENS
    """Prompt length for the prefill estimate."""
    output_tokens: int | None = None
    """Tokens each request generates (`vllm bench serve --random-output-len`); None: the rest of the context.
    With the prompt it is a request's real length, what it holds of a paged pool at its end."""
    request_mix: str | None = None
    """A named mix of request lengths (rules/traffic.toml `[mix.NAME]`: classes of a published trace's requests) in
    place of one prompt and output length; None: `prompt_tokens` and `output_tokens`."""
    kv_type: str = "f16"
    """KV cache type."""
    runtime: str = "llama.cpp"
    """Inference runtime id (the contract's default; what each runtime does is in rules/runtimes.toml)."""
    split: str | None = None
    """`layer`, `tensor` or `row` (llama.cpp -sm row, where the runtime has it); None: the runtime's default."""
    concurrency: int = 1
    """Sequences decoded at once."""
    workload: str = "inference"
    """`inference`, `lora`, `qlora` or `full-finetune`."""
    flash_attn: str = "auto"
    """`auto` (llama.cpp's default since August 2025: on where the backend supports it, declared per
    runtime in rules/runtimes.toml), `on` or `off`. A quantized V cache needs it on in llama.cpp."""
    ubatch: int | None = None
    """Micro-batch tokens (llama.cpp `-ub`); None: the runtime's default. It sizes the compute buffers."""
    kv_unified: bool | None = None
    """The `concurrency` sequences share one KV cache (llama.cpp `--kv-unified`); None: the runtime's
    default. Either way the cache holds concurrency x ctx cells; a unified one lets each sequence's
    attention span all of them."""
    n_gpu_layers: int | None = None
    """Repeating layers (plus the output layer as one more) on the GPUs, llama.cpp `-ngl`; None: as many
    as fit."""
    tensor_split: tuple[float, ...] | None = None
    """How layers are shared between the GPUs, llama.cpp `-ts 3,1`; None: by each GPU's memory."""
    cpu_expert_layers: tuple[int, ...] | None = None
    """Layers whose routed experts stay in system RAM (llama.cpp `-ot ...exps=CPU`, `--n-cpu-moe N`,
    `--cpu-moe`); None: the advisor fills every GPU first, as llama.cpp's `--fit` does."""
    gpu_expert_layers: tuple[tuple[int, int], ...] = ()
    """(layer, GPU index) pairs: routed experts a llama.cpp `-ot ...exps=CUDA1` sends to a named GPU,
    wherever the rest of their layer sits."""
    swa_full: bool = False
    """Sliding-window layers keep the whole context (llama.cpp `--swa-full`)."""
    command_notes: tuple[str, ...] = ()
    """What `--cmd` could not use: unknown flags (named) and flags the advisor does not model."""
    quant_basis: str = ""
    """Where `--cmd`'s quantization came from (a checkpoint record, the file's or repo's name, a flag); empty:
    given with --quant, or chosen."""
    batch_size: int = 1
    """Training: sequences per GPU per step."""
    seq_len: int = 2048
    """Training: tokens per sequence."""
    gradient_checkpointing: bool = True
    """Training: recompute activations in the backward pass instead of storing them."""
    optimizer: str | None = None
    """Training: optimizer id of rules/training.toml [optimizer]; None: the rulebook's default (adamw)."""
    sharding: str = "auto"
    """Training across GPUs: `auto` (the least that fits), `ddp`, `zero1`, `zero2`, `zero3`/`fsdp`."""
    lora_rank: int | None = None
    """Training: LoRA rank; None: the rulebook's default."""
    min_tps: float | None = None
    """Decode speed the automatic choice must reach first; None: reading speed (rules/memory.toml)."""
    min_quality: str | None = None
    """Lowest quantization the automatic choice may pick (lowers the quality floor of rules/quality.toml)."""
    allow_low_bit: bool = False
    """No quality floor: any quantization that reaches the targets may be chosen."""
    kv_fixed: bool = False
    """The KV cache type was given (--kv-cache): the automatic choice keeps it instead of trying q8_0."""
    memory_fraction: float | None = None
    """Paged runtimes: the fraction of each GPU they reserve (vLLM --gpu-memory-utilization, SGLang
    --mem-fraction-static); None: the runtime's default."""
    max_num_seqs: int | None = None
    """Paged runtimes: most requests decoded at once (vLLM --max-num-seqs); None: the runtime's default."""
    runtime_version: str | None = None
    """The runtime's release (`0.8.1`): its start-up defaults where rules/runtimes.toml `[[runtime.releases]]`
    says they differ from today's; None: today's."""
    max_num_batched_tokens: int | None = None
    """Paged runtimes: tokens per scheduler step, the profile batch (vLLM --max-num-batched-tokens);
    None: the runtime's default for the GPU."""
    enforce_eager: bool = False
    """Paged runtimes: no CUDA graphs (vLLM --enforce-eager): their memory goes to the KV pool, decode is slower."""
    no_async_scheduling: bool = False
    """vLLM --no-async-scheduling: one scheduler step in flight instead of the runtime's `in_flight_batches`, so a
    sliding-window group keeps one step's tokens beside its window."""
    cpu_offload_gb: float = 0.0
    """vLLM --cpu-offload-gb: GiB of weights per GPU kept in system RAM and streamed over PCIe each step."""
    tensor_parallel: int | None = None
    """GPUs each layer is split across (vLLM --tensor-parallel-size); None: the runtime's default."""
    pipeline_parallel: int | None = None
    """Stages the layers are cut into (vLLM --pipeline-parallel-size); None: 1 unless --split layer."""
    mmproj: str | None = None
    """The vision tower file a llama.cpp command loads (`--mmproj FILE`), as given."""
    vision_tower: VisionTower | None = None
    """The vision tower in play: the `mmproj` file as read at the edge, or the model's own (set by the
    engine from the model file or the catalog)."""
    mmproj_offload: bool = True
    """llama.cpp puts the mmproj on the first GPU; False: on the CPU (`--no-mmproj-offload`)."""
    mm_limit: int | None = None
    """Images per prompt the server accepts (vLLM `--limit-mm-per-prompt`); 0: text only (`--no-mmproj`,
    `--language-model-only`), no tower loaded; None: the runtime's default."""
