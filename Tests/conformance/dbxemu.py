"""Process control and HTTP plumbing for the dropbox-emulator conformance suite.

Nothing in here imports the `dropbox` SDK at module level: conftest.py must set
the DROPBOX_*_HOST environment variables before the SDK is imported, because
dropbox/session.py reads them once at import time.

How the SDK reaches the emulator
--------------------------------
The SDK only builds https:// URLs. We do not touch SDK internals; every SDK
object gets a plain ``requests.Session`` whose "https://" mount is
``EmulatorAdapter``: a ``requests.adapters.HTTPAdapter`` that rewrites the URL
to ``http://127.0.0.1:<port of *its* emulator>`` and then delegates to the
normal adapter code. The SDK host names (set in conftest) are distinct
placeholders per logical host (api/content/notify/www), so one test run can
drive several emulator processes (persistence, token expiry, quota, seed) and
the adapter can record which logical host the SDK chose for each route.
"""

import hashlib
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests
from requests.adapters import HTTPAdapter

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
DEFAULT_BIN = REPO_ROOT / ".build" / "debug" / "dropbox-emulator"

# Logical host names handed to the SDK via DROPBOX_*_HOST (see conftest.py).
LOGICAL_HOSTS = {
    "DROPBOX_API_HOST": "api.dropbox-emulator.test",
    "DROPBOX_API_CONTENT_HOST": "content.dropbox-emulator.test",
    "DROPBOX_API_NOTIFY_HOST": "notify.dropbox-emulator.test",
    "DROPBOX_WEB_HOST": "www.dropbox-emulator.test",
}

STARTUP_TIMEOUT = 30.0  # seconds to wait for the "listening on" line
HTTP_TIMEOUT = 30.0  # default timeout for raw HTTP calls made by the suite
LISTEN_RE = re.compile(r"dropbox-emulator listening on http://127\.0\.0\.1:(\d+)")

BLOCK = 4 * 1024 * 1024


def emulator_binary():
    return Path(os.environ.get("DROPBOX_EMULATOR_BIN", str(DEFAULT_BIN)))


def dropbox_content_hash(data: bytes) -> str:
    """Dropbox content_hash, computed independently of the SDK:
    SHA-256 of each 4 MiB block, then SHA-256 of the concatenated digests."""
    digests = b"".join(
        hashlib.sha256(data[i : i + BLOCK]).digest() for i in range(0, len(data), BLOCK)
    )
    return hashlib.sha256(digests).hexdigest()


def payload(n: int, seed: int = 0) -> bytes:
    """Deterministic, non-repeating-looking bytes (so ranges/offsets matter)."""
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(b"%d:%d" % (seed, counter)).digest()
        counter += 1
    return bytes(out[:n])


class EmulatorAdapter(HTTPAdapter):
    """https://<anything>/path -> http://127.0.0.1:<port>/path."""

    def __init__(self, port, **kwargs):
        self._port = port
        self.seen = []  # (logical host, path) of every request sent
        super().__init__(**kwargs)

    def send(self, request, **kwargs):
        parts = urlsplit(request.url)
        self.seen.append((parts.hostname, parts.path))
        request.url = urlunsplit(
            ("http", "127.0.0.1:%d" % self._port, parts.path, parts.query, parts.fragment)
        )
        return super().send(request, **kwargs)


