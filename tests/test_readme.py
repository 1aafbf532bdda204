"""README.md runs as written, in order, from a fresh checkout.

Every ```python and ```bash block, and every command written inline in the prose
(`` `privirt estimate responses.csv ...` ``), runs in document order in one scratch folder (so a
file one block writes is there for the next, as for a reader following along); ``experiments/``
and ``datasets/`` are linked into it, as they are in a checkout.  Shell lines see ``privirt`` as
the command line of this repository.  A block followed by a ```text block must print that text
(compared by :mod:`doctest`'s checker: ``...`` matches anything, whitespace is normalised);
one followed by prose "On stderr ..." and a ```text block must print that on stderr, line for
line.
Of a shell line, only the parts that install the package (``python -m pip install ...``) or run
this test suite (``python -m pytest``) are left out: CI runs exactly them (``.ci/run``); the rest
of the line runs (``privirt demo`` of the quick start).  A block that needs an optional extra
which is not installed is skipped, saying which.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from privirt import _backend
from tests._env import child_env

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

_FENCE = re.compile(r"^## ([^\n]+)$|^```(\w+)\n(.*?)^```", flags=re.M | re.S)
#: a command written inline in the prose: `privirt ARGS` or `python -m privirt ARGS`
_INLINE = re.compile(r"`((?:python -m )?privirt [^`]+)`")
#: parts of a shell line that CI runs itself (.ci/run) and this test leaves out
_CI_ONLY = re.compile(r"^\s*python -m (pip install|pytest)\b")


def _blocks() -> list[dict]:
    """Runnable blocks and inline commands in document order, each with its section and the
    expected output, if any."""
    blocks: list[dict] = []
    section = "top"
    text = README.read_text(encoding="utf-8")
    prose_from = 0
    for match in _FENCE.finditer(text):
        _inline(text[prose_from:match.start()], section, blocks)
        prose_from = match.end()
        if match.group(1):
            section = match.group(1).strip()
            continue
        lang, body = match.group(2), match.group(3)
        if lang == "text" and blocks and blocks[-1]["expected"] is None and blocks[-1]["end"] == match.start():
            blocks[-1]["expected"] = body
        elif lang == "text" and blocks and blocks[-1]["lang"] == "bash" and "stderr" not in blocks[-1] \
                and text[blocks[-1]["end"]:match.start()].startswith("On stderr"):
            blocks[-1]["stderr"] = body  # what the shell block prints on stderr
        elif lang in ("python", "bash"):
            if lang == "bash":
                body = _without_ci_parts(body)
            if body.strip():
                blocks.append({"section": section, "lang": lang, "code": body, "expected": None})
        if blocks:
            blocks[-1]["end"] = _skip_blank(match.end())
    _inline(text[prose_from:], section, blocks)
    return blocks


def _inline(prose: str, section: str, blocks: list[dict]) -> None:
    for match in _INLINE.finditer(prose):
        command = " ".join(match.group(1).split())
        blocks.append({"section": section, "lang": "bash", "code": command + "\n",
                       "expected": None, "end": -1, "inline": True})


def _without_ci_parts(body: str) -> str:
    """Each line with its `python -m pip install ...` / `python -m pytest` parts left out."""
    lines = []
    for line in body.splitlines():
        parts = line.split("&&")
        if any(_CI_ONLY.match(p) for p in parts):
            line = " && ".join(p.strip() for p in parts if not _CI_ONLY.match(p))
        lines.append(line)
    return "\n".join(line for line in lines if line.strip()) + "\n"


#: an optional extra, the module that tells whether it is installed, and how a block shows it needs it
_EXTRAS = (
    ("plots", "matplotlib", re.compile(r"--plots|from privirt import plots|privirt\.plots|plot\(|"
                                       r"build_report|privirt report|--report")),
    ("dask", "distributed", re.compile(r"engine=.dask.|--engine dask")),
    ("data", "pyarrow", re.compile(r"to_parquet|read_parquet|_parquet\b|\.parquet\b")),
    ("fast", "numba", re.compile(r"\bfused\b")),
    ("serve", "fastapi", re.compile(r"privirt serve run\b")),
)


def _missing_extra(block: dict) -> str | None:
    """Why the block cannot run here (an extra it needs is not installed), or None."""
    import importlib.util

    for extra, module, pattern in _EXTRAS:
        needs = pattern.search(block["code"]) or pattern.search(block.get("expected") or "")
        if needs and importlib.util.find_spec(module) is None:
            return f"needs the {extra} extra ({module}): python -m pip install \"privirt[{extra}]\""
    return None


_TEXT = README.read_text(encoding="utf-8")


def _skip_blank(pos: int) -> int:
    while pos < len(_TEXT) and _TEXT[pos] in "\n ":
        pos += 1
    return pos


BLOCKS = _blocks()
_CHECKER = doctest.OutputChecker()
_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """One folder for the whole README, with the checkout's data folders and a `privirt`
    command that runs this repository's code."""
    folder = tmp_path_factory.mktemp("readme")
    for name in ("experiments", "datasets"):
        (folder / name).symlink_to(ROOT / name, target_is_directory=True)
    bin_dir = tmp_path_factory.mktemp("bin")
    shim = bin_dir / "privirt"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m privirt "$@"\n')
    shim.chmod(0o755)
    env = child_env()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    # the printed values are the CPU path's: on a GPU machine the default device="auto" would
    # run the samplers there, on other random streams (README, "device")
    env["CUDA_VISIBLE_DEVICES"] = ""
    return folder, env


