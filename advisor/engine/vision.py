"""Vision towers: what reading images adds to an answer's memory, per runtime.

A `VisionTower` is a model's image encoder and projector as it was read: from an mmproj GGUF (llama.cpp's
separate file: exact bytes and the `clip.*` keys), from a checkpoint's own tensors (`visual.*`,
`vision_tower.*`, `multi_modal_projector.*`: exact bytes), or counted from `vision_config` (parameters
exact from the dims, bytes at the checkpoint's 16 bits). What a runtime does with it is data
(rules/vision.toml `[by_runtime.<vision_terms>]`): where the weights go, and which compute peak it reserves for the
largest image. The engine asks those rules, never the runtime's name. Pure: no I/O.

llama.cpp (`--mmproj FILE`): tools/mtmd/clip.cpp loads the whole file into one backend buffer on the first
GPU backend (`clip_ctx: CLIP using CUDA0 backend`; the CPU with `--no-mmproj-offload`) and reserves its
graph for a warm-up image (`warmup with image size = W x H`: the model's image_size, or 46x46 merged
tokens for the Qwen-VL mergers); the buffer is the feed-forward phase of every patch in f32,
(n_ff + 3 n_embd) x patches x 4 bytes, and without flash attention the f32 scores of every head plus
6 n_embd per patch, (heads x patches + 6 n_embd) x patches x 4. Gemma 3's 896-pixel image (4,096 patches,
n_embd 1152, n_ff 4304) gives 121.25 MiB and 1132.0 MiB, llama.cpp's own figures; Qwen3-VL's 1472-pixel
warm-up (8,464 patches) 250.6 MiB against 248.10 logged and 4,596 MiB against 4,657.81
(tests/data/vision_logs.csv, tests/data/clip_oracle.json).

vLLM: the encoder is part of the checkpoint and loads with it unless every modality's
`--limit-mm-per-prompt` is 0; its linear layers are split over the tensor-parallel ranks like the language
model's (`mm_encoder_tp_mode` "weights", the default) and it sits on the first pipeline stage. Profiling
runs it on as many of the largest items as the encoder budget holds (max(max_num_batched_tokens, tokens of
one item) / tokens of one item, at most limit x max_num_seqs: vllm/v1/core/encoder_cache_manager.py
compute_encoder_budget, vllm/v1/worker/gpu_model_runner.py profile_run) and keeps their outputs while the
text profile runs: the larger peak lowers the KV pool.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from advisor.catalog.types import VisionDims
    from advisor.engine.scenario import Scenario

from advisor.record import Record, record

MIB = 1024**2


@record
class VisionTower(Record):
    """A model's image encoder and projector."""

    params: int
    """Parameters of the encoder and projector."""
    weight_bytes: int
    """Bytes as the source stores them (an mmproj file's or a checkpoint's tensors), or params at 16 bits."""
    source: str
    """`mmproj` (a GGUF given with --mmproj), `checkpoint` (the model's own tensors) or `config` (counted
    from vision_config)."""
    kind: str
    """The projector type (`clip.projector_type`) or the vision config's model_type ("": not known)."""
    exact: bool = True
    """The bytes are the file's (False: counted from the config's dims)."""
    path: str = ""
    """The mmproj file, as the user named it (written back into the launch command)."""
    fetched: str = ""
    """An mmproj the runtime fetches with the model itself (`ORG/NAME/FILE` beside an `-hf` GGUF, as
    `llama-server -hf` picks it): named in the answer, not written into the command."""
    of: str = ""
    """The model whose tower this is, when the catalog knows it only by its parameter count (no kind)."""
    hidden_size: int = 0
    """Encoder width (n_embd)."""
    ff_size: int = 0
    """Encoder MLP width (n_ff)."""
    layers: int = 0
    heads: int = 0
    patch_size: int = 0
    image_size: int = 0
    """The encoder's native image side, pixels (fixed-size encoders)."""
    merge: int = 1
    """Patches merged per side into one token (Qwen-VL's spatial merge, Pixtral's, Gemma 3's pooling)."""
    warmup_patches: int = 0
    """Patches of the image llama.cpp reserves its graph for (0: not known)."""
    item_patches: int = 0
    """Patches of the largest image the checkpoint's processor accepts (vLLM's profile item; 0: not known)."""
    out_hidden: int = 0
    """Width of one output token (the language model's hidden size)."""
    assumptions: tuple[str, ...] = ()
    """What the reader assumed (shown as findings)."""

    @property
    def item_tokens(self) -> int:
        """Tokens one largest image gives the language model."""
        return self.item_patches // max(self.merge * self.merge, 1)


