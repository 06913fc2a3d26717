"""A ``FakeOpenAIServer`` in a child process, for benchmarks that time the host's side: the
server's own work then never competes with what is measured."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_SERVER = """
import json, sys
from memdir.testing import FakeOpenAIServer

def handler(body):
    text = json.dumps(body["messages"][-1])
    return "Nothing worth saving." if "memory agent" in text else "Noted."

server = FakeOpenAIServer(handler=handler, model=sys.argv[1]).start()
print(server.base_url, flush=True)
sys.stdin.read()
server.stop()
"""


@contextmanager
def openai_server_in_child(model: str) -> Iterator[str]:
    """Start the server for ``model`` in a child process; yields its base URL. The host's
    turns get "Noted.", memory runs "Nothing worth saving."."""
    child = subprocess.Popen(
        [sys.executable, "-c", _SERVER, model],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        yield child.stdout.readline().strip()
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=60)
