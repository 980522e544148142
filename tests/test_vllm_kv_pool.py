"""vLLM's KV pool in tokens against its own "GPU KV cache size: N tokens" start-up lines.

tests/data/vllm_kv_pool_logs.csv holds public start-up logs (one row each, cited; .md beside it).
Each row gives the GPU, the model and checkpoint, the parallel sizes and the options vLLM ran with;
the engine predicts the pool from those alone. The one constant fitted on these rows (the sampler's
warm-up copies, rules/runtimes.toml `sampler_copies`) is scored leave-one-source-out: every row is
predicted with the constant refitted on the other sources only.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.engine.releases import at_release
from advisor.errors import AdvisorError
from advisor.probe.flags import rig_from_flags

DATA = Path(__file__).parent / "data" / "vllm_kv_pool_logs.csv"
GIB = 1024**3
MIB = 1024**2
ROWS = list(csv.DictReader(DATA.open(encoding="utf-8")))
PREDICTED = [r for r in ROWS if r["gpu"]]
# Errors reached (held out by source); the test fails if they grow. Not widened to pass: 15 within 5% and 1.18%
# before the rotary table (rules/runtimes.toml rotary_cache_bytes) came out of the pool. It takes a little of the
# residual the sampler constant is fitted on, so the constant refitted without the L4/L40S source went 0.2 -> 0.0
# copies (a fitted 0 had read as "no warm-up, logits for the whole batch", which put those rows at -6..-14%;
# None says that now), and the median row moved from +1.18% to +1.27% (qwen3-14b on an L40S).
# Then the sampler's peak became the larger of it and the forward pass (vLLM's profile samples after the forward has
# freed its activations: RuntimeSpec.sampler_after_forward), where it had been added on top, and each row is asked as
# its own release (or its month's: DATED_RELEASES). That is what vLLM does, and it holds the 2025 builds' logged
# activation peaks within 1% from the sort's own tensors (tests/test_engine_memory.py), but on these rows the median
# went from 1.27% to 2.13%: the one constant now stands for the whole sampler peak (3.6 copies; 0.7 on top of the
# forward before) and these rows scatter from 1.2 to 5.6 copies around it (the TP 2 RTX PRO 6000 row implies 1.2:
# -6.6% -> -19.2%). Within 5% stayed 16 of 19; the July 2025 Qwen3-235B row went from +70% to +16.5%.
# Then four vLLM 0.28 rows that pass no --gpu-memory-utilization were read at the share vLLM 0.28 runs them with,
# 0.92 (its default since 0.20, vllm-project/vllm PR #38284), not 0.9: at that share they imply 4.6-10.1 copies, the
# constant refitted to 4.7 (3.6 before), and the median went from 2.13% to 2.65%, within 5% from 16 to 13 (the RTX
# 4080 row -5.9%, the larger L40S row +6.2%, the RTX PRO 6000 pair -28.4% and -14.9%). What those rows hold beyond
# 3.5 copies is not named here (rules/runtimes.toml sampler_copies).
WITHIN_5PCT_MIN = 13
MEDIAN_ABS_ERR_MAX = 0.0266


# A row whose log names no release but is dated is asked as a release of its month: July and December 2025 fall
# between 0.8.4 (April 2025) and 0.17 (March 2026), in the same `[[runtime.releases]]` ranges whichever release of
# the month ran, which test_a_dated_row_s_release_does_not_matter checks with two of them. A row of 2026 after April
# (0.20, the last range's end) is asked as today's.
DATED_RELEASES = {"(Jul 2025; not stated)": ("0.9.2", "0.10.0"), "(Dec 2025; not stated)": ("0.12.0", "0.13.0"),
                  "(Apr 2026; not stated)": ("0.19.0", "0.19.1")}


def _release(r: dict) -> str | None:
    """The row's vLLM release where its log states one or its date places it (`--runtime-version`), else None:
    asked as today's."""
    if r["vllm_version"][:1].isdigit():
        return r["vllm_version"]
    return DATED_RELEASES.get(r["vllm_version"], (None,))[0]


