"""Every reproduction of issues 12 and 30, run as the user would run it, held to its bound.

    python bench/hostile.py            # all cases: exit code, stderr, wall time and peak memory
    python bench/hostile.py fifo       # only the cases whose name contains "fifo"
    python bench/hostile.py 30.        # issue 30's: hostile servers (a local one) and drivers

Each case is a fresh `advisor` process in an empty temporary directory, with HOME,
ADVISOR_CONFIG_DIR and ADVISOR_CACHE_DIR pointing at temporary directories. It must end with an
allowed exit code, at most one line on stderr for exit 2, no traceback, within LIMIT_S seconds of
wall time (issue 30's: LIMIT30_S) and LIMIT_MIB of peak memory (the child's maximum resident set, from wait4). The
test-suite (tests/test_hostile.py) runs the same cases for the exit code and stderr; the time and
memory bounds are checked here, on a quiet machine, not in a timed unit test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

LIMIT_S = 2.0
LIMIT_MIB = 300
HANG_S = 20.0
"""A case still running after this long is killed and reported as a hang."""

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nvidia_smi"


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    codes: frozenset[int]
    """Allowed exit codes."""
    files: dict[str, bytes | str | Callable[[], bytes | str]] = field(default_factory=dict)
    """Files to create in the working directory (relative paths; `cfg/` is the user catalog folder,
    `cache/` the cache folder). The value `FIFO` makes a named pipe; `LOOP` a symlink loop."""
    shell: str = ""
    """Run through `sh -c` with this command instead (`$A` is the advisor), for pipes and closed streams."""
    env: dict[str, str] = field(default_factory=dict)
    stdout_has: str = ""
    stderr_has: str = ""
    one_line: bool = True
    """Exit 2 must say why in one stderr line (off where the case closes stderr)."""
    check: Callable[[Path, str], str] | None = None
    """Extra check on (working dir, stdout): returns a problem in words, or ''."""
    interrupt_after_s: float | None = None
    """Send SIGINT this long after the start."""
    limit_s: float = 2.0
    """Wall time allowed (LIMIT_S for issue 12's cases)."""
    setup: Callable[[Path], None] | None = None
    """Run on the working directory once the files are made (permissions, symbolic links)."""


FIFO, LOOP = "\0fifo", "\0loop"
RIG2_UNKNOWN = '[[gpu]]\nid = "x"\nvram_gib = 16\ncount = 2\n'


def _xml_gpu(total: str = "24576 MiB", free: str = "24000 MiB", power: str = "350.00 W",
             name: str = "NVIDIA GeForce RTX 3090") -> str:
    return (f'<gpu id="00000000:01:00.0"><product_name>{name}</product_name>'
            f"<fb_memory_usage><total>{total}</total><free>{free}</free></fb_memory_usage>"
            f"<gpu_power_readings><current_power_limit>{power}</current_power_limit></gpu_power_readings></gpu>")


def xml(*gpus: str) -> str:
    return "<?xml version=\"1.0\" ?>\n<nvidia_smi_log><driver_version>550.54</driver_version>" + "".join(gpus) + "</nvidia_smi_log>\n"


def gguf_many_tensors(n: int) -> bytes:
    """A GGUF header claiming `n` tiny tensors, each info present (so only the count is wrong)."""
    def gstr(s: bytes) -> bytes:
        return struct.pack("<Q", len(s)) + s
    kv = gstr(b"general.architecture") + struct.pack("<I", 8) + gstr(b"llama")
    infos = b"".join(gstr(b"t%d" % i) + struct.pack("<I", 1) + struct.pack("<Q", 1) + struct.pack("<IQ", 0, 32 * i)
                     for i in range(n))
    body = b"GGUF" + struct.pack("<IQQ", 3, n, 1) + kv + infos
    return body + bytes(-len(body) % 32) + bytes(32 * n)


def safetensors_many_tensors(n: int) -> bytes:
    header = "{" + ",".join(f'"t{i}":{{"dtype":"F32","shape":[1],"data_offsets":[{4 * i},{4 * i + 4}]}}'
                            for i in range(n)) + "}"
    raw = header.encode()
    return struct.pack("<Q", len(raw)) + raw + bytes(4 * n)


def _no_infinity(_: Path, out: str) -> str:
    try:
        json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError as exc:
        return f"stdout is not strict JSON ({exc})"
    return ""


def _no_escape(_: Path, out: str) -> str:
    return "an escape sequence reached stdout" if "\x1b" in out else ""


def _unchanged(name: str, text: str) -> Callable[[Path, str], str]:
    def check(d: Path, _: str) -> str:
        return "" if (d / name).read_text() == text else f"{name} was changed"
    return check


def _reads_back(name: str) -> Callable[[Path, str], str]:
    def check(d: Path, _: str) -> str:
        r = subprocess.run([*advisor_cmd(), "check", "llama-3.1-8b", "--rig", str(d / name)], cwd=d,
                           capture_output=True, text=True, env=_env(d), timeout=HANG_S)
        return "" if r.returncode in (0, 1) else f"the saved rig file does not read back: {r.stderr.strip()}"
    return check


Q = "qwen3-32b"
DIGITS400 = "9" * 400


def big_toml() -> str:
    return "".join(f"k{i} = {i}\n" for i in range(900_000))  # 10 MB of keys


def many_tables(kind: str, limit: int = 500 * 1024) -> str:
    """Just under the TOML size limit of tiny [[kind]] tables: the most work a file can ask for."""
    out, size, i = [], 0, 0
    while size < limit:
        out.append(f'[[{kind}]]\nid = "g{i}"\n')
        size += len(out[-1])
        i += 1
    return "".join(out)


def xml_many_gpus() -> str:
    return xml(*["<gpu><product_name>NVIDIA GeForce RTX 3090</product_name></gpu>"] * 20000)


def xml_60mb() -> str:
    return xml("<gpu><product_name>" + "x" * 60_000_000 + "</product_name></gpu>")


def safetensors_folder_file() -> bytes:
    return safetensors_many_tensors(1_000_000)


def mig_dump() -> bytes:
    path = SHARED / "netdata_a100_sxm4_40gb_mig.xml"
    return path.read_bytes() if path.is_file() else xml()
CASES: list[Case] = [
    # 1-2: engine guards
    Case("1 two GPUs not in the catalog", ("check", Q, "--rig", "t.toml"), frozenset({0, 1}), {"t.toml": RIG2_UNKNOWN}),
    Case("1 one known, one unknown GPU", ("check", Q, "--rig", "t.toml"), frozenset({0, 1}),
         {"t.toml": '[[gpu]]\nid = "rtx-3090"\n[[gpu]]\nid = "rtx-a4500x"\nvram_gib = 20\n'}),
    Case("2 zero usable memory (DGX Spark at 2 GiB)", ("check", Q, "--rig", "z.toml"), frozenset({0, 1}),
         {"z.toml": '[[gpu]]\nid = "dgx-spark"\nmemory_gib = 2\n'}),
    Case("2 zero free memory on two cards", ("check", Q, "--rig", "z.toml"), frozenset({0, 1}),
         {"z.toml": '[[gpu]]\nid = "rtx-3090"\ncount = 2\nmemory_gib = 0\n'}),
    # 3: special files
    Case("3 FIFO as a model file", ("check", "p.gguf", "--gpu", "rtx-3090"), frozenset({2}), {"p.gguf": FIFO}),
    Case("3 FIFO as --rig", ("check", Q, "--rig", "p.toml"), frozenset({2}), {"p.toml": FIFO}),
    Case("3 FIFO as detect --from", ("detect", "--from", "p.xml"), frozenset({2}), {"p.xml": FIFO}),
    Case("3 FIFO in the user catalog", ("gpus",), frozenset({2}), {"cfg/f.toml": FIFO}, stderr_has="FIFO"),
    Case("3 /dev/zero as --rig", ("check", Q, "--rig", "/dev/zero"), frozenset({2})),
    Case("3 /dev/zero as detect --from", ("detect", "--from", "/dev/zero"), frozenset({2})),
    Case("3 /dev/zero as a model", ("check", "/dev/zero", "--gpu", "rtx-3090"), frozenset({2})),
    Case("3 symlink loop as --rig", ("check", Q, "--rig", "loop.toml"), frozenset({2}), {"loop.toml": LOOP}),
    # 4: wrong shapes
    *[Case(f"4 rig file: {label}", ("check", Q, "--rig", "s.toml"), frozenset({2}), {"s.toml": text})
      for label, text in [("rig = 5", "rig = 5\n"), ("nvlink = 5", "[rig]\nnvlink = 5\n"),
                          ("network = [1]", "[rig]\nnetwork = [1]\n"),
                          ("pcie_gen a string", '[[gpu]]\nid = "x"\nvram_gib = 16\npcie_gen = "a"\n'),
                          ("pcie_lanes a table", '[[gpu]]\nid = "x"\nvram_gib = 16\npcie_lanes = {a = 1}\n'),
                          ("3,000 nested arrays", "a = " + "[" * 3000 + "]" * 3000 + "\n"),
                          ("3,000 nested tables", "a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n")]],
    Case("4 bad user file: catalog validate reports it", ("catalog", "validate"), frozenset({1}),
         {"cfg/bad.toml": "[[gpu]]\nid = 5\n"}, stdout_has="bad.toml"),
    Case("4 bad user file: other commands name it", ("gpus",), frozenset({2}), {"cfg/bad.toml": "x = ["},
         stderr_has="bad.toml"),
    # 5: huge numbers
    Case("5 400-digit --ctx", ("check", Q, "--gpu", "rtx-3090", "--ctx", DIGITS400), frozenset({2})),
    Case("5 5,000-digit GPU count", ("check", Q, "--gpu", "9" * 5000 + "xrtx-3090"), frozenset({2})),
    Case("5 --seq-len 10^200", ("check", Q, "--gpu", "rtx-3090", "--workload", "full-finetune",
                                "--seq-len", "1" + "0" * 200), frozenset({2})),
    Case("5 --batch-size 10^200", ("check", Q, "--gpu", "rtx-3090", "--workload", "full-finetune",
                                   "--batch-size", "1" + "0" * 200), frozenset({2})),
    Case("5 309-digit <total>", ("detect", "--from", "a.xml", "--json"), frozenset({0}),
         {"a.xml": xml(_xml_gpu(total="9" * 309 + " MiB"))}, check=_no_infinity),
    Case("5 400-digit power limit", ("detect", "--from", "a.xml", "--json"), frozenset({0}),
         {"a.xml": xml(_xml_gpu(power=DIGITS400 + " W"))}, check=_no_infinity),
    Case("5 rig file ram_gib = 1e308", ("check", Q, "--rig", "r.toml"), frozenset({2}),
         {"r.toml": "[rig]\nram_gib = 1e308\n"}),
    # 6: bounded work
    Case("6 XML with 20,000 GPUs", ("detect", "--from", "a.xml"), frozenset({2}),
         {"a.xml": xml_many_gpus}),
    Case("6 60 MB XML", ("detect", "--from", "a.xml"), frozenset({2}),
         {"a.xml": xml_60mb}),
    Case("6 8 MiB TOML", ("check", Q, "--rig", "big.toml"), frozenset({2}), {"big.toml": big_toml}),
    Case("6 user catalog file of 25,000 tiny tables", ("gpus",), frozenset({2}), {"cfg/big.toml": lambda: many_tables("gpu")}),
    Case("6 catalog validate on it", ("catalog", "validate"), frozenset({1}), {"cfg/big.toml": lambda: many_tables("gpu")}),
    Case("6 rig file of 25,000 [[gpu]] tables", ("check", Q, "--rig", "r.toml"), frozenset({2}),
         {"r.toml": lambda: many_tables("gpu").replace('id = "g', 'id = "rtx-3090" # ')}),
    Case("6 plan with 64 owned H100s", ("plan", "deepseek-v3", "--have", "64xh100-sxm"), frozenset({0, 1})),
    Case("6 GGUF with a million tensors", ("check", "m.gguf", "--gpu", "rtx-3090"), frozenset({2}),
         {"m.gguf": lambda: gguf_many_tensors(1_000_000)}),
    Case("6 safetensors with a million tensors", ("check", "st/", "--gpu", "rtx-3090"), frozenset({2}),
         {"st/model.safetensors": safetensors_folder_file,
          "st/config.json": '{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}'}),
    # 7: files written
    Case("7 detect --save over its own --from", ("detect", "--from", "r.toml", "--save", "r.toml"), frozenset({2}),
         {"r.toml": '[[gpu]]\nid = "rtx-3090"\n'}, check=_unchanged("r.toml", '[[gpu]]\nid = "rtx-3090"\n')),
    Case("7 detect --save over a file that is not a rig file", ("detect", "--from", "r.toml", "--save", "notes.txt"),
         frozenset({2}), {"r.toml": '[[gpu]]\nid = "rtx-3090"\n', "notes.txt": "my notes\n"},
         check=_unchanged("notes.txt", "my notes\n")),
    Case("7 detect --save: newline in a name, PCIe 7.0 x32, free memory 0", ("detect", "--from", "a.xml", "--save", "o.toml"),
         frozenset({0}), {"a.xml": xml(_xml_gpu(name="NVIDIA GeForce RTX 3090&#10;[rig]", free="0 MiB").replace(
             "</gpu>", "<pci><pci_gpu_link_info><pcie_gen><max_link_gen>7</max_link_gen></pcie_gen><link_widths>"
                       "<max_link_width>32x</max_link_width></link_widths></pci_gpu_link_info></pci></gpu>"))},
         check=_reads_back("o.toml")),
    # 8: MIG
    Case("8 MIG A100 dump: saved rig is the largest instance", ("detect", "--from", "mig.xml", "--save", "mig.toml"),
         frozenset({0}), {"mig.xml": mig_dump},
         check=lambda d, _: "" if "memory_gib = 19.5" in (d / "mig.toml").read_text() or
         not (SHARED / "netdata_a100_sxm4_40gb_mig.xml").is_file() else "the MIG instance's memory was not used"),
    # 9: the cache
    *[Case(f"9 catalog cache: {label}", ("check", Q, "--gpu", "rtx-3090"), frozenset({0}),
           {"cache/PLANT": content}, stdout_has="FITS") for label, content in
      [("[]", "[]"), ("wrong shape", "[[1, 2]]"), ("edited", "EDIT"), ("a FIFO", FIFO)]],
    # 10: output
    Case("10 advisor gpus | true", (), frozenset({0}), shell='$A gpus | true; exit "${PIPESTATUS[0]}"'),
    Case("10 latin-1 stdout", ("gpus",), frozenset({0}), env={"PYTHONIOENCODING": "latin-1"}),
    Case("10 closed stdout", (), frozenset({0}), shell="$A gpus >&-"),
    Case("10 closed stderr keeps exit 2", (), frozenset({2}), shell="$A check nope 2>&-", one_line=False),
    # Killed by the signal before Python installs its handler is -2 (the shell's 130), and silent.
    *[Case(f"10 SIGINT {s * 1000:.0f} ms after the start", ("gpus",), frozenset({130, -2}), interrupt_after_s=s)
      for s in (0.01, 0.03, 0.06, 0.1)],
    # 11: validation gaps
    Case("11 native_quant = bogus: validate", ("catalog", "validate"), frozenset({1}),
         {"cfg/a.toml": '[[model]]\nid = "llama-3.1-8b"\nnative_quant = "bogus"\n'}, stdout_has="native_quant"),
    Case("11 native_quant = bogus: fit", ("fit", "--gpu", "rtx-3090"), frozenset({2}),
         {"cfg/a.toml": '[[model]]\nid = "llama-3.1-8b"\nnative_quant = "bogus"\n'}),
    Case("11 experts_active > experts", ("catalog", "validate"), frozenset({1}),
         {"cfg/a.toml": '[[model]]\nid = "qwen3-30b-a3b"\nexperts_active = 500\n'}, stdout_has="experts_active"),
    Case("11 one id in two user files", ("catalog", "validate"), frozenset({1}),
         {"cfg/a.toml": '[[gpu]]\nid = "rtx-3090"\npower_w = 300\n',
          "cfg/b.toml": '[[gpu]]\nid = "rtx-3090"\npower_w = 280\n'}, stdout_has="also defined"),
    Case("11 NVLink pair of RTX 4090s", ("check", Q, "--rig", "r.toml"), frozenset({2}),
         {"r.toml": '[rig]\nnvlink = [[0, 1]]\n[[gpu]]\nid = "rtx-4090"\ncount = 2\n'}, stderr_has="no NVLink"),
    Case("11 count = 1.5", ("check", Q, "--rig", "r.toml"), frozenset({2}), {"r.toml": '[[gpu]]\nid = "rtx-3090"\ncount = 1.5\n'}),
    Case("11 unknown quant names the ids", ("check", Q, "--gpu", "rtx-3090", "--quant", "bogus"), frozenset({2}),
         stderr_has="Q4_K_M"),
    # 12: what reaches the terminal, and other formats
    Case("12 escape sequences in rig names", ("check", Q, "--rig", "r.toml"), frozenset({0, 1}),
         {"r.toml": '[rig]\ncpu = "\\u001b]0;pwned\\u0007"\n[[gpu]]\nid = "rtx-3090"\nname = "a\\u001b[2Jb\\nc"\n'},
         check=_no_escape),
    Case("12 escape sequence in a model file name", ("check", "\x1b[2J.gguf", "--gpu", "rtx-3090"), frozenset({2}),
         {"\x1b[2J.gguf": b"GGUF"}),
    Case("12 newline in an argument", ("check", "llama\nx", "--gpu", "rtx-3090"), frozenset({2})),
    Case("12 UTF-8 BOM XML", ("detect", "--from", "a.xml"), frozenset({0}), {"a.xml": b"\xef\xbb\xbf" + xml(_xml_gpu()).encode()},
         stdout_has="rtx-3090"),
    Case("12 UTF-16 XML (PowerShell)", ("detect", "--from", "a.xml"), frozenset({0}),
         {"a.xml": xml(_xml_gpu()).replace('?>', 'encoding="UTF-16" ?>').encode("utf-16")}, stdout_has="rtx-3090"),
    Case("12 nvidia-smi -q text", ("detect", "--from", "q.txt"), frozenset({2}),
         {"q.txt": "\n==============NVSMI LOG==============\n\nTimestamp : Mon\nDriver Version : 550.54\n"},
         stderr_has="nvidia-smi -q"),
    Case("12 nvidia-smi topo -m text", ("check", Q, "--rig", "topo.txt"), frozenset({2}),
         {"topo.txt": "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-15\nGPU1\tNV4\t X \t0-15\n\nLegend:\n"},
         stderr_has="topo -m"),
]


# -- issue 30: hostile servers and drivers -----------------------------------------------------------------
#
# The network cases read from a hostile Hub on 127.0.0.1 (tests/hubserver.py), started once in this
# process by `hub_url()`: `{hub}` in a case's argv or env is its address. Its bodies are generated as
# they are sent (a 60 MB listing costs this process nothing). `{dir}` is the case's working directory.

LIMIT30_S = 10.0
"""Issue 30's bound: each reproduction answers within 10 s (a stall is given up at 6 s)."""
BOMB_MIB = 2048
"""The gzip bomb's decoded size: 2 GiB from about 2 MB sent."""
SHA = "0123456789abcdef0123456789abcdef01234567"
TINY_CFG = json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                       "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
                       "num_key_value_heads": 4, "vocab_size": 8, "max_position_embeddings": 128}).encode()
