"""GPUs in several machines (issue 28): rig-file nodes, the split each runtime does across them by its docs, the
network's cost per protocol, a launch per machine that reads back as the same answer, and the load over the network."""

from __future__ import annotations

import json
import shlex

import pytest

from advisor.engine.check import evaluate
from advisor.engine.launch import launch_steps, parse_command
from advisor.engine.options import Options
from advisor.errors import AdvisorError
from advisor.probe.rigfile import rig_from_data, rig_toml

TWO_BOXES = {"rig": {"ram_gib": 64, "network": "10gbe"},
             "gpu": [{"id": "rtx-3090", "count": 2, "node": 0}, {"id": "rtx-3090", "count": 2, "node": 1}],
             "node": [{"node": 0, "host": "192.168.1.10"}, {"node": 1, "host": "192.168.1.11", "ram_gib": 32}]}


def _rig(catalog, data=None, **rig):
    data = json.loads(json.dumps(data or TWO_BOXES))
    data["rig"].update(rig)
    return rig_from_data(catalog, data, "test")


def _answer(catalog, rig, model="qwen2.5-72b", **options):
    return evaluate(catalog, rig, catalog.models[model], Options(**options))


# --- the rig file ---------------------------------------------------------------------------------

def test_nodes_carry_host_ram_and_os(catalog):
    rig = _rig(catalog, os="linux")
    assert rig.node(1).host == "192.168.1.11" and rig.node(1).ram_bytes == 32 * 2**30 and rig.node(1).os == "linux"
    assert rig.node(0).address == "192.168.1.10" and rig.nodes == 2


def test_a_node_without_a_host_is_named_by_a_placeholder(catalog):
    data = json.loads(json.dumps(TWO_BOXES))
    del data["node"]
    assert _rig(catalog, data).node(1).address == "NODE1_IP"


@pytest.mark.parametrize("entry, words", [
    ({"node": 2, "host": "a"}, "has no GPU"),
    ({"node": 1, "host": "evil; rm -rf /"}, "not an address"),
    ({"node": 1, "os": "beos"}, "not one of"),
    ({"node": 1, "ram_gib": 0}, "ram_gib"),
])
def test_a_bad_node_is_one_clear_error(catalog, entry, words):
    data = json.loads(json.dumps(TWO_BOXES))
    data["node"] = [entry]
    with pytest.raises(AdvisorError, match=words):
        rig_from_data(catalog, data, "test")


def test_nodes_survive_the_rig_file_round_trip(catalog):
    import tomllib

    rig = _rig(catalog, os="linux")
    again = rig_from_data(catalog, tomllib.loads(rig_toml(rig)), "again")
    assert again.machines == rig.machines


def test_strix_halo_under_linux_plans_with_the_gtt_limit_not_the_firmware_carve_out(catalog):
    halo = {"rig": {"network": "5gbe"}, "gpu": [{"id": "ryzen-ai-max-395-128gb", "node": 0},
                                                {"id": "ryzen-ai-max-395-128gb", "node": 1}]}
    windows = _answer(catalog, _rig(catalog, halo), "glm-4.6", quant="Q4_K_M")
    linux = _answer(catalog, _rig(catalog, halo, os="linux"), "glm-4.6", quant="Q4_K_M")
    cap = {r: r.placement.devices[0].capacity_bytes / 2**30 for r in (windows, linux)}
    assert cap[windows] == pytest.approx(96, abs=0.1) and cap[linux] == pytest.approx(120, abs=0.1)
    assert linux.fits and not windows.fits


# --- the split each runtime does across machines --------------------------------------------------

def test_vllm_keeps_tensor_parallel_inside_each_machine(catalog):
    r = _answer(catalog, _rig(catalog), quant="awq", runtime="vllm")
    assert r.placement.tp_size == 2
    words = shlex.split(r.launch.command)
    assert words[words.index("--tensor-parallel-size") + 1] == "2"
    assert words[words.index("--pipeline-parallel-size") + 1] == "2"


def test_vllm_with_uneven_machines_takes_one_stage_per_gpu(catalog):
    data = json.loads(json.dumps(TWO_BOXES))
    data["gpu"][1]["count"] = 1
    r = _answer(catalog, _rig(catalog, data), quant="awq", runtime="vllm")
    assert "--pipeline-parallel-size 3" in r.launch.command and "--tensor-parallel-size" not in r.launch.command


