"""What a placement says: what each device holds, and whether it fits and runs."""

from __future__ import annotations

from advisor.engine import memory as mem
from advisor.record import Record, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from advisor.catalog.types import RuntimeSpec


@record
class DeviceUse(Record):
    """What one device holds."""

    device: str
    """`gpu0`, `gpu1`, ... or `cpu`."""
    name: str
    weights_bytes: int
    kv_cache_bytes: int
    overhead_bytes: int
    capacity_bytes: int
    """What the advisor lets this device hold (usable memory after the runtime's/OS's limits)."""
    layers: int = 0
    """Repeating layers whose weights sit here."""
    holds_output: bool = False
    expert_bytes: int = 0
    """Routed-expert weights here (part of `weights_bytes`): a token reads only the experts it chooses."""
    split_bytes: int = 0
    """This GPU's rows of the matrices a row split divides over all GPUs (part of `weights_bytes`): every
    GPU multiplies its rows at the same time; the rest of a layer runs on the layer's own GPU."""
    embed_bytes: int = 0
    """The input token embedding's share here (part of `weights_bytes`): a token looks up one row of it and
    multiplies none (a tied embedding that is also the output head counts as `head_bytes`)."""
    head_bytes: int = 0
    """The output head's share here (part of `weights_bytes`): multiplied only for the rows a step samples
    (each decoding sequence), not for the prompt tokens a paged server's step carries."""

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.overhead_bytes

    @property
    def free_bytes(self) -> int:
        return self.capacity_bytes - self.total_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes


@record
class Placement(Record):
    strategy: str
    """`single_gpu`, `layer_split`, `tensor_parallel`, `cpu_offload`, `moe_offload`, `cpu_only` or `none`."""
    devices: tuple[DeviceUse, ...]
    """GPUs, in order."""
    host: DeviceUse
    """System RAM: the embedding (llama.cpp), offloaded layers or experts and their KV cache."""
    fits: bool
    """Everything that should be on GPUs is, within each GPU's capacity."""
    runs: bool
    """It runs at all (possibly with offload)."""
    gpu_layers: int
    """Repeating layers on GPUs."""
    cpu_expert_layers: int = 0
    """MoE layers whose routed experts sit in system RAM."""
    cpu_expert_set: tuple[int, ...] = ()
    """Which layers those are (what `-ot` names)."""
    problem: str = ""
    """Why it does not run or fit, in words."""
    layout: mem.WeightsLayout | None = None
    """The weights this placement cut up (from the catalog's bits per weight, or a real file's tensors)."""
    split_kind: str = ""
    """How a tensor-parallel placement cut the layers (RuntimeSpec.tensor_split: `heads`, `rows`, `channels` or
    `meta`); empty for the other strategies."""
    tp_size: int = 1
    """GPUs each pipeline stage is split across by tensor parallel in a staged placement (vLLM's TP x PP); 1 else."""

    @property
    def offloaded_bytes(self) -> int:
        return self.host.weights_bytes


def fit_margin_bytes(runtime: RuntimeSpec) -> int:
    """What the runtime keeps free on each GPU when it fits a model itself (RuntimeSpec.fit_margin_mib)."""
    return int(runtime.fit_margin_mib * 2**20)


def plain_fit(placement: Placement, runtime: RuntimeSpec) -> bool:
    """It fits and no GPU is left with less free than the runtime's fit margin: what `check` calls "fits", not
    "fits, tight" (FIT005). `max_context`, `fit` and `plan` offer only this."""
    return placement.fits and tight_device(placement, fit_margin_bytes(runtime)) is None


def tight_device(placement: Placement, margin_bytes: int) -> DeviceUse | None:
    """The GPU a placement that fits leaves with less than `margin_bytes` free (the one with the least left), or
    None: it does not fit, it is not tight, or there is no margin (0)."""
    if not margin_bytes or not placement.fits or not placement.devices:
        return None
    least = min(placement.devices, key=lambda d: d.free_bytes)
    return least if least.free_bytes < margin_bytes else None
