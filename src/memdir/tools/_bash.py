"""Bash: run a shell command, with Claude Code's name and input fields.

The tool only runs the command. Whether a command is safe for the memory agent (read-only)
is the permission gate's decision, made before the call reaches here.

Each command runs in a session (and process group) of its own, so that a timeout, a
cancelled run or a background job left behind can be ended as a whole: killing only the
shell would leave its children running and holding the output pipe open.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import copy
import functools
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from typing import Any

from memdir.tools._base import ToolContext, ToolError, ToolOutput
from memdir.tools._effects import Effect, RunsCommand, input_object
from memdir.tools._files import absolute_cwd, check_input, object_schema, prop

__all__ = ["BashTool", "bash_effects"]


def bash_effects(tool_input: object) -> tuple[Effect, ...]:
    """Bash's effect: it runs ``command``."""
    given = input_object("Bash", tool_input)
    if not isinstance(given, Mapping):
        return (given,)
    command = given.get("command")
    return (RunsCommand(command if isinstance(command, str) else None),)


# 2 minutes by default, 10 at most, 30,000 characters of output: Claude Code's Bash limits.
DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
MAX_OUTPUT_CHARS = 30_000
# Once the process group is killed, only a process that left it (setsid) can still hold
# the pipe open; the output is not worth waiting on such a process for longer than this.
_DRAIN_AFTER_KILL_S = 2.0

_BASH_SCHEMA = object_schema(
    {
        "command": prop("string", "The command line to run.", minLength=1),
        "timeout": prop(
            "integer",
            f"Milliseconds before the command is killed (default {DEFAULT_TIMEOUT_MS:,}).",
            minimum=1,
            maximum=MAX_TIMEOUT_MS,
        ),
        "description": prop("string", "A few words on what the command does, for the user."),
    },
    ["command"],
)


class _Capture:
    """The head of a byte stream as text, and how many characters were left out."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._head: list[str] = []
        self._kept = 0
        self.dropped = 0

    def feed(self, data: bytes, *, final: bool = False) -> None:
        """Take the next bytes of output (``final`` flushes a split character)."""
        text = self._decoder.decode(data, final)
        room = self._limit - self._kept
        self._head.append(text[:room])
        self._kept += min(room, len(text))
        self.dropped += max(0, len(text) - room)

    @property
    def text(self) -> str:
        """The kept head."""
        return "".join(self._head)


class _Protocol(asyncio.SubprocessProtocol):
    """Feeds the merged output to a capture and tells when the shell and the pipe end."""

    def __init__(self, capture: _Capture) -> None:
        self.capture = capture
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        """Output arrived; it is read even past the cap, or a writer would block forever."""
        self.capture.feed(bytes(data))

    def process_exited(self) -> None:
        """The shell ended (its children may still hold the pipe)."""
        self.exited.set()

    def connection_lost(self, exc: Exception | None) -> None:
        """The shell ended and every writer of the pipe has closed it."""
        self.capture.feed(b"", final=True)
        self.closed.set()


def _kill_group(pgid: int) -> None:
    # The group may be gone already (ProcessLookupError), or a process in it may have
    # changed its credentials (PermissionError); either way there is nothing left to do.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@functools.lru_cache(maxsize=8)
def _find_shell(search_path: str) -> str:
    # Looked up once per PATH: the extractor builds its tools on the event loop every run.
    return (
        shutil.which("bash", path=search_path) or shutil.which("sh", path=search_path) or "/bin/sh"
    )


class BashTool:
    """``Bash``: run ``bash -c command`` (``sh -c`` without bash) in the working directory.

    Standard output and standard error are merged; standard input is ``/dev/null``. The
    output is cut at 30,000 characters. A non-zero exit status or a timeout makes an
    error result. Processes the command leaves behind are killed when it ends.
    """

    name = "Bash"

    def __init__(self, cwd: str | os.PathLike[str]) -> None:
        self._cwd = absolute_cwd(cwd)
        self._shell = _find_shell(os.environ.get("PATH", os.defpath))

    def definition(self) -> dict[str, Any]:
        """The tool as the model sees it."""
        return {
            "name": self.name,
            "description": (
                "Run a shell command in the working directory and return its output "
                "(standard output and error together, cut at "
                f"{MAX_OUTPUT_CHARS:,} characters). The command gets no input and is killed "
                f"after the timeout (default {DEFAULT_TIMEOUT_MS // 1000} s)."
            ),
            "input_schema": copy.deepcopy(_BASH_SCHEMA),
        }

    def effects(self, tool_input: object) -> tuple[Effect, ...]:
        """It runs ``command``."""
        return bash_effects(tool_input)

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        """Run the command and return its output, exit status and any timeout."""
        args = check_input(self.name, _BASH_SCHEMA, tool_input)
        command: str = args["command"]
        if "\0" in command:
            raise ToolError("Bash: 'command' must not contain NUL characters")
        timeout_ms: int = args.get("timeout", DEFAULT_TIMEOUT_MS)
        capture = _Capture(MAX_OUTPUT_CHARS)
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _Protocol(capture),
                self._shell,
                "-c",
                command,
                cwd=self._cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise ToolError(f"Bash: cannot run the command in {self._cwd}: {exc}") from None
        timed_out = False
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                await protocol.exited.wait()
        except TimeoutError:
            timed_out = True
        finally:
            try:
                # Also after a normal exit: background jobs must not outlive the call.
                _kill_group(transport.get_pid())
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_DRAIN_AFTER_KILL_S):
                        await protocol.closed.wait()
            finally:
                transport.close()
        return _result(capture, transport.get_returncode(), timed_out, timeout_ms)


def _result(capture: _Capture, code: int | None, timed_out: bool, timeout_ms: int) -> ToolOutput:
    text = capture.text.rstrip("\n")
    if capture.dropped:
        text += f"\n… ({capture.dropped:,} more characters of output cut)"
    notes = []
    if timed_out:
        notes.append(f"Command timed out after {timeout_ms:,} ms and was killed")
    elif code is not None and code < 0:
        notes.append(f"Command was killed by signal {-code}")
    elif code:
        notes.append(f"Exit code {code}")
    if not text and not notes:
        return ToolOutput(content="(no output)")
    content = "\n".join(part for part in (text, *notes) if part)
    return ToolOutput(content=content, is_error=bool(notes))
