"""Shared fixtures: the built-in catalog, and a user config dir that is always empty unless a test
fills it (so nobody's own catalog files change what the tests see)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(autouse=True)
def _isolated_user_dir(tmp_path_factory, monkeypatch):
    path = tmp_path_factory.mktemp("advisor-config")
    monkeypatch.setenv("ADVISOR_CONFIG_DIR", str(path))
    from advisor.catalog import load

    load._load_catalog.cache_clear()
    yield path
    load._load_catalog.cache_clear()


DEAD_ENDPOINT = "http://127.0.0.1:9"
"""A local port nobody listens on: a remote reference in a test fails at once, never reaching the Hub."""


@pytest.fixture(autouse=True)
def _no_live_network(monkeypatch):
    """Remote references never reach the real Hub or Ollama registry from the tests (test_remote.py
    points them at its own local server)."""
    monkeypatch.setenv("HF_ENDPOINT", DEAD_ENDPOINT)
    monkeypatch.setenv("ADVISOR_OLLAMA_REGISTRY", DEAD_ENDPOINT)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


@pytest.fixture(scope="session")
def catalog():
    from advisor.catalog.load import load_catalog

    return load_catalog(user=False)


@pytest.fixture
def run_cli(tmp_path):
    """Run `python -m advisor ARGS` in a child with an empty config dir; returns CompletedProcess."""

    def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        child_env = {**os.environ, "ADVISOR_CONFIG_DIR": str(tmp_path / "cfg"), "NO_COLOR": "1", **(env or {})}
        return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True,
                              env=child_env, timeout=120, cwd=tmp_path)

    return run