HUB_ENV = {"HF_ENDPOINT": "{hub}", "ADVISOR_OLLAMA_REGISTRY": "{hub}", "HF_HOME": "{dir}/hf",
           "OLLAMA_MODELS": "{dir}/ollama", "HF_HUB_DISABLE_TELEMETRY": "1"}
_HUB: list = []


def _chunked(head: bytes, item: Callable[[int], bytes], tail: bytes, total: int) -> Callable[[], object]:
    """A body of `head`, then `item(i)` joined by commas until about `total` bytes, then `tail`,
    sent in chunks of 10,000 items (never held whole)."""
    def chunks():
        yield head
        size, i = len(head), 0
        while size < total:
            part = b",".join(item(k) for k in range(i, i + 10_000))
            yield (b"," if i else b"") + part
            size += len(part) + 1
            i += 10_000
        yield tail
    return chunks


def listing_body(total: int) -> Callable[[], object]:
    """A Hub listing of ~`total` bytes of tiny GGUF files (the shape huggingface_hub parses)."""
    return _chunked(b'{"id":"big/Listing","sha":"' + SHA.encode() + b'","siblings":[',
                    lambda i: b'{"rfilename":"f%d.gguf","size":1}' % i, b"]}", total)


def index_body(total: int, shard: bytes = b"model.safetensors") -> Callable[[], object]:
    """A safetensors index of ~`total` bytes of tiny weight_map entries."""
    return _chunked(b'{"metadata":{},"weight_map":{', lambda i: b'"t%d":"%s"' % (i, shard), b"}}", total)