def test_tensor_parallel_across_machines_pays_the_network_per_all_reduce(catalog):
    """A cross-machine all-reduce is the protocol's messages at the network's latency, not a local one (5-12 us)."""
    rig = _rig(catalog)
    across = _answer(catalog, rig, quant="awq", runtime="vllm", tensor_parallel=4)
    inside = _answer(catalog, rig, quant="awq", runtime="vllm")
    assert across.interconnect.link_time_share > 0.3 > inside.interconnect.link_time_share
    assert "(10 Gb Ethernet)" in dict(across.interconnect.details)["link"]
    fast = _answer(catalog, _rig(catalog, network="ib-ndr"), quant="awq", runtime="vllm", tensor_parallel=4)
    assert fast.speed.decode_tokens_per_s > 1.5 * across.speed.decode_tokens_per_s


def test_row_split_over_rpc_is_charged_to_the_network(catalog):
    slow = _answer(catalog, _rig(catalog, network="1gbe"), quant="Q4_K_M", split="row")
    fast = _answer(catalog, _rig(catalog, network="100gbe"), quant="Q4_K_M", split="row")
    assert slow.runs and slow.speed.decode_tokens_per_s < 0.5 * fast.speed.decode_tokens_per_s


def test_rpc_prefill_does_not_overlap_across_machines(catalog):
    """llama.cpp's RPC stages run one after another: two machines prefill no faster than their slower half would."""
    r = _answer(catalog, _rig(catalog, network="100gbe"), quant="Q4_K_M", prompt_tokens=4096)
    one = _answer(catalog, _rig(catalog, {"rig": {"ram_gib": 64}, "gpu": [{"id": "rtx-3090", "count": 4}]}),
                  quant="Q4_K_M", prompt_tokens=4096)
    assert r.speed.prefill_tokens_per_s < one.speed.prefill_tokens_per_s


def test_llama_cpp_tensor_split_stays_inside_one_machine(catalog):
    """-sm tensor's meta device spans a machine's own GPUs, not RPC devices: across machines it is refused with
    the way that runs (layer), and the split choice (SPL002) does not offer it as a speed-up."""
    r = _answer(catalog, _rig(catalog), "llama-3.1-70b", quant="Q4_K_M", split="tensor")
    assert not r.runs and "one machine" in r.placement.problem and "--split layer" in r.placement.problem
    layer = _answer(catalog, _rig(catalog), "llama-3.1-70b", quant="Q4_K_M")
    assert layer.runs and {s.split: s.runs for s in layer.split_choices}.get("tensor") in (None, False)


def test_exo_prices_its_tensor_sharding_as_tensor_parallel(catalog):
    macs = {"rig": {"network": "thunderbolt5-rdma"}, "gpu": [{"id": "m3-ultra-512gb", "node": 0},
                                                               {"id": "m3-ultra-512gb", "node": 1}]}
    rig = _rig(catalog, macs)
    pipe = _answer(catalog, rig, "qwen3-235b-a22b", runtime="exo", quant="mlx-8bit")
    tensor = _answer(catalog, rig, "qwen3-235b-a22b", runtime="exo", quant="mlx-8bit", split="tensor")
    assert pipe.placement.strategy == "layer_split" and tensor.placement.strategy == "tensor_parallel"
    assert tensor.speed.decode_tokens_per_s > 1.3 * pipe.speed.decode_tokens_per_s


def test_a_single_machine_runtime_refuses_several_machines_and_names_those_that_do(catalog):
    r = _answer(catalog, _rig(catalog), quant="Q4_K_M", runtime="ollama")
    assert not r.runs and "one machine" in r.refusal and "llama.cpp" in r.refusal


# --- a launch per machine ---------------------------------------------------------------------------

@pytest.mark.parametrize("runtime, quant, head, worker", [
    ("llama.cpp", "Q4_K_M", "--rpc 192.168.1.11:50052", "rpc-server -H 0.0.0.0 -p 50052"),
    ("vllm", "awq", "--distributed-executor-backend ray", "ray start --address 192.168.1.10:6379"),
    ("sglang", "awq", "--dist-init-addr 192.168.1.10:20000 --nnodes 2 --node-rank 0", "--node-rank 1"),
])
def test_every_machine_gets_its_commands(catalog, runtime, quant, head, worker):
    r = _answer(catalog, _rig(catalog), quant=quant, runtime=runtime)
    lc = r.launch
    assert [n.host for n in lc.nodes] == ["192.168.1.10", "192.168.1.11"]
    assert head in lc.command and lc.command in lc.nodes[0].commands
    assert any(worker in c for c in lc.nodes[1].commands)
    steps = [c for _, c in launch_steps(lc)]
    assert steps[-1] == lc.command or runtime == "sglang"  # the model is served last (SGLang: any order)


def test_ray_starts_its_head_before_the_workers_join(catalog):
    lc = _answer(catalog, _rig(catalog), quant="awq", runtime="vllm").launch
    steps = [c for _, c in launch_steps(lc)]
    assert steps[0].startswith("ray start --head") and steps[1].startswith("ray start --address")