def _options(r: dict, **kw) -> Options:
    return Options(runtime="vllm", quant=r["quant"], ctx=int(r["max_model_len"]), runtime_version=_release(r),
                   kv_type="fp8" if r["kv_cache_dtype"].startswith("fp8") else "f16",
                   memory_fraction=float(r["gpu_memory_utilization"]), enforce_eager=r["enforce_eager"] == "yes",
                   max_num_batched_tokens=int(r["max_num_batched_tokens"]) if r["max_num_batched_tokens"] else None,
                   max_num_seqs=int(r["max_num_seqs"]) if r["max_num_seqs"] else None,
                   tensor_parallel=int(r["tensor_parallel"]), pipeline_parallel=int(r["pipeline_parallel"]), **kw)


def _rig(catalog, r: dict):
    n = int(r["tensor_parallel"]) * int(r.get("pipeline_parallel") or 1)
    rig = rig_from_flags(catalog, [f"{n}x{r['gpu']}"])
    if r["gpu_total_mib"]:  # what the card reported (vLLM's "total memory"), else the catalog's
        cap = int(float(r["gpu_total_mib"]) * MIB)
        rig = replace(rig, gpus=tuple(replace(g, capacity_bytes=cap, capacity_basis="free") for g in rig.gpus))
    return rig


def _with_copies(catalog, copies: float):
    vllm = replace(catalog.runtimes["vllm"], sampler_copies=copies)
    return replace(catalog, runtimes={**catalog.runtimes, "vllm": vllm})


def _predict(catalog, r: dict, copies: float) -> int:
    cat = _with_copies(catalog, copies)
    rep = evaluate(cat, _rig(cat, r), cat.models[r["model"]], _options(r))
    return rep.serving.kv_cache_tokens if rep.serving else 0


def _release_counts_its_copies(catalog, r: dict) -> bool:
    return at_release(replace(catalog.runtimes["vllm"], sampler_copies=None), _release(r)).sampler_copies is not None


# Copies at which the sampler's warm-up outweighs any row's forward pass, where vLLM's peak is the sampler's
# (RuntimeSpec.sampler_after_forward) and grows by one copy per copy.
_SAMPLER_BOUND = 30.0


def _copies_of_row(catalog, r: dict) -> float | None:
    """The sampler copies that reproduce this row exactly (None where its term is too small to tell:
    fewer than 64 sequences): solved where the sampler is the peak, so a row whose forward pass outweighs
    its sampler gives fewer copies than that forward pass is worth."""
    seqs = int(r["max_num_seqs"] or 0)
    if seqs < 64 or _release_counts_its_copies(catalog, r):
        return None  # too few requests to tell, or a release whose own copies rules/runtimes.toml counts
    cat = _with_copies(catalog, _SAMPLER_BOUND)
    rep = evaluate(cat, _rig(cat, r), cat.models[r["model"]], _options(r))
    d = next(x for x in rep.placement.devices if x.holds_output)
    free = d.capacity_bytes - d.weights_bytes - d.overhead_bytes
    per_token = d.kv_cache_bytes / int(r["max_model_len"])
    logged = float(r["available_kv_gib"]) * GIB if r["available_kv_gib"] else int(r["kv_cache_tokens"]) * per_token
    return _SAMPLER_BOUND + (free - logged) / (seqs * cat.models[r["model"]].vocab_size * 4)


def _source(r: dict) -> str:
    return r["source"].split(" (")[0]


@pytest.fixture(scope="module")
def solved(catalog):
    return {id(r): _copies_of_row(catalog, r) for r in PREDICTED}


@pytest.fixture(scope="module")
def held_out(catalog, solved):
    """(row, predicted tokens) with the sampler constant refitted without the row's own source."""
    out = []
    for r in PREDICTED:
        others = [solved[id(o)] for o in PREDICTED if _source(o) != _source(r) and solved[id(o)] is not None]
        out.append((r, _predict(catalog, r, round(statistics.median(others), 1))))
    return out