def index_file(total: int) -> Callable[[], object]:
    body = index_body(total)
    return lambda: body()


def largest_index() -> object:
    """An index just inside both bounds (40 MiB, 400,000 tensors): 390,000 real-looking names, each
    ~100 bytes as written with json.dump(indent=4): the most a parse may cost."""
    def chunks():
        yield b'{"metadata": {"total_size": 1}, "weight_map": {'
        for start in range(0, 390_000, 10_000):
            yield ("," if start else "").encode() + ",".join(
                f'\n    "model.layers.{i}.mlp.experts.{i % 384}.{"x" * 27}.weight_packed": "model.safetensors"'
                for i in range(start, start + 10_000)).encode()
        yield b"\n}}"
    return chunks()


def hub_url() -> str:
    """The hostile Hub's address, started on first use (a daemon thread of this process)."""
    if _HUB:
        return _HUB[0]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from hubserver import Answer, Hub, Repo, Server, drip, gzip_bomb

    hub = Hub()
    st_tiny = safetensors_many_tensors(1)
    gz = {"content-type": "application/json", "content-encoding": "gzip"}
    hub.raw["/api/models/bomb/Listing"] = Answer(200, gz, gzip_bomb(BOMB_MIB))
    hub.raw["/api/models/big/Listing"] = Answer(200, {"content-type": "application/json"}, listing_body(60_000_000))
    hub.raw["/api/models/tiny/Listing"] = Answer(200, {"content-type": "application/json"},
                                                 _chunked(b'{"sha":"' + SHA.encode() + b'","siblings":[',
                                                          lambda i: b"{}", b"]}", 15_000_000))
    hub.raw["/api/models/bad/Sha"] = Answer(200, {"content-type": "application/json"}, json.dumps(
        {"sha": 5, "siblings": [{"rfilename": "config.json", "size": 10}]}).encode())
    hub.raw["/api/models/bad/Size"] = Answer(200, {"content-type": "application/json"}, json.dumps(
        {"sha": SHA, "siblings": [{"rfilename": "x-Q4_K_M.gguf", "size": "big", "lfs": {"size": [1]}}]}).encode())
    hub.raw["/api/models/drip/Model"] = Answer(200, {"content-type": "application/json"}, drip(5.0))
    # a 404 (the Hub answers 401 RepoNotFound to an anonymous caller), then searches that never end
    hub.raw["/api/models"] = Answer(200, {"content-type": "application/json",
                                          "link": '<{url}/api/models?cursor=next>; rel="next"'}, b"[]")
    for repo, index in (("big/Index", None), ("tiny/Index", None), ("empty/Map", b'{"weight_map": {}}')):
        hub.repos[repo] = Repo(files={"config.json": TINY_CFG, "model.safetensors": st_tiny,
                                      "model.safetensors.index.json": index or b"{}"})
    hub.raw[f"/big/Index/resolve/{SHA}/model.safetensors.index.json"] = Answer(200, {}, index_body(60_000_000))
    hub.raw[f"/tiny/Index/resolve/{SHA}/model.safetensors.index.json"] = Answer(200, {}, index_body(40_000_000, b"m"))

    def slow_then_cut():  # 16 KiB every 0.1 s for 1.5 s of a file said to be 10 MB, then the connection closes
        for _ in range(15):
            time.sleep(0.1)
            yield b"GGUF" + bytes(16380)
    hub.raw["/files/slow-Q4_K_M.gguf"] = Answer(200, {"content-length": str(10_000_000)}, slow_then_cut)
    server = Server(hub)
    _HUB.extend([server.__enter__(), server, hub])
    return _HUB[0]


