"""Helpers for the ``privirt serve`` tests: a real service in a subprocess on a loopback port,
plain HTTP with the standard library, and CLI set-up of a state."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from tests._env import child_env

ROOT = Path(__file__).resolve().parents[1]
LSAT6 = ROOT / "datasets" / "lsat6.csv"


def env() -> dict:
    return child_env()


def cli(*args: str, check: bool = True, subprocess_: bool = False) -> subprocess.CompletedProcess:
    """``privirt ARGS``: in this process through :func:`privirt.cli.main` (fast), or in a
    subprocess with ``subprocess_=True`` (exactly as a curator runs it)."""
    if subprocess_:
        proc = subprocess.run([sys.executable, "-m", "privirt", *map(str, args)], capture_output=True,
                              text=True, env=env(), timeout=300)
    else:
        import contextlib
        import io

        from privirt.cli import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:  # argparse usage errors
                code = exc.code if isinstance(exc.code, int) else 2
        proc = subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())
    if check and proc.returncode != 0:
        raise AssertionError(f"privirt {' '.join(map(str, args))} failed: {proc.stderr}")
    return proc


def last_line(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout.strip().splitlines()[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child, before exec: on Linux ask for SIGTERM when the test process dies, so a
    killed pytest (a timeout, ``kill -9``) leaves no service behind (its own session keeps it
    out of the test's process group)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: stop() still ends it on a normal exit
        pass


class Server:
    """``privirt serve run STATE`` on 127.0.0.1 in a subprocess (stopped by :meth:`stop`)."""

    def __init__(self, state: str, *, workers: int = 1, port: int | None = None, extra: tuple = (),
                 scheme: str = "http", context=None):
        self.port = port or free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "privirt", "serve", "run", str(state), "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", str(workers), "--log-level", "warning", *map(str, extra)],
            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
            preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the service exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/v1/health", timeout=2, context=context):
                    return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.1)
        self.stop()
        raise AssertionError("the service did not start within 60 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def call(url: str, method: str = "GET", key: str | None = None, body=None, *, raw: bytes | None = None,
         headers: dict | None = None, timeout: float = 120, context=None) -> tuple[int, dict, dict]:
    """One HTTP request: ``(status, json body, headers)``."""
    h = dict(headers or {})
    if key is not None:
        h["Authorization"] = f"Bearer {key}"
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    if data is not None:
        h.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(url, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            text = resp.read().decode()
            return resp.status, (json.loads(text) if text and "json" in resp.headers.get("content-type", "")
                                 else {"text": text}), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        text = exc.read().decode()
        try:
            payload = json.loads(text)
        except ValueError:
            payload = {"text": text}
        return exc.code, payload, dict(exc.headers)


def setup_state(state: str, datasets: dict[str, tuple[Path, float, float, list[str]]],
                analysts: dict[str, list[str]]) -> dict:
    """Create a state with data sets ``{name: (file, eps, delta, extra args)}`` and analysts
    ``{name: ["DS=EPS[,DELTA]", ...]}``; returns ``{"curator": key, analyst: key, ...}``."""
    cli("serve", "init", state)
    for name, (path, eps, dlt, extra) in datasets.items():
        cli("serve", "dataset", "add", state, name, path, "--epsilon", eps, "--delta", dlt, *extra)
    keys = {}
    for name, allowances in analysts.items():
        args = [a for al in allowances for a in ("--allowance", al)]
        keys[name] = last_line(cli("serve", "analyst", "add", state, name, *args))
    keys["curator"] = last_line(cli("serve", "curator-key", state))
    return keys


def counts(state: str) -> dict:
    from privirt.serve.store import open_store

    return open_store(state).counts()


def asgi_call(app, method: str, path: str, key: str | None = None, body=None,
              headers: dict | None = None) -> tuple[int, dict, dict]:
    """One request to an ASGI ``app`` in this process (no server, no HTTP client library):
    ``(status, json body, headers with lower-case names)``."""
    import asyncio

    h = {k.lower(): v for k, v in (headers or {}).items()}
    if key is not None:
        h["authorization"] = f"Bearer {key}"
    data = b"" if body is None else json.dumps(body).encode()
    if body is not None:
        h.setdefault("content-type", "application/json")
    h["content-length"] = str(len(data))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in h.items()],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    sent: list[dict] = []
    given = []

    async def receive():
        if not given:
            given.append(True)
            return {"type": "http.request", "body": data, "more_body": False}
        await asyncio.sleep(3600)  # no disconnect while the answer is being made

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    out_headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in start["headers"]}
    return start["status"], json.loads(payload) if payload else {}, out_headers
