"""The placement strategies (advisor.engine.placement) and the words each is said in, in one table.

Every front end and every part of the engine that names a strategy reads its column here: the error band's
kind (rules/speed_bands.toml keys), where the choices table says it runs, the app's run mode, the answer's
placement row and what the speed basis says decode reads.
"""

from __future__ import annotations

from advisor.record import Record, record


@record
class StrategyWords(Record):
    kind: str
    """Its part of an error band's kind (rules/speed_bands.toml)."""
    where: str
    """Where it runs, in the choices table and JSON `choices[].where`."""
    run_mode: str
    """The app's `fit` run-mode column (at most 14 characters)."""
    words: str
    """The answer's placement row."""
    reads: str
    """What decode reads per token from, for the speed basis."""


STRATEGIES: dict[str, StrategyWords] = {
    "single_gpu": StrategyWords("one GPU", "GPU", "GPU", "one GPU", "one GPU"),
    "layer_split": StrategyWords("layer split", "GPUs", "GPUs", "layer split across GPUs",
                                 "GPUs in turn (layer split)"),
    "tensor_parallel": StrategyWords("tensor parallel", "GPUs", "GPUs", "tensor parallel",
                                     "GPUs in parallel (tensor parallel)"),
    "cpu_offload": StrategyWords("GPU + system RAM", "GPU + RAM", "layers in RAM", "partly offloaded to system RAM",
                                 "GPUs plus system RAM"),
    "moe_offload": StrategyWords("MoE experts in RAM", "GPU, experts in RAM", "experts in RAM",
                                 "MoE experts offloaded to system RAM", "GPUs plus experts in system RAM"),
    "cpu_only": StrategyWords("CPU only", "RAM", "CPU", "CPU only", "system RAM"),
    "none": StrategyWords("none", "—", "does not run", "does not run", "nothing"),
}


def words_of(strategy: str) -> StrategyWords:
    """The words of a strategy (its own name in each column for one this table does not list)."""
    return STRATEGIES.get(strategy) or StrategyWords(strategy, strategy, strategy, strategy, strategy)
