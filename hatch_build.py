"""Build hook: ship the built-in catalog pre-parsed as JSON inside the wheel.

Parsing the TOML is most of a cold start; a wheel carries `advisor/_data/catalog.json` made from the
same files at build time, so the first `advisor check --json` after an install is as fast as the
rest and nothing needs to be written at run time. Editable installs read the TOML (and cache it).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        root = Path(self.root)
        out = []
        for folder, is_rules in (("hardware_db", False), ("rules", True)):
            for path in sorted((root / folder).glob("*.toml")):
                out.append([path.stem, is_rules, tomllib.loads(path.read_text(encoding="utf-8"))])
        tmp = Path(tempfile.mkdtemp()) / "catalog.json"
        tmp.write_text(json.dumps(out), encoding="utf-8")
        build_data["force_include"][str(tmp)] = "advisor/_data/catalog.json"