@record
class VisionUse(Record):
    """What the tower costs in this answer."""

    tower: VisionTower
    weights_bytes: int
    """Encoder weights on each device that holds them (per rank for a tensor-parallel split)."""
    compute_bytes: int
    """The runtime's reserved peak for the largest image, on the same devices."""
    devices: tuple[int, ...]
    """GPU indexes holding them; empty: system RAM."""
    basis: str
    """How these were derived, in one sentence."""
    images: int = 0
    """Images the runtime profiles at once (vLLM)."""
    kept_bytes: int = 0
    """Encoder outputs the runtime keeps while it profiles the language model (vLLM's encoder cache)."""
    flash_compute_bytes: int = 0
    """The compute peak flash attention would give, when it is off here (llama.cpp's clip); 0 otherwise."""
    sequential: bool = False
    """The compute peak comes before the language model's (vLLM's profile): the two do not add; only the
    part above the language model's own peak, or the kept outputs, lower what is left."""

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.compute_bytes

    def extra_bytes(self, gpu: int | None, text_activation_bytes: int) -> int:
        """What this adds to device `gpu` (None: system RAM) beside the language model's own activation
        peak `text_activation_bytes` there."""
        here = (gpu in self.devices) if gpu is not None else not self.devices
        if not here:
            return 0
        if self.sequential:
            return self.weights_bytes + max(self.compute_bytes - text_activation_bytes, self.kept_bytes)
        return self.weights_bytes + self.compute_bytes


def clip_compute_bytes(tower: VisionTower, flash_attention: bool, rules) -> int:
    """llama.cpp's clip compute buffer for its warm-up image (see the module docstring)."""
    r = rules.vision.clip
    p = tower.warmup_patches
    if not p or not tower.hidden_size:
        return 0
    ffn = (tower.ff_size + r.ffn_embd_multiple * tower.hidden_size) * p * r.activation_bytes
    if flash_attention:
        return int(ffn)
    scores = (tower.heads * p + r.scores_embd_multiple * tower.hidden_size) * p * r.activation_bytes
    return int(max(ffn, scores))


def encoder_profile_bytes(tower: VisionTower, images: int, rules) -> tuple[int, int]:
    """(peak of the encoder's own run, its outputs kept for the text run) for `images` of the largest
    size, in the runtime's 16-bit activations. The encoder's live activations per patch are taken as
    `live_embd_multiple` x n_embd + `live_ff_multiple` x n_ff (rules/vision.toml: input, residual, q/k/v and
    the MLP's hidden layer, attention by a flash kernel that keeps no score matrix) plus the patch pixels;
    an estimate from the layer structure, not fitted on measured profiles."""
    r = rules.vision.encoder_profile
    patches = tower.item_patches * images
    act = patches * (r.live_embd_multiple * tower.hidden_size + r.live_ff_multiple * tower.ff_size) * r.activation_bytes
    pixels = patches * r.pixel_values_per_patch_px * tower.patch_size * tower.patch_size * r.pixel_bytes
    outputs = tower.item_tokens * images * tower.out_hidden * r.activation_bytes
    return int(act + pixels + outputs), int(outputs)


def vision_use(sc: Scenario, flash_attention: bool, tp: int, batch: tuple[int, int]) -> VisionUse | None:
    """What the scenario's vision tower (its options' `vision_tower`) costs on its runtime (whose
    `vision_terms` name the rules/vision.toml entry), or None when it loads none (no rules for it, a tower the
    runtime takes from elsewhere, or text only). `tp`: the tensor-parallel size the encoder is split over;
    `batch`: (tokens per profile batch, requests per step)."""
    tower, rules, options = sc.options.vision_tower, sc.rules, sc.options
    terms = sc.runtime.vision_terms
    rt = rules.vision.by_runtime.get(terms) if terms else None
    if tower is None or rt is None or tower.source not in rt.loads or options.mm_limit == 0:
        return None
    n_gpus = len(sc.rig.gpus)
    if rt.compute == "clip_graph":
        devices: tuple[int, ...] = (0,) if n_gpus and options.mmproj_offload else ()
        return _clip_use(tower, rules, flash_attention, devices)
    if rt.compute == "encoder_profile":
        return _encoder_use(sc, rt, max(tp, 1) if rt.placement == "tensor_parallel_first_stage" else 1, batch)
    return None


def _clip_use(tower: VisionTower, rules, flash_attention: bool, devices: tuple[int, ...]) -> VisionUse:
    """llama.cpp's mmproj: its weights on the first GPU (or in RAM) and clip's warm-up compute buffer."""
    compute = clip_compute_bytes(tower, flash_attention, rules)
    where = "the first GPU" if devices else "system RAM (--no-mmproj-offload)"
    named = f" ({tower.fetched}, fetched with the model)" if tower.fetched else ""
    basis = (f"the mmproj's {tower.weight_bytes / MIB:.0f} MiB{named} on {where}, plus its compute buffer for a "
             f"{tower.warmup_patches}-patch warm-up image ({'flash attention' if flash_attention else 'no flash attention: f32 scores of every head'})")
    return VisionUse(tower, tower.weight_bytes, compute, devices, basis,
                     flash_compute_bytes=0 if flash_attention else clip_compute_bytes(tower, True, rules))