def test_exo_is_started_on_every_mac_and_given_the_model_by_its_api(catalog):
    macs = {"rig": {"network": "thunderbolt5-rdma"}, "gpu": [{"id": "m3-ultra-512gb", "node": 0},
                                                               {"id": "m3-ultra-512gb", "node": 1}]}
    lc = _answer(catalog, _rig(catalog, macs), "qwen3-235b-a22b", runtime="exo", quant="mlx-8bit",
                 split="tensor").launch
    assert all("exo" in n.commands for n in lc.nodes)
    body = json.loads(shlex.split(lc.command)[-1])
    assert body["sharding"] == "Tensor" and body["instance_meta"] == "MlxJaccl" and body["min_nodes"] == 2


@pytest.mark.parametrize("runtime, quant", [("llama.cpp", "Q4_K_M"), ("vllm", "awq"), ("sglang", "awq")])
def test_the_served_command_reads_back_as_the_same_answer(catalog, tmp_path, runtime, quant):
    """`advisor check --rig FILE --cmd LAUNCH` gives the same placement and command: the per-machine flags
    (--rpc, --distributed-executor-backend, --dist-init-addr, --nnodes, --node-rank) are read, not unknown."""
    from advisor.cli import build_parser
    from advisor.commands.args import command_inputs, rig_from_args

    rig = _rig(catalog)
    path = tmp_path / "two.toml"
    path.write_text(rig_toml(rig))
    r = _answer(catalog, rig, quant=quant, runtime=runtime)
    parsed = parse_command(catalog.rules.launch, r.launch.command)
    assert not [n for n in parsed.notes if "unknown" in n.lower()], parsed.notes
    args = build_parser("check").parse_args(["check", "qwen2.5-72b", "--rig", str(path), "--runtime", runtime,
                                             "--quant", quant, "--cmd", r.launch.command])
    model, options = command_inputs(catalog, args, rig_from_args(args, catalog))
    again = evaluate(catalog, rig, model, options)
    assert [d.total_bytes for d in again.placement.devices] == [d.total_bytes for d in r.placement.devices]
    assert again.launch.command == r.launch.command


def test_launch_nodes_in_json(catalog):
    from advisor.report.jsonout import check_json

    r = _answer(catalog, _rig(catalog), quant="Q4_K_M")
    out = check_json(r)["launch"]
    assert [n["host"] for n in out["nodes"]] == ["192.168.1.10", "192.168.1.11"]
    assert out["nodes"][1]["command"].startswith("rpc-server") and out["steps"][-1]["command"] == out["command"]


# --- load over the network --------------------------------------------------------------------------

def test_rpc_weights_over_a_slow_network_are_a_warning_with_the_time(catalog):
    r = _answer(catalog, _rig(catalog, network="1gbe"), quant="Q4_K_M")
    f = next(f for f in r.findings if f.code == "NET001")
    assert f.severity == "warning" and "min" in f.message and "1 Gb Ethernet" in f.message
    remote = sum(d.weights_bytes for d, g in zip(r.placement.devices, _rig(catalog).gpus) if g.node == 1)
    minutes = remote / 0.125e9 / 60
    assert f"{minutes:.0f} min" in f.message


def test_runtimes_that_load_their_own_copy_say_to_put_the_model_on_every_machine(catalog):
    r = _answer(catalog, _rig(catalog), quant="awq", runtime="vllm")
    f = next(f for f in r.findings if f.code == "NET001")
    assert f.severity == "info" and "every machine" in f.message


# --- plan: a second machine against a bigger GPU ------------------------------------------------------

def test_plan_weighs_a_second_machine_against_a_bigger_gpu(catalog):
    from advisor.engine.plan import make_plan

    plan = make_plan(catalog, catalog.models["llama-3.1-70b"], Options(quant=None, ctx=8192), min_tps=10,
                     have=[(1, "rtx-3090")], top=40)
    second = [o for o in plan.options if o.platform == "2 machines"]
    bigger = [o for o in plan.options if o.platform != "2 machines" and o.new_gpus]
    assert second and bigger
    assert second[0].gpus == ((2, "rtx-3090"),) and second[0].new_gpus == ((1, "rtx-3090"),)
    assert "10 Gb Ethernet" in second[0].why and any("not priced" in b for b in second[0].price_basis)


def test_two_dgx_sparks_are_joined_by_their_own_200g_port(catalog):
    from advisor.engine.plan import make_plan

    plan = make_plan(catalog, catalog.models["glm-4.6"], Options(quant="Q4_K_M", ctx=8192), top=60)
    spark = next(o for o in plan.options if o.platform == "2 machines" and o.gpus == ((2, "dgx-spark"),))
    assert "ConnectX-7" in spark.why and spark.price_usd == 2 * catalog.gpus["dgx-spark"].price.usd
