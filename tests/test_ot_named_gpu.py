"""`-ot REGEX=CUDA1` (routed experts sent to a named GPU, as llama.cpp's --override-tensor does with a device
buffer name) is honoured: the experts land on that GPU instead of on the GPU that holds their layer (issue 26)."""

from __future__ import annotations

import json

CMD = ('llama-server -m Qwen3-30B-A3B-Q4_K_M.gguf -ngl 99 -ts 1,0 -c 8192 '
       '-ot "blk\\.(2[4-9]|3[0-9]|4[0-7])\\.ffn_.*_exps\\.=CUDA{gpu}"')


def _check(run_cli, gpu: int):
    return run_cli("check", "--gpu", "2xrtx-3060-12gb", "--ram", "64", "--cmd", CMD.format(gpu=gpu), "--format", "json")


def test_experts_sent_to_cuda1_land_there(run_cli):
    """-ts 1,0 puts all 48 layers on GPU 0 (17 GiB of Q4_K_M: more than a 3060's 12 GB); the experts of layers
    24-47 sent to CUDA1 take about half the weights off it."""
    d = json.loads(_check(run_cli, 1).stdout)
    gpu0, gpu1 = [m for m in d["placement"]["devices"] if m["device"].startswith("gpu")]
    assert gpu1["weights_bytes"] > 7 * 2**30 and gpu0["weights_bytes"] < 10 * 2**30
    assert d["fits"] is True
    same = json.loads(_check(run_cli, 0).stdout)  # =CUDA0: the experts stay with their layers on GPU 0
    assert same["runs"] is False


def test_a_gpu_the_rig_does_not_have_is_refused(run_cli):
    out = _check(run_cli, 5)
    assert out.returncode == 2 and "GPU 5" in out.stderr