def test_the_rows_are_new_and_cited():
    old = (Path(__file__).parent / "data" / "vllm_memory_logs.csv").read_text(encoding="utf-8")
    assert len(ROWS) >= 15 and len(PREDICTED) >= 15
    for r in ROWS:
        assert r["source"] and r["kv_cache_tokens"].isdigit()
        assert f"{int(r['kv_cache_tokens'])}," not in old  # none of the rows already there
    md = DATA.with_suffix(".md").read_text(encoding="utf-8")
    for src in {_source(r) for r in ROWS}:
        assert src in md


def test_the_rulebook_constant_is_what_the_rows_give(catalog, solved):
    fitted = [c for c in solved.values() if c is not None]
    assert catalog.runtimes["vllm"].sampler_copies == round(statistics.median(fitted), 1)


def test_tokens_from_the_logged_pool_are_exact(catalog):
    """Given vLLM's own "Available KV cache memory", the pages it makes of it are the model's per-token
    KV bytes on each GPU (heads split by tensor parallel, layers by stage) in 16-token blocks."""
    for r in ROWS:
        if not r["available_kv_gib"] or not r["gpu"]:
            continue
        rep = evaluate(catalog, _rig(catalog, r), catalog.models[r["model"]], _options(r))
        d = next(x for x in rep.placement.devices if x.kv_cache_bytes)
        per_token = d.kv_cache_bytes / int(r["max_model_len"])
        tokens = int(float(r["available_kv_gib"]) * GIB // (per_token * 16)) * 16
        rounding = 0.005 * GIB / per_token + 16  # the logged GiB has two decimals
        logged = int(r["kv_cache_tokens"])
        if int(r["tensor_parallel"]) * int(r["pipeline_parallel"]) == 1:
            assert abs(tokens - logged) <= rounding, r["source"]
        else:  # the memory line is one worker's; the pool is the smallest worker's (vLLM takes the minimum)
            assert logged <= tokens + rounding, r["source"]


def test_pool_in_tokens_held_out_by_source(held_out):
    errs = [abs(p / int(r["kv_cache_tokens"]) - 1) for r, p in held_out]
    within = sum(e <= 0.05 for e in errs)
    print(f"\nvLLM KV pool, held out by source: {within}/{len(errs)} within 5%, median |error| "
          f"{statistics.median(errs):.1%}, worst {max(errs):.1%}")
    assert within >= WITHIN_5PCT_MIN
    assert statistics.median(errs) <= MEDIAN_ABS_ERR_MAX


# vllm-project/vllm#10517 (comment of 2024-12-02, asked as 0.6.4, that month's release): Llama-3.1-8B-Instruct BF16
# on one RTX 3090 at the default 0.90 under vLLM V0 (before V1, whose chunked prefill is always on: docs.vllm.ai configuration/optimization
# "Chunked Prefill"). V0 turned chunked prefill on only above 32k of max_model_len, and without it profiled one
# batch of max_model_len tokens: 20k started with "kv_cache_size=3.81GiB ... GPU blocks: 1952" (31,232 tokens),
# 29k failed ("maximum number of tokens that can be stored in KV cache (23648)"), 35k (chunked, 512-token
# batches) started with 21.22 - 15.05 - 0.35 = 5.82 GiB of pool. CUDA graphs were not in V0's profile: eager.
V0_LOG = [(20000, 20000, 31232), (29000, 29000, None), (35000, 512, int(5.82 * GIB / (2 * 32 * 8 * 128 * 2)))]


@pytest.mark.parametrize("ctx,batch,tokens", V0_LOG)
def test_the_3090_29k_failure_is_v0s_unchunked_profile_batch(catalog, ctx, batch, tokens):
    """Issue 27: 'fits' at 29k on one RTX 3090 where the published attempt failed. The attempt ran V0, whose
    profile batch was the whole 29k context (the activation peak: logits and MLP of 29k tokens, ~3 GiB); given
    that batch (--max-num-batched-tokens) the advisor refuses 29k and starts 20k and 35k within 6% of the log.
    Today's vLLM (V1) profiles at most --max-num-batched-tokens (2048 on this card) and starts at 29k."""
    rig = rig_from_flags(catalog, ["rtx-3090"])
    model = catalog.models["llama-3.1-8b"]
    v0 = evaluate(catalog, rig, model, Options(runtime="vllm", quant="BF16", ctx=ctx, max_num_batched_tokens=batch,
                                               enforce_eager=True, runtime_version="0.6.4"))
    if tokens is None:
        assert not v0.fits and not v0.serving.starts
        v1 = evaluate(catalog, rig, model, Options(runtime="vllm", quant="BF16", ctx=ctx))
        assert v1.fits and v1.serving.starts
    else:
        assert v0.serving.starts and v0.serving.kv_cache_tokens == pytest.approx(tokens, rel=0.06)


HYBRID = list(csv.DictReader((DATA.parent / "vllm_hybrid_pool_logs.csv").open(encoding="utf-8")))


@pytest.mark.parametrize("r", [r for r in HYBRID if r["available_kv_gib"] and r["kv_cache_tokens"]],
                         ids=lambda r: _row_name(r))
def test_grouped_pool_of_a_hybrid_model_is_what_vllm_logs(catalog, r):
    """From the logged available memory, vLLM's grouped accounting (layer groups per kind, one page size,
    recurrent states in pages) gives the logged "Maximum concurrency" and "GPU KV cache size": hybrid (Gated
    DeltaNet: Qwen3.6, Qwen3-Next), sliding-window (Gemma 3) and chunked (Llama 4, every layer full length).
    A recurrent group holds one state page per request without prefix caching (vLLM 0.13 turned it off for
    hybrid models) and two with it ("align" mode). vLLM logs the token count two ways: int(concurrency x
    max_model_len) since the hybrid report was fixed, num_blocks // groups x block size before
    (vllm/v1/core/kv_cache_utils.py `_report_kv_cache_config`, both versions); `tokens_as` says which. A row whose
    source quotes no concurrency line (club-3090 #858) is held to its token count alone."""
    from dataclasses import replace as with_

    from advisor.engine import kv_groups
    from advisor.engine.check import _scenario

    rig = rig_from_flags(catalog, [r["gpu"]])
    length, batch, tp = int(r["max_model_len"]), int(r["max_num_batched_tokens"]), int(r["tensor_parallel"])
    sc = _scenario(catalog, rig, catalog.models[r["model"]],
                   Options(runtime="vllm", quant=r["quant"], ctx=length, max_num_batched_tokens=batch,
                           kv_type="fp8" if r["kv_cache_dtype"].startswith("fp8") else "f16",
                           runtime_version=_release(r)))
    if r["prefix_caching"] == "no":
        sc = with_(sc, runtime=with_(sc.runtime, recurrent_pages=1))
    g = kv_groups.layout(with_(sc, ctx=length), tp, batch)
    free = float(r["available_kv_gib"]) * GIB
    conc = kv_groups.concurrency(sc, g, free, length)
    # the log rounds the memory to 0.01 GiB (up to 10 MiB: a block of Qwen3-Next's 12 x 536 KiB pages) and the
    # concurrency to 0.01: the logged figure lies between what either end of the memory's rounding gives
    lo, hi = (kv_groups.concurrency(sc, g, free + d * 0.005 * GIB, length) for d in (-1, 1))
    assert not r["max_concurrency"] or lo - 0.005 <= float(r["max_concurrency"]) <= hi + 0.005
    tokens = int(conc * length) if r["tokens_as"] == "concurrency" else \
        kv_groups.blocks(g, free) // sum(g.groups) * g.block_tokens
    assert tokens == pytest.approx(int(r["kv_cache_tokens"]), rel=0.005)


def test_no_async_scheduling_keeps_one_step_in_flight(catalog):
    """`--no-async-scheduling` (vLLM's async_scheduling off) keeps one batch in flight, so each request's sliding
    groups hold one step of tokens beside the window: Gemma 4 31B at 16,384 tokens on the B300 row's card serves
    more requests at once, by the one-step count. Read from `vllm serve ... --no-async-scheduling` and written back
    in the answer's line; llama.cpp has no such option."""
    from advisor.engine import kv_groups
    from advisor.engine.check import _scenario
    from tests.test_launch import _answer

    rig, m = rig_from_flags(catalog, ["b200"]), catalog.models["gemma-4-31b"]
    on, off = (_scenario(catalog, rig, m, Options(runtime="vllm", ctx=16384, max_num_batched_tokens=8192,
                                                   no_async_scheduling=flag)) for flag in (False, True))
    g_on, g_off = kv_groups.layout(on, 1, 8192), kv_groups.layout(off, 1, 8192)
    assert (g_on.batch_tokens, g_off.batch_tokens) == (16384, 8192)
    held = [min(m.sliding_window - 1 + flight, 16384) for flight in (16384, 8192)]  # capped at the request
    assert kv_groups.pages_per_request(on, g_on, 16384) - kv_groups.pages_per_request(off, g_off, 16384) == \
        g_on.groups[1] * (-(-held[0] // g_on.block_tokens) - -(-held[1] // g_on.block_tokens))
    r = _answer(catalog, "--cmd", "vllm serve google/gemma-4-31B-it --max-model-len 16384 --no-async-scheduling",
                "--gpu", "b200")
    assert r.options.no_async_scheduling and "--no-async-scheduling" in r.launch.command
    with pytest.raises(AdvisorError, match="no-async-scheduling"):
        _answer(catalog, "gemma-4-31b", "--runtime", "llama.cpp", "--no-async-scheduling", "--gpu", "b200")


@pytest.mark.parametrize("model,kinds", [("gemma-4-31b", ("full-attention", "sliding")),
                                          ("qwen3.6-35b-a3b", ("full-attention", "recurrent"))])
def test_the_pool_basis_names_only_the_kinds_the_model_has(catalog, model, kinds):
    """The answer's pool basis says what a request holds in each kind of layer group the model has: Qwen3.6 has no
    sliding window, so nothing of a window or of steps in flight (it said both for every hybrid model)."""
    r = evaluate(catalog, rig_from_flags(catalog, ["b200"]), catalog.models[model],
                 Options(runtime="vllm", ctx=16384))
    said = {"full-attention": "its length in the full-attention groups", "sliding": "in flight in the sliding ones",
            "recurrent": "its state in the recurrent ones"}
    assert {k for k, text in said.items() if text in r.serving.basis} == set(kinds)


def test_the_hybrid_rows_cover_each_kind_of_layer(catalog):
    """Issue 27: the grouped pool is held to start-up logs of hybrid (recurrent), sliding-window and chunked
    models."""
    models = [catalog.models[r["model"]] for r in HYBRID]
    assert any(m.recurrent for m in models)
    assert any(m.sliding_window and not m.attention_chunk_size for m in models)
    assert any(m.attention_chunk_size for m in models)


@pytest.mark.parametrize("model,length,batch,kinds", [
    ("gemma-3-27b", 131072, 2048, (1, 6, 0)),   # 10 full, 52 sliding (1024): groups of 10, 8 padding layers
    ("llama-4-scout", 131072, 8192, (1, 0, 0)),  # chunked: vLLM's manager off by default, all 48 full length
    ("gpt-oss-120b", 131072, 2048, (1, 1, 0)),  # 18 full, 18 sliding (128)
])
def test_windowed_models_count_every_layer_group_per_request(catalog, model, length, batch, kinds):
    """Issue 27: a windowed model's pool was counted per token of one request holding only its windows, so
    Llama 4 Scout's "GPU KV cache size" came out ~3.4x what vLLM keeps (its chunked layers at full length: the
    hybrid manager is off for chunked local attention by default). Sliding windows are paged per group, a
    request holding its full length in the full-attention group and window + its tokens in flight + a page in each
    other: two steps of max_num_batched_tokens under today's asynchronous scheduling (one before vLLM 0.26)."""
    from advisor.engine import kv_groups
    from advisor.engine import memory as mem
    from advisor.engine.check import _scenario

    sc = _scenario(catalog, rig_from_flags(catalog, ["h100-sxm"]), catalog.models[model],
                   Options(runtime="vllm", ctx=length, max_num_batched_tokens=batch))
    g = kv_groups.layout(sc, 1, batch)
    assert g is not None and g.groups == kinds and g.block_tokens == 16
    free = 10 * GIB
    assert sc.runtime.in_flight_batches == 2
    window = min(sc.model.sliding_window - 1 + 2 * batch, length)
    assert kv_groups.pages_per_request(sc, g, length) == \
        kinds[0] * length // 16 + kinds[1] * (-(-window // 16) + 1)
    tokens = int(kv_groups.concurrency(sc, g, free, length) * length)
    one = sum(mem.kv_bytes_per_layer(sc.model, length, "f16", catalog.rules, swa_cells=sc.model.sliding_window))
    before = free / (one / length)  # the old count: tokens of a request that holds only its windows
    assert tokens < before
    if model == "llama-4-scout":
        assert before / tokens > 3.0


# The memory the hybrid rows' pools came from, predicted from the card alone (the share of the card less weights,
# activation peak, vision encoder and its profile run, sampler warm-up, CUDA graphs, the rotary table and non-torch
# memory) against the logged "Available KV cache memory", each row asked as the release it ran (`--runtime-version`)
# with the options its log states (tests/data/vllm_hybrid_pool_logs.csv: Qwen3-Next's non-default args pass
# --gpu-memory-utilization 0.92 and --max-num-seqs 8; the other rows pass no share, so their release's default
# applies, 0.92 for Qwen3.6's 0.24): -9.6% (Qwen3.6, RTX 5090, 0.24, max_num_seqs 1, NVIDIA's checkpoint in its own
# layout, its gated q_proj counted whole; -11.4% read as uniform NVFP4 without the gate), +1.7% (Gemma 3, MI300X, 0.11),
# -2.0% (Qwen3-Next, 2x L40S, 0.13; +13.6% while its checkpoint was read as uniform AWQ), -1.2% (Llama 4 Scout,
# 8x H200, December 2025), and four rows gathered since, scored as they came, nothing fitted on them: +0.5%
# (Gemma 4 31B, B300, 0.26), +2.1% (gpt-oss-20b, A100, 0.19), +4.7% (Gemma 4 26B-A4B, A100, April 2026,
# --enforce-eager), +2.6% (Qwen3-Next BF16, 2x H200, 0.10), +0.6% (Qwen3.6 in NVIDIA's checkpoint on 2x RTX 5090
# at TP 2, 0.25.1, club-3090 #858: the #612 row's checkpoint and card, gathered after the first eight and scored
# as it came). Issue 27 asks for 5%; what is missing on the hybrid
# row outside it is decomposed in tests/data/vllm_hybrid_pool_logs.md ("From the card alone").
# Until the Qwen3-Next row carried its own share and sequence cap, it was asked at 0.9 and 256 sequences, whose 1.4
# GiB of sorted sampler logits and 0.9 GiB of smaller share hid its weights: vLLM logged "Model loading took 22.5313
# GiB" where the engine read the then unnamed 4-bit checkpoint ("/models", compressed-tensors with some layers left
# unquantized, "Falling back to UnquantizedLinearMethod") as uniform AWQ, 19.68 GiB a GPU. It is
# cyankiwi/Qwen3-Next-80B-A3B-Instruct-AWQ-4bit (the csv's checkpoint column says how the log and its operator's
# inventory name it), INT4 in groups of 32 on the routed experts and BF16 elsewhere (rules/quants.toml
# int4-g32-experts): 22.45 GiB a GPU, -0.3% from the log, nothing fitted. That row read +2.3% then, and
# Qwen3.6 -21.9% at the 0.9 that vLLM 0.24 no longer defaults to. Where the log prints its weights, the memory left
# beside them is held to issue 27's 5% on its own (test below): Gemma 3 +1.0%, Qwen3-Next -2.5% (L40S) and +2.4%
# (H200, BF16), Gemma 4 31B -0.5%, gpt-oss-20b -0.4%, Gemma 4 26B-A4B -2.3%.
# History, asked as today's vLLM: +14.8%, +8.0%, +8.2%, +8.3% before the rotary table (Scout's 2.5 GiB a GPU);
# +14.2%, +8.0%, +8.0%, +5.5% before the catalog knew its towers' shapes (hardware_db/models.toml `vision`); the
# fused-expert workspaces (advisor/engine/memory.py _fused_workspace_width) and the sampler's peak taken as the
# larger of it and the forward moved Gemma 3 and Scout to +1.7% and -1.2% as their releases.
# Each bound moved with the commit that brought a missing term, a measured figure or a row's own option in, not by
# drift, and says so.
CARD_ALONE_WORST = 0.047  # 0.220 while Qwen3.6 was asked at 0.9 (-21.9%); 0.138 while Qwen3-Next's checkpoint was
# unnamed; 0.097 (Qwen3.6 on one 5090, -9.6%) while every graph set was counted as a flat 700 MiB, where vLLM's
# estimate for its two sizes is a fifth of that (advisor/engine/memory.py cuda_graph_bytes: -0.4% now, and its
# two-5090 run +0.6% -> +3.9%); Gemma 4 26B-A4B (+4.7%, eager) now
CARD_ALONE_MEDIAN = 0.021  # 0.066 on the first four rows, before the four gathered since joined; 0.025 before
# Qwen3-Next's checkpoint was named (0.0206 on those eight; 0.0202 with #858; 0.0202 with the graphs counted)
CARD_ALONE_WITHIN_5PCT = 9  # all nine; 2 of the first four, 6 of 8 while Qwen3-Next's checkpoint was unnamed, 8 of 9
# while the graphs were a flat 700 MiB
BESIDE_LOGGED_WEIGHTS_MAX = 0.05  # issue 27's target; reached on all six rows that print their weights


def _row_name(r: dict) -> str:
    return f"{r['model']} ({r['tensor_parallel']}x {r['gpu']})"


def _card_alone_error(catalog, r: dict, logged_weights: bool = False) -> float:
    """The predicted pool over the logged one, less 1; with `logged_weights`, the pool the engine's other terms
    leave beside the weights vLLM logged ("Model loading took", the vision tower's included)."""
    tp = int(r["tensor_parallel"])
    opts = Options(runtime="vllm", quant=r["quant"], ctx=int(r["max_model_len"]),
                   max_num_batched_tokens=int(r["max_num_batched_tokens"]) if r["max_num_batched_tokens"] else None,
                   max_num_seqs=int(r["max_num_seqs"]) if r["max_num_seqs"] else None,
                   kv_type="fp8" if r["kv_cache_dtype"].startswith("fp8") else "f16",
                   tensor_parallel=tp if tp > 1 else None, enforce_eager=r["enforce_eager"] == "yes",
                   memory_fraction=float(r["gpu_memory_utilization"]) if r["gpu_memory_utilization"] else None,
                   runtime_version=_release(r))
    rep = evaluate(catalog, _rig(catalog, r), catalog.models[r["model"]], opts)
    pool = min(d.pool_bytes for d in rep.serving.devices)
    if logged_weights:
        tower = rep.vision.weights_bytes if rep.vision else 0
        pool += rep.placement.devices[0].weights_bytes + tower - float(r["weights_gib"]) * GIB
    return pool / (float(r["available_kv_gib"]) * GIB) - 1


def test_card_alone_memory_of_the_hybrid_rows_does_not_drift(catalog):
    errs = {_row_name(r): _card_alone_error(catalog, r) for r in HYBRID}
    print("\ncard-alone KV memory vs logged: " + ", ".join(f"{m} {e:+.1%}" for m, e in errs.items()))
    assert max(abs(e) for e in errs.values()) <= CARD_ALONE_WORST
    assert statistics.median(abs(e) for e in errs.values()) <= CARD_ALONE_MEDIAN
    assert sum(abs(e) <= 0.05 for e in errs.values()) >= CARD_ALONE_WITHIN_5PCT


def test_beside_the_logged_weights_the_hybrid_rows_are_within_5_percent(catalog):
    """Issue 27's 5% on the memory left for the pool where the log prints what the checkpoint it ran weighed:
    the engine's weights are held to the logs elsewhere (the card-alone test above); here, every other term."""
    rows = [r for r in HYBRID if r["weights_gib"]]
    assert len(rows) == 6 and {r["model"] for r in rows} == {"gemma-3-27b", "qwen3-next-80b-a3b", "gemma-4-31b",
                                                             "gpt-oss-20b", "gemma-4-26b-a4b"}
    errs = {_row_name(r): _card_alone_error(catalog, r, logged_weights=True) for r in rows}
    print("\nKV memory beside the logged weights: " + ", ".join(f"{m} {e:+.1%}" for m, e in errs.items()))
    assert max(abs(e) for e in errs.values()) <= BESIDE_LOGGED_WEIGHTS_MAX


def test_a_dated_row_s_release_does_not_matter(catalog):
    dated = [r for r in HYBRID + PREDICTED if r["vllm_version"] in DATED_RELEASES]
    assert {r["vllm_version"] for r in dated} == set(DATED_RELEASES)
    for r in dated:
        first, second = (at_release(catalog.runtimes["vllm"], v) for v in DATED_RELEASES[r["vllm_version"]])
        assert first == second, r["model"]


def test_the_rotary_table_is_loaded_on_every_gpu(catalog):
    """vLLM's RotaryEmbedding builds cos_sin_cache for every position up to max_position_embeddings in the model's
    dtype on each GPU (rules/runtimes.toml rotary_cache_bytes): Llama 4 Scout Instruct's 10,485,760 positions x
    128 x 2 B = 2.5 GiB a GPU come out of each GPU's pool; Qwen3-Next rotates 64 of its 256 dimensions."""
    rig = rig_from_flags(catalog, ["8xh200-sxm"])
    none = replace(catalog, runtimes={**catalog.runtimes, "vllm": replace(catalog.runtimes["vllm"],
                                                                          rotary_cache_bytes=0.0)})
    opts = Options(runtime="vllm", ctx=131072, tensor_parallel=8)
    scout = catalog.models["llama-4-scout"]
    got = [evaluate(c, rig, scout, opts).placement.devices for c in (catalog, none)]
    assert all(a.overhead_bytes - b.overhead_bytes == 10_485_760 * 128 * 2 for a, b in zip(*got))
    nxt = evaluate(catalog, rig, catalog.models["qwen3-next-80b-a3b"], opts).placement.devices[0].overhead_bytes
    assert nxt - evaluate(none, rig, catalog.models["qwen3-next-80b-a3b"], opts).placement.devices[0].overhead_bytes \
        == 262_144 * 64 * 2


def test_no_sampler_copies_is_no_warm_up_not_the_whole_batch(catalog):
    """A fitted 0 copies means the sampler's warm-up holds nothing; only a runtime without the term (None) holds
    logits for the whole profile batch (a held-out refit of 0.0 had read as the latter)."""
    r = next(r for r in PREDICTED if r["max_num_seqs"] and int(r["max_num_seqs"]) >= 64
             and not _release_counts_its_copies(catalog, r))
    zero, small, whole = (_predict(catalog, r, c) for c in (0.0, 0.1, None))
    assert zero >= small > whole
