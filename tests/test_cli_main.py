"""The command-line dispatcher."""

from __future__ import annotations

import subprocess
import sys

import pytest

from privirt.cli import build_parser, main


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert "privirt" in capsys.readouterr().out


def test_every_command_module_registers():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sub.choices, "no subcommands were discovered"
    for name, p in sub.choices.items():
        assert p.get_default("func") is not None, f"command {name} has no run function"


def test_python_dash_m_entry_point():
    out = subprocess.run([sys.executable, "-m", "privirt", "--version"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "privirt" in out.stdout