FAKE_NVML = '''"""A broken NVML binding (bench/hostile.py, issue 30): {what}."""
class NVMLError(Exception):
    value = 999
class NotFound(NVMLError):
    value = 6
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return {driver}
def nvmlDeviceGetCount(): return {count}
def nvmlDeviceGetHandleByIndex(i):
    if i > 0: raise NVMLError()
    return "h"
def nvmlDeviceGetName(h): return {name}
class _Memory:
    total, free, reserved = {memory}
def nvmlDeviceGetMemoryInfo(h, version=None):
    if h != "h": raise NotFound()
    return _Memory()
nvmlMemory_v2 = 2
def nvmlDeviceGetCudaComputeCapability(h): return {cc}
def nvmlDeviceGetEnforcedPowerLimit(h): return {power}
def nvmlDeviceGetMigMode(h): return {mig}
def nvmlDeviceGetMaxMigDeviceCount(h): return 7
def nvmlDeviceGetMigDeviceHandleByIndex(h, k): raise NotFound()
def nvmlDeviceGetMaxPcieLinkGeneration(h): return {gen}
def nvmlDeviceGetMaxPcieLinkWidth(h): return {width}
def nvmlDeviceGetFieldValues(h, ids):
    {fields}
'''
NVML_OK = dict(driver='"550.54"', count=1, name='"NVIDIA GeForce RTX 3090"',
               memory="24 * 1024**3, 23 * 1024**3, 300 * 1024**2", cc="(8, 6)", power=350_000, mig="(0, 0)",
               gen=4, width=16, fields="raise NVMLError()")


