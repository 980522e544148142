"""The rulebook is typed: frozen records validated like the catalog (unknown keys rejected, ranges checked)."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from advisor.catalog.load import validate_entry
from advisor.catalog.rulebook import Rulebook, build_rulebook, rulebook_to_dict


def test_the_shipped_rulebook_validates_and_round_trips(catalog):
    raw = rulebook_to_dict(catalog.rules)
    assert validate_entry(Rulebook, raw) == catalog.rules
    assert build_rulebook(raw) == catalog.rules


def test_records_are_frozen(catalog):
    with pytest.raises(dataclasses.FrozenInstanceError):
        catalog.rules.memory.host.os_reserve_gib = 0.0  # type: ignore[misc]


@pytest.mark.parametrize("path,value,words", [
    (("speed", "decode", "per_token_us_typo"), 1.0, "per_token_us_typo"),      # unknown key
    (("interconnect", "pcie", "efficiency"), 1.7, "efficiency = 1.7"),         # out of range
    (("memory", "host", "os_reserve_gib"), "four", "os_reserve_gib"),          # wrong type
])
def test_a_bad_rule_is_named(catalog, path, value, words):
    raw = copy.deepcopy(rulebook_to_dict(catalog.rules))
    table = raw
    for key in path[:-1]:
        table = table[key]
    table[path[-1]] = value
    with pytest.raises(Exception) as err:
        validate_entry(Rulebook, raw)
    assert words in str(err.value)
