"""A missing extra is named with its install command, before any work, by the entry points
that need it (the core install has numpy, scipy, pandas, opendp and cryptography only)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests._env import child_env

ROOT = Path(__file__).resolve().parents[1]


def test_sweep_report_without_matplotlib_is_refused_before_any_cell(tmp_path):
    # every cell ran and results.csv was written before the report step failed (exit 2)
    config = tmp_path / "t.toml"
    config.write_text(textwrap.dedent("""
        seed = 92700010
        trials = 1
        epsilons = [1.0]
        mechanisms = ["gaussian"]
        [[datasets]]
        source = "synthetic"
        n = 60
        m = 4
        """))
    out = tmp_path / "S1"
    code = ("import sys\nsys.modules['matplotlib'] = None\nfrom privirt.cli import main\n"
            f"sys.exit(main(['sweep', {str(config)!r}, '--out', {str(out)!r}, '--report', '--jobs', '1', "
            "'--no-progress']))\n")
    env = child_env()
    cli = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert cli.returncode == 2 and cli.stdout == "", (cli.stdout, cli.stderr)
    assert cli.stderr.count("\n") == 1 and 'python -m pip install "privirt[plots]"' in cli.stderr
    assert "--report" in cli.stderr and not out.exists()


def test_create_app_without_fastapi_names_the_serve_extra(monkeypatch, tmp_path):
    import privirt.serve

    monkeypatch.setitem(sys.modules, "fastapi", None)
    with pytest.raises(ImportError, match=r'^privirt.serve.create_app needs the serve extra: python -m pip '
                                          r'install "privirt\[serve\]"$'):
        privirt.serve.create_app(str(tmp_path / "st.db"))
