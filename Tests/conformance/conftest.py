"""Fixtures for the Dropbox API v2 conformance suite.

Run from the repo root:  python3 -m pytest -q Tests/conformance
Binary: $DROPBOX_EMULATOR_BIN or <repo>/.build/debug/dropbox-emulator.
"""

import os
import re
import sys
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dbxemu import LOGICAL_HOSTS, Emulator, emulator_binary  # noqa: E402

# dropbox/session.py reads these at import time, so they must be set before
# the SDK is imported anywhere (test modules import it after conftest loads).
if "dropbox" in sys.modules:  # pragma: no cover - defensive
    raise RuntimeError("the dropbox SDK was imported before conftest could set its hosts")
os.environ.update(LOGICAL_HOSTS)

import dropbox  # noqa: E402,F401  (import now, with the hosts above)

TOKEN = "conformance-token"


def _require_binary():
    b = emulator_binary()
    if not b.exists():
        pytest.fail("dropbox-emulator binary not found at %s (build it or set DROPBOX_EMULATOR_BIN)" % b,
                    pytrace=False)


@pytest.fixture
def emulator_factory(tmp_path):
    """Start extra emulators with their own args; all are stopped at teardown
    even when the test fails."""
    started = []

    def make(args=(), data_dir=None, token=TOKEN, name=None):
        _require_binary()
        name = name or "emu%d" % len(started)
        emu = Emulator(data_dir or (tmp_path / name), token=token, args=args, name=name)
        started.append(emu)
        return emu.start()

    yield make
    for emu in started:
        emu.stop()


@pytest.fixture(scope="module")
def emu(request, tmp_path_factory):
    """One emulator per test module, fresh data dir. Longpoll is capped at 4 s
    so 'no changes' answers come back quickly while sending timeout=30."""
    _require_binary()
    name = re.sub(r"\W", "_", request.module.__name__.split(".")[-1])
    e = Emulator(tmp_path_factory.mktemp(name), token=TOKEN, args=["--longpoll-max-wait", "4"], name=name)
    e.start()
    try:
        yield e
    finally:
        try:
            e.clear_faults()
        except Exception:
            pass
        e.stop()


@pytest.fixture
def dbx(emu):
    return emu.client()


@pytest.fixture
def base(request):
    """A unique, not-yet-existing folder path for this test."""
    short = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:40].strip("-")
    return "/conf-%s-%s" % (short, uuid.uuid4().hex[:6])