def test_readme_has_an_example_per_capability():
    sections = {b["section"] for b in BLOCKS if b["lang"] == "python"}
    for wanted in ("Responses", "Pairwise counts and spectral estimation", "Mechanisms",
                   "Privacy accounting and the budget ledger",
                   "Private spectral estimation and noisy count release", "2PNO Gibbs sampler",
                   "2PL Metropolis–Hastings sampler and ideal points", "ε sweeps and reports"):
        assert wanted in sections, f"README section {wanted!r} has no python example"


def test_readme_checks_printed_values():
    checked = [b for b in BLOCKS if b["expected"] is not None]
    assert len(checked) >= 5, "README examples should show (and this test check) what they print"


def _check(block: dict, out: str, key: str = "expected") -> None:
    """``out`` is what the block's ``key`` text shows (``"stderr"``: its "On stderr" block)."""
    if block.get(key) is None:
        return
    if key == "stderr":  # line for line: a "...)" must not swallow a warning line after it
        shown, printed = block[key].splitlines(), out.splitlines()
        same = len(shown) == len(printed) and all(
            _CHECKER.check_output(a + "\n", b + "\n", _FLAGS) for a, b in zip(shown, printed))
        if not same:
            pytest.fail(f"README [{block['section']}] printed something else on stderr:\n"
                        f"shown:\n{block[key]}\nprinted:\n{out}")
        return
    if not _CHECKER.check_output(block[key], out, _FLAGS):
        diff = _CHECKER.output_difference(doctest.Example("", block[key]), out, _FLAGS)
        pytest.fail(f"README [{block['section']}] printed something else:\n{diff}")


def test_readme_checks_what_its_on_stderr_blocks_show():
    """The roll-call command's "On stderr" block left out its convergence warning, unchecked."""
    shown = [b for b in BLOCKS if b.get("stderr") is not None]
    assert any("rollcall_summary" in b["code"] for b in shown)


def test_readme_runs_every_shell_line_inline_ones_too():
    """The quick start's `privirt demo` and the prose's inline commands are among the blocks,
    and the README's own private totals command on its responses.csv declares the missing
    cells it needs (it was refused as written)."""
    inline = [b["code"].strip() for b in BLOCKS if b.get("inline")]
    assert "privirt --help" in inline and "privirt demo" in inline
    assert "privirt estimate responses.csv --epsilon 1 --method totals --missing mcar" in inline
    assert any(b["code"].strip() == "privirt demo" and not b.get("inline") for b in BLOCKS)
    shell = "\n".join(b["code"] for b in BLOCKS if b["lang"] == "bash")
    assert "pip install" not in shell and "pytest" not in shell


def _kind(block: dict) -> str:
    return "inline" if block.get("inline") else block["lang"]


@pytest.mark.parametrize("index", range(len(BLOCKS)),
                         ids=[f"{i}-{_kind(b)}-{b['section'][:25]}" for i, b in enumerate(BLOCKS)])
