"""``privirt serve`` where the serve extra (FastAPI, uvicorn) is not installed: the set-up
commands work, and ``serve run`` names the extra in one line (it said "No module named 'fastapi'")."""

from __future__ import annotations

import subprocess
import sys

from ._serve import LSAT6, ROOT, env

# privirt's CLI in a process where importing fastapi or uvicorn fails, as in a base install
_NO_EXTRA = ("import sys; sys.modules['fastapi'] = None; sys.modules['uvicorn'] = None; "
             "from privirt.cli import main; sys.exit(main(sys.argv[1:]))")


def _privirt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _NO_EXTRA, *map(str, args)], capture_output=True, text=True,
                          env=env(), cwd=ROOT, timeout=300)


def test_serve_without_the_extra_sets_up_a_state_and_run_names_the_extra(tmp_path):
    state = str(tmp_path / "s.db")
    for args in (("init", state),
                 ("dataset", "add", state, "lsat6", LSAT6, "--epsilon", "1", "--delta", "1e-6",
                  "--weights-col", "frequency"),
                 ("analyst", "add", state, "alice", "--allowance", "lsat6=0.5,1e-7"),
                 ("curator-key", state), ("list", state)):
        proc = _privirt("serve", *args)
        assert proc.returncode == 0, (args, proc.stderr)
    proc = _privirt("serve", "run", state, "--port", "8799")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert lines[0] == 'privirt: error: privirt serve run needs the serve extra: python -m pip install "privirt[serve]"'