def fake_nvml(what: str, **changes: object) -> str:
    return FAKE_NVML.format(what=what, **{**NVML_OK, **changes})


NVML_WRONG_TYPES = fake_nvml("every reading of the wrong type", driver=550, name=3090, memory='"24GiB", -5, None',
                             cc="8.6", power='"350000"', mig=1, gen='"4"', width=2**70, fields="return 7")
NVML_COUNT_MAX = fake_nvml("a device count of 2^64-1", count=2**64 - 1)
NVML_COUNT_TEXT = fake_nvml("a device count that is text", count='"1"')
NVML_NAN = fake_nvml("NaN readings", memory='float("nan"), float("inf"), float("nan")', power='float("nan")',
                     cc='(float("nan"), 6)', gen='float("nan")')
NVML_MIG_EMPTY = fake_nvml("an A100 in MIG mode with no readable instance", name='"NVIDIA A100-SXM4-80GB"',
                           memory="80 * 1024**3, 79 * 1024**3, 500 * 1024**2", cc="(8, 0)", mig="(1, 1)")
NVML_ENV = {"PYTHONPATH": "{dir}/fake"}

RIG_OURS = ('# advisor rig file: edit freely; `advisor check MODEL --rig THIS_FILE` reads it.\n[rig]\n'
            'ram_gib = 64.0\nsource = "nvml"\n\n[[gpu]]\nid = "rtx-3090"\n')
RIG_HAND = '# my rig\n[[gpu]]\nid = "rtx-3090"\n'
XML_3090 = xml(_xml_gpu())


def _mode(name: str, mode: int) -> Callable[[Path], None]:
    return lambda d: os.chmod(d / name, mode)


def _link(name: str, target: str) -> Callable[[Path], None]:
    return lambda d: os.symlink(target, d / name)


def _all(*checks: Callable[[Path, str], str]) -> Callable[[Path, str], str]:
    return lambda d, out: "; ".join(p for p in (c(d, out) for c in checks) if p)


def _mode_is(name: str, mode: int) -> Callable[[Path, str], str]:
    def check(d: Path, _: str) -> str:
        got = os.stat(d / name).st_mode & 0o777
        return "" if got == mode else f"{name} is now {got:o}, was {mode:o}"
    return check


def _still_link(name: str) -> Callable[[Path, str], str]:
    return lambda d, _: "" if os.path.islink(d / name) else f"{name} is no longer a symbolic link"


def _finding(code: str) -> Callable[[Path, str], str]:
    def check(_: Path, out: str) -> str:
        try:
            codes = [f["code"] for f in json.loads(out)["findings"]]
        except (ValueError, KeyError, TypeError):
            return "no findings in the JSON"
        return "" if code in codes else f"no {code} finding ({', '.join(codes)})"
    return check


def _case30(name: str, argv: tuple[str, ...], codes: set[int], **kw) -> Case:
    return Case("30." + name, argv, frozenset(codes), limit_s=LIMIT30_S, **kw)


