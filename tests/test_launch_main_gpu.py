"""`-sm none` and `-mg` read as llama.cpp reads them (common/arg.cpp: "-sm none: use one GPU only";
"-mg: the GPU to use for the model (with split-mode = none), or for intermediate results and KV (with
split-mode = row) (default: 0)"): one GPU of the rig holds the whole model, the main GPU, and the answer is
that GPU's alone; -mg never goes unread."""

from __future__ import annotations

import pytest

from test_launch import _answer

from advisor.errors import AdvisorError

CMD = "llama-server -m qwen3-8b-Q4_K_M.gguf -c 8192 -np 1 -ngl 99 "
RIG = ("--gpu", "rtx-3090", "--gpu", "rtx-4090")


def _per_gpu(r):
    return [d.total_bytes for d in r.placement.devices]


def test_sm_none_places_everything_on_the_main_gpu(catalog):
    alone = _answer(catalog, "--cmd", CMD, "--gpu", "rtx-4090")
    r = _answer(catalog, "--cmd", CMD + "-sm none -mg 1", *RIG)
    assert _per_gpu(r) == [0, _per_gpu(alone)[0]]  # the 4090 (gpu1) alone, as if it were the only GPU
    assert r.speed.decode_tokens_per_s == alone.speed.decode_tokens_per_s
    assert not r.options.command_notes
    assert " -sm none -mg 1 " in r.launch.command and "-ts" not in r.launch.command
    assert r.placement.strategy == alone.placement.strategy == "single_gpu"  # one GPU's answer, one GPU's error band
    assert r.speed.error_band.text == alone.speed.error_band.text
    default = _answer(catalog, "--cmd", CMD + "-sm none", *RIG)  # -mg defaults to 0: the 3090
    assert _per_gpu(default)[1] == 0 and _per_gpu(default)[0] > 0


def test_sm_none_line_reads_back_to_the_same_answer(catalog):
    r = _answer(catalog, "--cmd", CMD + "-sm none -mg 1", *RIG)
    again = _answer(catalog, "--cmd", r.launch.command, *RIG)
    assert _per_gpu(again) == _per_gpu(r) and again.launch.command == r.launch.command


def test_ts_with_sm_none_is_named_as_unused(catalog):
    r = _answer(catalog, "--cmd", CMD + "-sm none -mg 1 -ts 1,1", *RIG)
    assert _per_gpu(r)[0] == 0
    assert any(n.startswith("-ts 1,1: not used with -sm none") for n in r.options.command_notes)


@pytest.mark.parametrize("extra, words", [("-mg 1", "with a layer split the main GPU places nothing"),
                                          ("-sm row -mg 1", "advisor plans them on GPU 0")])
def test_mg_outside_sm_none_is_named(catalog, extra, words):
    r = _answer(catalog, "--cmd", CMD + extra, *RIG)
    assert any(n.startswith("-mg 1:") and words in n for n in r.options.command_notes)


@pytest.mark.parametrize("extra, words", [("-sm none -mg 2", "-mg 2 names no GPU of this rig (2 GPUs"),
                                          ("-mg -1", "-mg -1 names no GPU"), ("-mg x", "is not a GPU index")])
def test_mg_that_names_no_gpu_is_one_error(catalog, extra, words):
    with pytest.raises(AdvisorError) as err:
        _answer(catalog, "--cmd", CMD + extra, *RIG)
    assert words in err.value.message


def test_cli_sm_none_exit_codes(run_cli):
    r = run_cli("check", "--cmd", CMD + "-sm none -mg 5", *RIG)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "-mg 5 names no GPU" in r.stderr
