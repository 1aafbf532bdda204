"""Every dotted ``privirt.<module>[.<name>]`` path that README.md and docs/ cite resolves
(docs/privacy.md cited privirt.ledger.spends_since and privirt.responses.private_responses)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: dotted names in the docs that are not import paths: the façade's placeholder and the seeded
#: generator's key-derivation label (docs/mechanisms.md)
_NOT_PATHS = {"privirt.X", "privirt.mechanisms.rng"}


def _resolves(path: str) -> bool:
    parts = path.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ModuleNotFoundError as exc:
            if exc.name is not None and not exc.name.startswith("privirt"):
                return True  # an optional extra that is not installed: not the docs' fault
            continue
        break
    else:
        return False
    for name in parts[k:]:
        if not hasattr(obj, name):
            return False
        obj = getattr(obj, name)
    return True


def test_the_privirt_paths_the_docs_cite_resolve():
    bad = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for m in re.finditer(r"(?<![\w/.])privirt(?:\.[A-Za-z_]\w*)+", line):
                if m.group(0) not in _NOT_PATHS and not _resolves(m.group(0)):
                    bad.append(f"{doc.relative_to(ROOT)}:{n}: {m.group(0)}")
    assert not bad, bad
