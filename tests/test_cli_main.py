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


def test_warnings_are_one_line_without_source_location(tmp_path, capsys):
    """A dropped empty item is reported as one 'privirt: warning:' line, not Python's
    default 'file:line: Category: message' plus the source line."""
    path = tmp_path / "r.csv"
    path.write_text("q1,q2,q3\n1,0,\n0,1,\n1,1,\n0,0,\n1,0,\n")
    assert main(["estimate", str(path)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privirt: warning: ")
    assert "q3" in err[0] and ".py" not in err[0]


@pytest.mark.parametrize("args", [["budget", "show", "LEDGER"], ["--help"]])
def test_closed_pipe_ends_quietly_like_unix_tools(tmp_path, args):
    # `privirt budget show L | head -5` once ended in "privirt: error: [Errno 32] Broken pipe":
    # the reader is gone before privirt writes, so every write fails with EPIPE
    from privirt import Ledger

    ledger = tmp_path / "b.ledger"
    Ledger(ledger, epsilon=1.0, delta=1e-6)
    argv = [str(ledger) if a == "LEDGER" else a for a in args]
    proc = subprocess.Popen([sys.executable, "-m", "privirt", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert err == ""
    # 141 = 128 + SIGPIPE; --help output fits the pipe buffer and may end normally
    assert proc.returncode == 141 or (args == ["--help"] and proc.returncode == 0)


_HEAVY = ("pandas", "scipy", "matplotlib", "pyarrow", "dask", "arviz", "opendp", "cupy")


def _heavy_imports_of(args: list[str]) -> list[str]:
    """Top-level packages among ``_HEAVY`` that ``python -X importtime -m privirt ARGS``
    imported (run from the repository root, so that this checkout is the one imported)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "privirt", *args],
                         capture_output=True, text=True, timeout=120, cwd=root)
    assert out.returncode == 0, out.stderr[-2000:]
    names = {line.rsplit("|", 1)[-1].strip().split(".")[0]
             for line in out.stderr.splitlines() if line.startswith("import time:")}
    return sorted(names & set(_HEAVY))


def test_help_does_not_import_pandas_or_scipy():
    # start-up: the parser of every command module (discovered automatically, including
    # ones added later) is built without pandas, scipy or other heavy packages
    assert _heavy_imports_of(["--help"]) == []
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in sub.choices:
        assert _heavy_imports_of([name, "--help"]) == [], name


def test_building_the_parser_leaves_heavy_modules_unloaded():
    code = ("import sys; from privirt.cli import build_parser; build_parser(); "
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(_HEAVY)!r}))")
    from pathlib import Path

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_report_metric_is_checked_when_the_command_runs(tmp_path, capsys):
    from privirt.sweeps.results import METRICS

    help_text = build_parser()._subparsers._group_actions[0].choices["report"].format_help()
    for name in METRICS:  # the help lists every metric the report knows
        assert name in help_text
    assert main(["report", str(tmp_path), "--metric", "bogus"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("privirt: error: unknown metric 'bogus'") and len(err.strip().splitlines()) == 1
