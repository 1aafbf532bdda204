"""Every Python example in README.md runs as written (in a scratch folder)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[tuple[str, str]]:
    text = README.read_text(encoding="utf-8")
    blocks, section = [], "top"
    for match in re.finditer(r"^## ([^\n]+)$|^```python\n(.*?)^```", text, flags=re.M | re.S):
        if match.group(1):
            section = match.group(1).strip()
        else:
            blocks.append((section, match.group(2)))
    return blocks


BLOCKS = _python_blocks()


def test_readme_has_an_example_per_capability():
    sections = {s for s, _ in BLOCKS}
    for wanted in ("Responses", "Pairwise counts and spectral estimation", "Mechanisms",
                   "Privacy accounting and the budget ledger",
                   "Private spectral estimation and noisy count release", "2PNO Gibbs sampler",
                   "2PL Metropolis–Hastings sampler and ideal points", "ε sweeps and reports"):
        assert wanted in sections, f"README section {wanted!r} has no python example"


@pytest.mark.parametrize("section, code", BLOCKS, ids=[f"{i}-{s[:30]}" for i, (s, _) in enumerate(BLOCKS)])
def test_readme_example_runs(section, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__readme__"}
    exec(compile(code, f"README.md [{section}]", "exec"), namespace)