class Emulator:
    """One dropbox-emulator process. Always call stop() (fixtures do)."""

    def __init__(self, data_dir, token="conformance-token", args=(), name="emulator"):
        self.data_dir = Path(data_dir)
        self.token = token
        self.args = list(args)
        self.name = name
        self.proc = None
        self.port = None
        self.log_path = self.data_dir.parent / ("%s-%s.log" % (self.data_dir.name, name))
        self._log = None
        self._reader = None

    # -- process control -------------------------------------------------
    def start(self):
        binary = emulator_binary()
        if not binary.exists():
            raise FileNotFoundError(
                "dropbox-emulator binary not found at %s (set DROPBOX_EMULATOR_BIN)" % binary
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [str(binary), "--port", "0", "--data", str(self.data_dir)]
        if self.token:
            cmd += ["--token", self.token]
        cmd += self.args
        self._log = open(self.log_path, "ab", buffering=0)
        self._log.write(("$ %s\n" % " ".join(cmd)).encode())
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,
        )
        lines = queue.Queue()

        def pump(stream, log):
            # Keep draining stdout for the life of the process so it never
            # blocks on a full pipe; the first line goes to the queue.
            for raw in iter(stream.readline, b""):
                log.write(raw)
                lines.put(raw.decode("utf-8", "replace"))
            lines.put(None)

        self._reader = threading.Thread(target=pump, args=(self.proc.stdout, self._log), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop()
                raise RuntimeError("emulator did not print its listening line within %ss" % STARTUP_TIMEOUT)
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                rc = self.proc.wait(timeout=5)
                raise RuntimeError(
                    "emulator exited (rc=%s) before listening; log: %s\n%s"
                    % (rc, self.log_path, self.log_path.read_text(errors="replace")[-2000:])
                )
            m = LISTEN_RE.search(line)
            if m:
                self.port = int(m.group(1))
                break
        return self

    def stop(self):
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=5)
            self._reader = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self):
        self.stop()
        return self.start()

    # -- HTTP plumbing ---------------------------------------------------
    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def session(self):
        s = requests.Session()
        s.trust_env = False  # never route 127.0.0.1 through an env proxy
        adapter = EmulatorAdapter(self.port)
        s.mount("https://", adapter)
        s.adapter = adapter
        return s

    def client(self, token=None, **kwargs):
        import dropbox

        kwargs.setdefault("max_retries_on_error", 0)
        kwargs.setdefault("max_retries_on_rate_limit", 0)
        kwargs.setdefault("timeout", HTTP_TIMEOUT)
        if "oauth2_refresh_token" not in kwargs:
            kwargs.setdefault("oauth2_access_token", token or self.token)
        return dropbox.Dropbox(session=self.session(), **kwargs)

    def _raw(self):
        s = requests.Session()
        s.trust_env = False
        return s

    def rpc(self, route, arg=None, token=None, auth=True, headers=None, data=None, timeout=HTTP_TIMEOUT):
        """Raw RPC-style POST /2/<route>. Returns the requests.Response."""
        h = {}
        if auth:
            h["Authorization"] = "Bearer %s" % (token or self.token)
        if data is None:
            h["Content-Type"] = "application/json"
            data = json.dumps(arg if arg is not None else None)
        if headers:
            h.update(headers)
        return self._raw().post("%s/2/%s" % (self.url, route), data=data, headers=h, timeout=timeout)

    def content(self, route, api_arg, body=None, token=None, headers=None, stream=False, timeout=HTTP_TIMEOUT):
        """Raw content-style POST (upload/download). api_arg may be a dict
        (JSON-encoded, ASCII-escaped), str, or bytes (sent verbatim).
        body=None means a download-style request (no body, no Content-Type);
        any bytes (even b"") make it upload-style (application/octet-stream)."""
        h = {"Authorization": "Bearer %s" % (token or self.token)}
        if api_arg is not None:
            if isinstance(api_arg, (dict, list)):
                api_arg = json.dumps(api_arg)  # ensure_ascii=True -> \uXXXX
            h["Dropbox-API-Arg"] = api_arg
        if body is not None:
            h["Content-Type"] = "application/octet-stream"
        if headers:
            h.update(headers)
        return self._raw().post(
            "%s/2/%s" % (self.url, route), data=body, headers=h, stream=stream, timeout=timeout
        )

    def set_faults(self, *specs):
        r = self._raw().post(self.url + "/_emulator/faults", json={"faults": list(specs)}, timeout=HTTP_TIMEOUT)
        assert r.status_code in (200, 204), (r.status_code, r.text)

    def clear_faults(self):
        r = self._raw().delete(self.url + "/_emulator/faults", timeout=HTTP_TIMEOUT)
        assert r.status_code in (200, 204), (r.status_code, r.text)

    def stats(self):
        r = self._raw().get(self.url + "/_emulator/stats", timeout=HTTP_TIMEOUT)
        assert r.status_code == 200, (r.status_code, r.text)
        return r.json()

    def reset_stats(self):
        r = self._raw().post(self.url + "/_emulator/stats/reset", timeout=HTTP_TIMEOUT)
        assert r.status_code in (200, 204), (r.status_code, r.text)

    def expire_tokens(self):
        """Every short-lived access token expires now (no waiting out a lifetime)."""
        r = self._raw().post(self.url + "/_emulator/expire-tokens", timeout=HTTP_TIMEOUT)
        r.raise_for_status()


def wait_until(predicate, timeout, interval=0.1, what="condition"):
    """Poll predicate() until truthy; return its value or raise AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)