CASES += [
    # 1: limits on decoded bytes
    *[_case30(f"1 gzip listing of {BOMB_MIB // 1024} GiB: {label}", argv, {2}, env=HUB_ENV) for label, argv in [
        ("a plain reference", ("check", "bomb/Listing", "--gpu", "rtx-3090")),
        ("catalog add", ("catalog", "add", "bomb/Listing")),
        ("--cmd -hf", ("check", "--cmd", "llama-server -hf bomb/Listing", "--gpu", "rtx-3090"))]],
    # 2: parsed size
    _case30("2 60 MB listing", ("check", "big/Listing", "--gpu", "rtx-3090"), {2}, env=HUB_ENV),
    _case30("2 15 MB listing of tiny values", ("check", "tiny/Listing", "--gpu", "rtx-3090"), {2}, env=HUB_ENV),
    _case30("2 60 MB remote safetensors index", ("check", "big/Index", "--gpu", "rtx-3090"), {2}, env=HUB_ENV),
    _case30("2 40 MB remote index of 1.6M tiny entries", ("check", "tiny/Index", "--gpu", "rtx-3090"), {2},
            env=HUB_ENV),
    _case30("2 90 MB local safetensors index", ("check", "m/", "--gpu", "rtx-3090"), {2},
            files={"m/config.json": TINY_CFG, "m/model.safetensors": lambda: safetensors_many_tensors(1),
                   "m/model.safetensors.index.json": index_file(90_000_000)}),
    _case30("2 40 MB local index of tiny entries", ("check", "m/", "--gpu", "rtx-3090"), {2},
            files={"m/config.json": TINY_CFG, "m/model.safetensors": lambda: safetensors_many_tensors(1),
                   "m/model.safetensors.index.json": index_file(40_000_000)}),
    _case30("2 the largest local index accepted, parsed", ("check", "m/", "--gpu", "rtx-3090"), {2},
            files={"m/config.json": TINY_CFG, "m/model.safetensors": lambda: safetensors_many_tensors(1),
                   "m/model.safetensors.index.json": largest_index},
            stderr_has="390000 tensors here that the file lacks", check=_unchanged("m/config.json", TINY_CFG.decode())),
    # 3: suffixed numbers
    *[_case30(f"3 {' '.join(a)}", ("check", *a, "--gpu", "rtx-3090"), {2}) for a in [
        ("qwen3-32b", "--ctx", "1e308k"), ("qwen3-32b", "--ctx", ".e5k"), ("qwen3-32b", "--prompt-tokens", "1e999k"),
        ("qwen3-32b", "--concurrency", "e5k"),
        ("qwen3-32b", "--cmd", "llama-server -c .e5k"), ("qwen3-32b", "--cmd", "llama-server -ub 1e308k"), ("qwen3-32b", "--cmd", "llama-server -np 1e308k"),
        ("qwen3-32b", "--cmd", "vllm serve Qwen/Qwen3-32B --max-model-len .e5k")]],
    # 4: every Hub field checked
    _case30("4 safetensors index with an empty weight_map", ("check", "empty/Map", "--gpu", "rtx-3090"), {2},
            env=HUB_ENV, stderr_has="empty weight_map"),
    _case30("4 listing whose sha is a number", ("check", "bad/Sha", "--gpu", "rtx-3090"), {2}, env=HUB_ENV,
            stderr_has="not a commit id"),
    _case30("4 listing whose sizes are not numbers", ("check", "bad/Size", "--gpu", "rtx-3090"), {2}, env=HUB_ENV),
    # 5: a deadline and a bounded page walk
    _case30("5 404, then an endless page chain of searches", ("check", "gone/Model", "--gpu", "rtx-3090"), {2},
            env=HUB_ENV, stderr_has="no such model"),
    _case30("5 a byte every 5 s", ("check", "drip/Model", "--gpu", "rtx-3090"), {2}, env=HUB_ENV),
    # 6: progress, then a failure: one line
    _case30("6 slow read cut short", ("check", "{hub}/files/slow-Q4_K_M.gguf", "--gpu", "rtx-3090"), {2},
            env=HUB_ENV),
    # 7: NVML readings validated
    *[_case30(f"7 NVML: {label}", argv, codes, files={"fake/pynvml.py": src}, env=NVML_ENV, check=_no_infinity)
      for label, argv, codes, src in [
          ("wrong types", ("detect", "--json"), {0}, NVML_WRONG_TYPES),
          ("wrong types, check --json", ("check", "llama-3.1-8b", "--json"), {0, 1}, NVML_WRONG_TYPES),
          ("device count 2^64-1", ("detect", "--json"), {0}, NVML_COUNT_MAX),
          ("device count as text", ("detect", "--json"), {0}, NVML_COUNT_TEXT),
          ("NaN readings", ("detect", "--json"), {0}, NVML_NAN),
          ("NaN readings, check --json", ("check", "llama-3.1-8b", "--json"), {0, 1}, NVML_NAN)]],
    # 8: files written keep their mode; symlinks, read-only and others' files need --force
    _case30("8 detect --save over a read-only rig file", ("detect", "--from", "a.xml", "--save", "r.toml"), {2},
            files={"a.xml": XML_3090, "r.toml": RIG_OURS}, setup=_mode("r.toml", 0o444),
            check=_all(_unchanged("r.toml", RIG_OURS), _mode_is("r.toml", 0o444))),
    _case30("8 detect --save over a 0600 rig file keeps 0600", ("detect", "--from", "a.xml", "--save", "r.toml"), {0},
            files={"a.xml": XML_3090, "r.toml": RIG_OURS}, setup=_mode("r.toml", 0o600),
            check=_all(_mode_is("r.toml", 0o600), _reads_back("r.toml"))),
    _case30("8 detect --save over a symlinked rig file", ("detect", "--from", "a.xml", "--save", "r.toml"), {2},
            files={"a.xml": XML_3090, "t.toml": RIG_OURS}, setup=_link("r.toml", "t.toml"),
            check=_all(_still_link("r.toml"), _unchanged("t.toml", RIG_OURS))),
    _case30("8 detect --save over a hand-written rig file", ("detect", "--from", "a.xml", "--save", "r.toml"), {2},
            files={"a.xml": XML_3090, "r.toml": RIG_HAND}, check=_unchanged("r.toml", RIG_HAND)),
    _case30("8 detect --save --force over a hand-written rig file",
            ("detect", "--from", "a.xml", "--save", "r.toml", "--force"), {0},
            files={"a.xml": XML_3090, "r.toml": RIG_HAND}, check=_reads_back("r.toml")),
    *[_case30(f"8 the app's {what} over a dangling symlink asks first", (), {0}, shell=f'"$PY" "$BENCH" --app {what}',
              setup=_link(name, "gone/elsewhere"), check=_still_link(name))
      for what, name in (("export", "advisor-llama-3.1-8b.md"), ("save", "my-rig.toml"))],
    _case30("9 MIG A100 without an instance: RIG001 in the app", (), {0}, shell='"$PY" "$BENCH" --app mig'),
    # 9: RIG001 for a MIG card without a readable instance
    _case30("9 MIG A100 without an instance: RIG001 in text", ("check", "llama-3.1-8b"), {0, 1},
            files={"fake/pynvml.py": NVML_MIG_EMPTY}, env=NVML_ENV, stdout_has="RIG001"),
    _case30("9 MIG A100 without an instance: RIG001 in JSON", ("check", "llama-3.1-8b", "--json"), {0, 1},
            files={"fake/pynvml.py": NVML_MIG_EMPTY}, env=NVML_ENV, check=_finding("RIG001")),
]


