"""memdir's Stop hook under the real Claude Code CLI: where it saves, what the next session
loads, and that no session waits for it."""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import sys
import threading
from pathlib import Path
from typing import Any

import memdir
from memdir.state import StateFile
from memdir.store import MemoryDir
from memdir.testing import FakeAnthropicServer
from tests.claude_code._cli import ClaudeCli
from tests.claude_code.test_real_cli import _write_then_confirm

# The hook runs this checkout's memdir (Claude Code's environment has no PYTHONPATH, and
# the interpreter may import another copy).
_SOURCE = shlex.quote(str(Path(memdir.__file__).resolve().parents[1]))
HOOK = (
    f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}"{_SOURCE} '
    f"{shlex.quote(sys.executable)} -m memdir hook claude-code"
)


def hook_settings(*options: str) -> dict[str, Any]:
    command = " ".join([HOOK, *options])
    return {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": command}]}]}}


def wait_for_workers(marker: str, timeout: float = 120.0) -> None:
    """Wait until every hook worker whose command line holds ``marker`` has exited.

    The workers are detached (not this process's children), so each is waited for through
    a pidfd, which becomes readable when the process ends: no polling, no sleep.
    """
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path("/proc", entry, "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "memdir._hook_worker" not in cmdline or marker not in cmdline:
            continue
        try:
            fd = os.pidfd_open(int(entry))
        except ProcessLookupError:
            continue  # it ended meanwhile
        try:
            ready, _, _ = select.select([fd], [], [], timeout)
            assert ready, f"hook worker {entry} still running after {timeout:.0f}s"
        finally:
            os.close(fd)


def test_the_hook_saves_where_the_next_session_loads_it(claude_cli: ClaudeCli) -> None:
    first = claude_cli.run(
        "I'm Ana, I lead the data platform team. Always use polars, never pandas.",
        replies=["Noted."],
        settings=hook_settings("--model", "offline"),
    )
    assert first.transcript is not None
    wait_for_workers(str(first.transcript))
    assert first.memory_dir is not None
    saved = {h.filename for h in MemoryDir(first.memory_dir).scan()}
    assert saved  # the offline model keeps the role and the preference
    assert StateFile(first.memory_dir).get(first.session_id).cursor is not None
    index = (first.memory_dir / "MEMORY.md").read_text()

    second = claude_cli.run("Which library for data frames?", replies=["Polars."])

    loaded = second.first_user_text()
    assert f"Contents of {first.memory_dir / 'MEMORY.md'}" in loaded
    for line in index.splitlines():
        assert line in loaded
    # Nothing of memdir's own lies beside the memories.
    assert sorted(p.name for p in first.memory_dir.iterdir() if p.name.startswith(".")) == [
        ".memdir"
    ]


def test_a_memory_the_clis_agent_wrote_is_left_to_it(claude_cli: ClaudeCli) -> None:
    run = claude_cli.run(
        "Remember: we use polars, never pandas.",
        replies=_write_then_confirm,
        settings=hook_settings("--model", "offline"),
    )
    assert run.transcript is not None
    wait_for_workers(str(run.transcript))
    assert run.memory_dir is not None
    assert [h.filename for h in MemoryDir(run.memory_dir).scan()] == ["polars.md"]
    log = (run.memory_dir / ".memdir" / "hook.log").read_text()
    assert "0 run(s)" in log, log
    assert StateFile(run.memory_dir).get(run.session_id).cursor is not None


def test_no_session_waits_for_the_extraction(claude_cli: ClaudeCli) -> None:
    # memdir's model hangs until the test lets it answer: the session still ends, and the
    # extraction finishes afterwards.
    asked = threading.Event()
    release = threading.Event()

    def memory_model(body: dict[str, Any]) -> str:
        asked.set()
        assert release.wait(120), "the test never released the memory model"
        return "Nothing new to save."

    with FakeAnthropicServer(handler=memory_model, min_cache_tokens=0) as memory_server:
        settings = hook_settings(
            "--model", "anthropic:claude-sonnet-5-5", "--base-url", memory_server.base_url
        )
        run = claude_cli.run(
            "I'm Ana, I lead the data team.", replies=["Hi Ana."], settings=settings
        )
        assert run.exit_code == 0
        assert run.transcript is not None
        assert asked.wait(120), "the hook's extraction never asked its model"
        assert not release.is_set()  # the session ended while the extraction was waiting
        summary = [
            json.loads(line)
            for line in run.transcript.read_text().splitlines()
            if '"stop_hook_summary"' in line
        ]
        assert len(summary) == 1
        assert summary[0]["hookErrors"] == []
        release.set()
        wait_for_workers(str(run.transcript))
        memory_server.assert_no_errors()
    assert run.memory_dir is not None
    log = (run.memory_dir / ".memdir" / "hook.log").read_text()
    assert re.search(r"1 run\(s\) \(\w+\), 0 memory\(ies\) saved, 0 failed", log), log
