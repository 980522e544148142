"""BOUNDS (advisor/catalog/load.py): each key written once, and a field name shared by different records bounded by
the record it is in. `max_gpus` was written twice, so the runtime's bound (0: any number) silently replaced an
NVLink domain's, and an NVLink spec joining 0 GPUs passed validation (issue 25)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from advisor.catalog.load import out_of_bounds, validate_entry
from advisor.catalog.types import NvlinkSpec

LOAD = Path(__file__).resolve().parents[1] / "advisor" / "catalog" / "load.py"


def test_every_bounds_key_is_written_once():
    tree = ast.parse(LOAD.read_text())
    table = next(node.value for node in ast.walk(tree) if isinstance(node, ast.AnnAssign)
                 and getattr(node.target, "id", "") == "BOUNDS")
    keys = [k.value for k in table.keys]
    assert sorted(k for k in set(keys) if keys.count(k) > 1) == []


def test_an_nvlink_domain_of_no_gpus_is_refused():
    with pytest.raises(ValueError, match="max_gpus = 0 is out of range"):
        validate_entry(NvlinkSpec, {"generation": 3, "gb_s": 112.5, "max_gpus": 0})
    assert validate_entry(NvlinkSpec, {"generation": 3, "gb_s": 112.5, "max_gpus": 2}).max_gpus == 2


def test_a_runtime_may_take_any_number_of_gpus(catalog):
    rt = catalog.runtimes["llama.cpp"]
    assert rt.max_gpus == 0  # the built-in entry: any number
    assert out_of_bounds(rt) == []