def _app_case(what: str) -> int:
    """The app's export (`e`) or rig save (`r`, a file name, ctrl+s) where a dangling symlink holds the
    name: it must ask (ConfirmOverwrite) before writing; escape then leaves the link as it was. Exit 0
    when it asked, else 1 with one line. `mig`: the app on a probe that found only an A100 in MIG mode
    without an instance must show RIG001 among its findings."""
    import asyncio

    from advisor.catalog.load import load_catalog
    from advisor.probe.types import Detection
    from advisor.tui.app import AdvisorApp
    from advisor.tui.export import ConfirmOverwrite
    from advisor.tui.screens.pickers import preset_rig

    catalog = load_catalog()
    if what == "mig":
        return _app_mig(catalog)
    app = AdvisorApp(catalog, model="llama-3.1-8b", rig=preset_rig(catalog, "1x-rtx-4090"),
                     probe=lambda: Detection(source="none"))

    async def drive() -> bool:
        async with app.run_test(size=(100, 30)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            if what == "export":
                await pilot.press("e")
            else:
                await pilot.press("r")
                await pilot.pause()
                app.screen.query_one("#save-path").value = "my-rig.toml"
                await pilot.press("ctrl+s")
            await pilot.pause()
            asked = isinstance(app.screen, ConfirmOverwrite)
            if asked:
                await pilot.press("escape")
                await pilot.pause()
            return asked

    if asyncio.run(drive()):
        return 0
    print(f"advisor app: the {what} wrote over a dangling symlink without asking", file=sys.stderr)
    return 1


def _app_mig(catalog) -> int:  # noqa: ANN001
    import asyncio

    from advisor.probe.types import DetectedGpu, Detection
    from advisor.tui.app import AdvisorApp, MainScreen

    a100 = DetectedGpu(index=0, name="NVIDIA A100-SXM4-80GB", vram_bytes=80 * 1024**3, mig=True)
    app = AdvisorApp(catalog, model="llama-3.1-8b", probe=lambda: Detection(source="nvml", gpus=(a100,)))

    async def drive() -> str:
        async with app.run_test(size=(100, 30)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            screen = app.get_default_screen()
            assert isinstance(screen, MainScreen)
            findings = [f.code for f in screen.report.findings] if screen.report else []
            return "" if "RIG001" in findings else f"no RIG001 among the app's findings ({', '.join(findings)})"

    problem = asyncio.run(drive())
    if problem:
        print(f"advisor app: {problem}", file=sys.stderr)
    return 1 if problem else 0


def advisor_cmd() -> list[str]:
    """The console script users run (beside this interpreter), else `python -m advisor`."""
    script = Path(sys.executable).with_name("advisor")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "advisor"]


def _env(d: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADVISOR_") and k != "PYTHONIOENCODING"}
    env.update(HOME=str(d / "home"), ADVISOR_CONFIG_DIR=str(d / "cfg"), ADVISOR_CACHE_DIR=str(d / "cache"),
               NO_COLOR="1", PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    for key, value in (extra or {}).items():
        value = _placed(value, d)
        env[key] = value + os.pathsep + env[key] if key == "PYTHONPATH" else value
    return env


def _placed(text: str, d: Path) -> str:
    """`{hub}` and `{dir}` in a case's argument or variable: the hostile Hub's address, the working directory."""
    if "{hub}" in text:
        text = text.replace("{hub}", hub_url())
    return text.replace("{dir}", str(d))


def _prepare(case: Case, d: Path) -> None:
    for sub in ("home", "cfg", "cache"):
        (d / sub).mkdir(exist_ok=True)
    for name, content in case.files.items():
        content = content() if callable(content) else content
        if name.startswith("cache/"):
            _plant_cache(d, content)
            continue
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content == FIFO:
            os.mkfifo(path)
        elif content == LOOP:
            os.symlink(path.name + ".2", path)
            os.symlink(path.name, str(path) + ".2")
        elif isinstance(content, (bytes, str)):
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
        else:  # chunks: a large file written as it is made
            with open(path, "wb") as f:
                for chunk in content:
                    f.write(chunk)
    if case.setup is not None:
        case.setup(d)


def _plant_cache(d: Path, content: bytes | str) -> None:
    """Build the real cache once, then replace (or edit) it with `content`."""
    subprocess.run([*advisor_cmd(), "gpus"], cwd=d, env=_env(d), capture_output=True, timeout=HANG_S)
    for cached in (d / "cache").glob("catalog-*.json"):
        if content == "EDIT":  # keep the checksum line, change a number in the data
            text = cached.read_text()
            cached.write_text(text.replace('"vram_gib": 24.0', '"vram_gib": 2.0', 1))
        elif content == FIFO:
            cached.unlink()
            os.mkfifo(cached)
        else:
            cached.write_text(content if isinstance(content, str) else content.decode())


@dataclass
class Outcome:
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    peak_mib: float
    problems: list[str]


def run_case(case: Case, d: Path, prepare: bool = True) -> Outcome:
    """Run one case in directory `d` (prepared here unless `prepare` is off); its problems in words."""
    if prepare:
        _prepare(case, d)
    env = _env(d, case.env)
    if case.shell:
        cmd = ["bash", "-c", case.shell.replace("$A", " ".join(advisor_cmd())).replace("$PY", sys.executable)
               .replace("$BENCH", str(Path(__file__).resolve()))]
    else:
        cmd = [*advisor_cmd(), *(_placed(a, d) for a in case.argv)]
    start = time.perf_counter()
    # Ctrl-C as a terminal delivers it: a shell that runs its jobs in the background starts them with SIGINT
    # ignored (POSIX, non-interactive `&`), and a signal that lands before the advisor's own handler would vanish
    ctrl_c = (lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) if case.interrupt_after_s is not None else None
    proc = subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, preexec_fn=ctrl_c)
    if case.interrupt_after_s is not None:
        time.sleep(case.interrupt_after_s)
        proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return Outcome(None, "", "", HANG_S, _peak_mib(proc), [f"hung: still running after {HANG_S:g} s"])
    seconds = time.perf_counter() - start
    peak = _peak_mib(proc)
    stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    problems = []
    if proc.returncode not in case.codes and not ("Traceback" in stderr and _before_advisor(stderr)):
        problems.append(f"exit {proc.returncode}, expected {sorted(case.codes)}")
    if "Traceback" in stderr and not _before_advisor(stderr):
        problems.append("a traceback on stderr")
    if proc.returncode == 2 and case.one_line and stderr.count("\n") != 1:
        problems.append(f"{stderr.count(chr(10))} lines on stderr, expected one")
    if case.stdout_has and case.stdout_has not in stdout:
        problems.append(f"stdout lacks {case.stdout_has!r}")
    if case.stderr_has and case.stderr_has not in stderr:
        problems.append(f"stderr lacks {case.stderr_has!r}")
    if case.check is not None:
        problem = case.check(d, stdout)
        if problem:
            problems.append(problem)
    return Outcome(proc.returncode, stdout, stderr, seconds, peak, problems)


def _before_advisor(stderr: str) -> bool:
    """A KeyboardInterrupt traceback raised inside the interpreter's own start-up (site, the console
    script's `import re`, the import machinery loading `advisor/_start.py`), before its first lines
    could install a handler: no program can answer a signal there, so it is reported, not failed."""
    frames = [line for line in stderr.splitlines() if line.lstrip().startswith("File ")]
    ours = [f for f in frames[1:] if "/advisor/" in f and not f.rstrip().endswith("in <module>")]
    return stderr.rstrip().endswith("KeyboardInterrupt") and not ours and \
        not any("/advisor/" in f and "_start.py" not in f and "__init__.py" not in f for f in frames[1:])


def _peak_mib(proc: subprocess.Popen) -> float:
    """The child's peak resident set: ru_maxrss of the children reaped so far (KiB on Linux).
    Approximate for shell cases (the largest of the shell and its children)."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main(argv: list[str]) -> int:
    wanted = [c for c in CASES if not argv or any(a.lower() in c.name.lower() for a in argv)]
    if any("{hub}" in v for c in wanted for v in (*c.argv, *c.env.values())):
        hub_url()  # started here, before the cases fork: each case then only connects to it
    failures = 0
    print(f"{'case':<62} {'exit':>4} {'time':>7} {'peak':>9}  verdict")
    for case in wanted:
        d = Path(tempfile.mkdtemp(prefix="advisor-hostile-"))
        try:
            # Files are made in a throw-away process, and each case runs in a fresh fork of this small
            # process, so the peak memory read from its children is the advisor's alone.
            maker = os.fork()
            if maker == 0:
                _prepare(case, d)
                os._exit(0)
            os.waitpid(maker, 0)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child runs the case and reports back
                os.close(r)
                o = run_case(case, d, prepare=False)
                note = " (interrupted inside Python's own start-up)" if "Traceback" in o.stderr else ""
                os.write(w, json.dumps([o.code, o.seconds, o.peak_mib, o.problems, o.stderr[-300:], note]).encode())
                os._exit(0)
            os.close(w)
            with os.fdopen(r) as f:
                code, seconds, peak, problems, stderr, note = json.loads(
                    f.read() or '[null, 0, 0, ["no report"], "", ""]')
            os.waitpid(pid, 0)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        if seconds > case.limit_s:
            problems.append(f"took {seconds:.2f} s (limit {case.limit_s:g})")
        if peak > LIMIT_MIB:
            problems.append(f"peak memory {peak:.0f} MiB (limit {LIMIT_MIB})")
        failures += bool(problems)
        verdict = ("ok" + note) if not problems else "FAIL: " + "; ".join(problems)
        print(f"{case.name[:62]:<62} {code if code is not None else '-':>4} {seconds:>6.2f}s {peak:>6.0f} MiB  {verdict}")
        if problems and stderr:
            print(f"{'':<62} stderr: {stderr.strip()[-200:]}")
    print(f"\n{len(wanted) - failures} of {len(wanted)} cases within their time ({LIMIT_S:g} s; issue 30's "
          f"{LIMIT30_S:g} s) and {LIMIT_MIB} MiB")
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--app"]:
        sys.exit(_app_case(sys.argv[2]))
    sys.exit(main(sys.argv[1:]))