def _encoder_use(sc: Scenario, rt, shards: int, batch: tuple[int, int]) -> VisionUse:
    """A checkpoint's encoder (vLLM): split over `shards` ranks, and the profile run of the largest images."""
    tower, n_gpus, limit = sc.options.vision_tower, len(sc.rig.gpus), sc.options.mm_limit
    max_num_batched_tokens, max_num_seqs = batch
    devices = tuple(range(min(shards, max(n_gpus, 1)))) if n_gpus else ()
    weights = f"the encoder's {tower.weight_bytes / MIB:.0f} MiB split over {shards} rank{'s' if shards > 1 else ''}"
    if not tower.item_tokens:  # a tower known by its parameter count only: no image size to profile
        return VisionUse(tower, tower.weight_bytes // shards, 0, devices,
                         weights + "; its profile run is not counted (the largest image it takes is not known)",
                         sequential=True)
    per_item = tower.item_tokens
    budget = max(max_num_batched_tokens, per_item)
    images = max(1, min(budget // per_item, (limit if limit is not None else rt.default_limit) * max(max_num_seqs, 1)))
    peak, outputs = encoder_profile_bytes(tower, images, sc.rules)
    basis = f"{weights}, and the profile run of {images} image{'s' if images > 1 else ''} of {tower.item_tokens} tokens"
    return VisionUse(tower, tower.weight_bytes // shards, peak // shards, devices, basis, images=images,
                     kept_bytes=outputs // shards, sequential=True)


def image_patches(kind: str, patch: int, merge: int, image: int, rules, warmup_key: str = "") -> tuple[int, int]:
    """(patches of llama.cpp's warm-up image, patches of vLLM's profile item) for a tower of `kind`: the warm-up
    its projector keeps (rules/vision.toml warmup_merged_tokens, looked up by `warmup_key` or the kind) else its
    native image, and the largest image its processor accepts (max_image_pixels) else its native image."""
    merge = max(merge, 1)
    native = (image // patch) ** 2 if image and patch else 0
    warm_tokens = rules.vision.clip.warmup_merged_tokens.get(warmup_key or kind)
    max_px = rules.vision.encoder_profile.max_image_pixels.get(kind, 0)
    largest = max_px // (patch * patch) if max_px and patch else 0
    return (warm_tokens * merge * merge if warm_tokens else native), (largest or native)


def catalog_tower(params: int, model_name: str, rules, dims: VisionDims | None = None) -> VisionTower:
    """A tower the catalog records: weights at the checkpoint's 16 bits; with its vision_config's dims
    (`ModelSpec.vision`) the largest image its processor takes is known and vLLM's profile of it is counted,
    without them no compute peak is; named by its model (`of`)."""
    nbytes = int(params * rules.vision.checkpoint_bytes_per_param)
    if dims is None:
        return VisionTower(params=params, weight_bytes=nbytes, source="config", kind="", of=model_name, exact=False,
                           assumptions=("the vision tower is known only by its parameter count (the catalog): its "
                                        "weights are counted at 16 bits, the encoder's profile peak is not",))
    warm, item = image_patches(dims.kind, dims.patch_size, dims.merge, dims.image_size, rules)
    return VisionTower(params=params, weight_bytes=nbytes, source="config", kind=dims.kind, of=model_name,
                       exact=False, hidden_size=dims.hidden_size, ff_size=dims.ff_size, layers=dims.layers,
                       heads=dims.heads, patch_size=dims.patch_size, image_size=dims.image_size, merge=dims.merge,
                       warmup_patches=warm, item_patches=item, out_hidden=dims.out_hidden,
                       assumptions=("the vision tower is the catalog's record of its checkpoint's vision_config: "
                                    "its weights are counted at 16 bits",))


def tower_for(options, loaded, model, rules) -> VisionTower | None:
    """The tower an answer considers: a --mmproj file's, else the model file's, else the catalog's count."""
    if options.vision_tower is not None:
        return options.vision_tower
    if loaded is not None and loaded.vision is not None:
        return loaded.vision
    if model.vision_params:
        return catalog_tower(model.vision_params, model.name, rules, model.vision)
    return None


def parse_mm_limit(text: str, what: str) -> int:
    """Images per prompt from vLLM's --limit-mm-per-prompt: JSON (`{"image": 2, "video": 0}`) or the older
    `image=2,video=0`; every modality 0 is text only (0). The largest image count counts."""
    import json

    from advisor.errors import AdvisorError

    text = text.strip()
    try:
        data = json.loads(text) if text.startswith("{") else \
            {k.strip(): int(v) for k, _, v in (p.partition("=") for p in text.split(",") if p.strip())}
    except (ValueError, TypeError):
        raise AdvisorError(f"{what} {text[:80]!r} is not a limit per modality", "e.g. '{\"image\":2}' or image=2") from None
    if not isinstance(data, dict) or not data:
        raise AdvisorError(f"{what} {text[:80]!r} is not a limit per modality", "e.g. '{\"image\":2}'")
    counts = []
    for key, value in data.items():
        if isinstance(value, dict):  # newer vLLM: {"image": {"count": 2, "width": ..., "height": ...}}
            value = value.get("count")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000_000:
            raise AdvisorError(f"{what}: {str(key)[:40]} = {str(value)[:40]} is not a count", "use a whole number, e.g. 2")
        counts.append(value)
    return max(counts)