def test_readme_block_runs_in_order(index, scratch, monkeypatch):
    folder, env = scratch
    block = BLOCKS[index]
    reason = _missing_extra(block)
    if reason:
        pytest.skip(reason)
    monkeypatch.chdir(folder)
    if block["lang"] == "python":
        monkeypatch.setenv("MPLBACKEND", "Agg")
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # forked sweep workers, subprocesses
        monkeypatch.setattr(_backend, "_cupy_or_none", lambda: None)  # as without a GPU
        namespace: dict = {"__name__": "__readme__"}
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(compile(block["code"], f"README.md [{block['section']}]", "exec"), namespace)
        _check(block, buffer.getvalue())
        _check_warnings_told(block, caught)
    elif block["code"].strip().startswith("privirt serve run "):
        _serve_briefly(block["code"].strip(), folder, env)
    else:
        proc = subprocess.run(["bash", "-eo", "pipefail", "-c", block["code"]], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=600)
        what = f"inline command `{block['code'].strip()}`" if block.get("inline") else "shell block"
        assert proc.returncode == 0, f"README [{block['section']}] {what} failed:\n{proc.stderr}"
        assert "Traceback" not in proc.stderr
        _check(block, proc.stdout)
        _check(block, proc.stderr, "stderr")


def _check_warnings_told(block: dict, caught: list[warnings.WarningMessage]) -> None:
    """A warning the block gives (on stderr, which its shown output leaves out) is named in the
    prose right after the block (and its output), so that a reader who sees it knows it is expected."""
    after = _TEXT[block["end"]:]
    after = after[:min(i for i in (after.find("```"), after.find("\n## "), len(after)) if i >= 0)]
    untold = sorted({w.category.__name__ for w in caught} - set(re.findall(r"\w+", after)))
    assert not untold, (f"README [{block['section']}] warns ({', '.join(untold)}) but the text after "
                        "the block does not say so")


def _serve_briefly(command: str, folder, env) -> None:
    """``privirt serve run ...`` serves until stopped: start it (on a free loopback port),
    make the README's analyst calls through the client with the key the README wrote, stop it."""
    import re
    import socket
    import time

    from privirt.client import Client, Unauthorized

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = re.sub(r"--port \d+", f"--port {port}", command).split()[1:]
    proc = subprocess.Popen([sys.executable, "-m", "privirt", *args], cwd=folder, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        key = (folder / "alice.key").read_text().strip()
        deadline = time.monotonic() + 60
        while True:
            try:
                datasets = Client(url, key).datasets()
                break
            except (OSError, ConnectionError) as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"`{command}` did not start: {proc.stderr.read()}") from exc
                time.sleep(0.3)
        assert [(d["name"], d["n_persons"]) for d in datasets] == [("lsat6", 1000)]
        with pytest.raises(Unauthorized):
            Client(url, "pva.not-a-key").datasets()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _starts_workers(block: dict) -> bool:
    return block["lang"] == "python" and ('engine="dask"' in block["code"]
                                          or "run_sweep(" in block["code"])


WORKER_BLOCKS = [i for i, b in enumerate(BLOCKS) if _starts_workers(b)]


def test_readme_has_worker_examples():
    sections = {BLOCKS[i]["section"] for i in WORKER_BLOCKS}
    assert any("Dask" in s for s in sections) and "ε sweeps and reports" in sections


@pytest.mark.slow
@pytest.mark.parametrize("index", WORKER_BLOCKS,
                         ids=[BLOCKS[i]["section"][:25] for i in WORKER_BLOCKS])
def test_readme_worker_example_runs_as_a_plain_script(index, tmp_path):
    """Saved as a file without an ``if __name__ == "__main__":`` guard and run with
    ``python script.py``, an example that starts workers (Dask, sweeps) works: exit 0, no
    traceback, the expected output, and the script runs once (a spawned worker would run it
    again from the top and rewrite its files)."""
    block = BLOCKS[index]
    script = tmp_path / "script.py"
    script.write_text('open("runs.log", "a").write("ran\\n")\n' + block["code"], encoding="utf-8")
    env = child_env(MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert (tmp_path / "runs.log").read_text() == "ran\n"  # not re-run by any worker
    _check(block, proc.stdout)
