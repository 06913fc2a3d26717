"""Claude Code's real CLI, run offline against memdir's fake Anthropic server.

The binary is the one ``claude-agent-sdk`` bundles (``claude_agent_sdk/_bundled/claude``).
Each run is ``claude -p <prompt>`` in a throwaway HOME and project directory, with an
environment built from nothing but ``PATH``, ``HOME`` and the variables that point the CLI
at the fake and keep it off the network; it takes about a second.

What Claude Code 2.1.332 sends in such a run, as observed: one ``POST /v1/messages`` per
agent turn (streamed, model ``claude-opus-5-5``, twelve tools, the memory folder named in
the system prompt's "# Memory" section, ``MEMORY.md`` in the first user message) and
nothing else: with ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` it sends no title,
quota or telemetry request and does not even look up a host name. Other modes add side
requests (a memory selector with a JSON schema, for one); a request that offers no tools
is answered by :func:`side_reply`, so a test scripts only the agent's turns.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memdir.messages import Message
from memdir.testing import FakeAnthropicServer, RecordedRequest, Reply

__all__ = [
    "ClaudeCli",
    "CliRun",
    "CliUnavailableError",
    "find_claude_binary",
    "is_agent_turn",
    "memory_dir_in",
    "side_reply",
]

# Seconds one run may take. A run takes about a second on a loaded two-core machine; the
# margin is for a slow first start (the binary is 400 MB) and must never hide a hang.
DEFAULT_TIMEOUT = 90.0

# The sentence of the "# Memory" section of Claude Code's system prompt naming the folder.
_MEMORY_SENTENCE = re.compile(r"You have a persistent file-based memory at `([^`]+)`")

TurnReplies = Sequence[Reply] | Callable[[dict[str, Any]], Reply]
"""The agent's answers: one reply per turn in order, or a function of the request body."""


class CliUnavailableError(Exception):
    """The bundled CLI cannot run here; the message says why (a reason to skip)."""


def find_claude_binary() -> tuple[Path, str]:
    """The bundled CLI and its ``--version`` line.

    Raises :class:`CliUnavailableError` when the SDK or its binary is missing, the binary is
    not executable, or it is built for another platform. A binary that starts and then
    fails raises :class:`RuntimeError` instead: that is a failure, not a reason to skip.
    """
    spec = importlib.util.find_spec("claude_agent_sdk")  # finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        raise CliUnavailableError("claude-agent-sdk is not installed (it is in the dev extra)")
    name = "claude.exe" if sys.platform == "win32" else "claude"
    binary = Path(next(iter(spec.submodule_search_locations))) / "_bundled" / name
    if not binary.is_file():
        raise CliUnavailableError(f"claude-agent-sdk has no bundled CLI at {binary}")
    if not os.access(binary, os.X_OK):
        raise CliUnavailableError(f"the bundled CLI at {binary} is not executable")
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            env={"PATH": os.defpath},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=DEFAULT_TIMEOUT,
            check=False,
        )
    except PermissionError as exc:
        raise CliUnavailableError(f"the bundled CLI at {binary} cannot be executed: {exc}") from exc
    except OSError as exc:  # ENOEXEC: built for another operating system or processor
        raise CliUnavailableError(
            f"the bundled CLI at {binary} cannot run on this platform: {exc}"
        ) from exc
    if done.returncode != 0:
        raise RuntimeError(
            f"{binary} --version exited {done.returncode}: {done.stderr.decode(errors='replace')}"
        )
    return binary, done.stdout.decode().strip()


def _schema_sample(schema: object) -> object:
    """The smallest value that fits a JSON schema: required keys only, empty lists."""
    if not isinstance(schema, Mapping):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object":
        properties = schema.get("properties") or {}
        return {key: _schema_sample(properties.get(key)) for key in schema.get("required") or ()}
    return {"array": [], "string": "", "integer": 0, "number": 0, "boolean": False}.get(str(kind))


def side_reply(body: Mapping[str, Any]) -> Reply:
    """The answer to a request that is not an agent turn (a title, a check, a selector).

    A request for JSON output gets the smallest object its schema allows, anything else
    a short text.
    """
    output = body.get("output_config")
    form = output.get("format") if isinstance(output, Mapping) else None
    if isinstance(form, Mapping) and form.get("type") == "json_schema":
        return json.dumps(_schema_sample(form.get("schema")))
    return "OK"


def is_agent_turn(body: Mapping[str, Any]) -> bool:
    """Whether a request is a turn of the agent: it offers the model tools."""
    return bool(body.get("tools"))


def memory_dir_in(body: Mapping[str, Any], cwd: Path) -> Path | None:
    """The memory folder a request's system prompt names, made absolute against ``cwd``.

    ``None`` when the prompt has no memory section (auto memory off).
    """
    system = body.get("system")
    blocks = system if isinstance(system, list) else [{"text": system}]
    for block in blocks:
        text = block.get("text") if isinstance(block, Mapping) else None
        found = _MEMORY_SENTENCE.search(text) if isinstance(text, str) else None
        if found is not None:
            # Relative when CLAUDE_CONFIG_DIR is: the CLI then works from its cwd.
            return Path(os.path.realpath(cwd), found.group(1).rstrip("/"))
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CliRun:
    """One finished ``claude -p`` run."""

    prompt: str
    """The prompt given with ``-p``."""
    cwd: Path
    """The directory the CLI ran in."""
    env: Mapping[str, str]
    """The whole environment the CLI ran with."""
    exit_code: int
    """The CLI's exit status."""
    stdout: str
    """What the CLI printed (the final answer, in text mode)."""
    stderr: str
    """What the CLI printed on stderr."""
    elapsed: float
    """Wall-clock seconds from start to exit."""
    requests: tuple[RecordedRequest, ...]
    """Every request the fake server received, in arrival order."""
    problems: tuple[str, ...]
    """What went wrong on the server side: unexpected requests, replies that ran out."""
    session_id: str
    """The session's id (given to the CLI with ``--session-id``)."""
    transcript: Path | None
    """The session's JSONL transcript, ``<config>/projects/<key>/<session>.jsonl``."""

    @property
    def turns(self) -> tuple[RecordedRequest, ...]:
        """The agent's requests (those offering tools), in order."""
        return tuple(r for r in self.requests if is_agent_turn(r.body))

    @property
    def side_requests(self) -> tuple[RecordedRequest, ...]:
        """Every other request: titles, checks, selectors."""
        return tuple(r for r in self.requests if not is_agent_turn(r.body))

    @property
    def memory_dir(self) -> Path | None:
        """The project's memory folder as the CLI computed it (from its system prompt)."""
        return memory_dir_in(self.turns[0].body, self.cwd) if self.turns else None

    def first_user_text(self) -> str:
        """The text of the first user message of the first turn (where MEMORY.md goes)."""
        if not self.turns:
            return ""
        messages = self.turns[0].body.get("messages") or []
        first = next((m for m in messages if m.get("role") == "user"), None)
        content = first.get("content") if first is not None else None
        if isinstance(content, str):
            return content
        return "\n".join(
            b.get("text", "") for b in content or () if isinstance(b, dict) and "text" in b
        )

    def check(self) -> None:
        """Raise AssertionError, with the CLI's output, unless the run went cleanly."""
        if self.exit_code == 0 and not self.problems:
            return
        raise AssertionError(
            f"claude -p exited {self.exit_code} after {self.elapsed:.1f}s\n"
            f"problems: {list(self.problems)}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )


class _Responder:
    """Answers the fake server's requests: the script for agent turns, side replies else."""

    def __init__(self, replies: TurnReplies) -> None:
        self._function = replies if callable(replies) else None
        self._script: collections.deque[Reply] = collections.deque(
            () if callable(replies) else replies
        )
        self._lock = threading.Lock()
        self.problems: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        if not is_agent_turn(body):
            return side_reply(body)
        # Trouble is answered with a text, never an HTTP error: the CLI retries errors
        # with back-off for minutes, where a text ends the run at once and the problem
        # is reported by CliRun.check().
        if self._function is not None:
            try:
                return self._function(body)
            except Exception:
                with self._lock:
                    self.problems.append("the reply function failed:\n" + traceback.format_exc())
                return Message.assistant("(the test's reply function failed)")
        with self._lock:
            if self._script:
                return self._script.popleft()
            self.problems.append("an agent turn came after the scripted replies ran out")
        return Message.assistant("(the test scripted no reply for this turn)")

    @property
    def unused(self) -> int:
        with self._lock:
            return len(self._script)


class ClaudeCli:
    """The bundled Claude Code CLI with a throwaway HOME and project directory."""

    def __init__(self, binary: Path, version: str, root: Path) -> None:
        self.binary = binary
        """The executable."""
        self.version = version
        """Its ``--version`` line, such as ``2.1.332 (Claude Code)``."""
        self.home = root / "home"
        """The HOME every run gets."""
        self.project = root / "project"
        """The default working directory (not a git repository)."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)

    def env(
        self, env_extra: Mapping[str, str] | None = None, *, base_url: str = "http://127.0.0.1:9"
    ) -> dict[str, str]:
        """The environment a run gets: built from scratch, nothing else inherited.

        ``PATH`` is this process's (the CLI runs git and hooks through it). Pass the
        result to memdir as ``env=`` to ask where it would put the same project's memory.
        """
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self.home),
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        }
        env.update(env_extra or {})
        return env

    def config_home(self, env: Mapping[str, str], cwd: Path) -> Path:
        """The config folder the CLI uses with ``env`` in ``cwd`` (``$CLAUDE_CONFIG_DIR``
        taken literally, relative to ``cwd``; else ``~/.claude``)."""
        configured = env.get("CLAUDE_CONFIG_DIR")
        if configured is None:
            return Path(env["HOME"], ".claude")
        return Path(os.path.realpath(cwd), configured)

    def run(
        self,
        prompt: str,
        *,
        replies: TurnReplies = ("Done.",),
        settings: Mapping[str, Any] | None = None,
        env_extra: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        cwd: Path | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        check: bool = True,
        server: FakeAnthropicServer | None = None,
        resume: str | None = None,
    ) -> CliRun:
        """Run ``claude -p prompt`` to its end and return what happened.

        ``replies`` answers the agent's turns (one each, in order, or a function of the
        request body); other requests get :func:`side_reply`. ``settings`` is written to
        the user settings file (``<config>/settings.json``) first; ``args`` are extra
        command-line arguments (``--settings`` JSON among them). With ``check`` the run
        must exit 0, see no server problem and use every scripted reply
        (:meth:`CliRun.check`). A run past ``timeout`` seconds is killed and fails.

        ``server`` is a running fake of the caller's to use instead of one for this run
        alone (for hooks that call the model after the CLI has exited); its handler then
        answers everything and ``replies`` is not used. ``requests`` holds what it received
        during the run. ``resume`` names an earlier run's session to go on with
        (``--resume``): its transcript grows by this run's turn.
        """
        workdir = self.project if cwd is None else cwd
        session_id = resume if resume is not None else str(uuid.uuid4())
        choice = ["--resume", session_id] if resume is not None else ["--session-id", session_id]
        responder = _Responder(() if server is not None else replies)
        own = server is None
        with contextlib.ExitStack() as stack:
            if server is None:
                server = stack.enter_context(FakeAnthropicServer(handler=responder))
            seen = len(server.requests)
            env = self.env(env_extra, base_url=server.base_url)
            config = self.config_home(env, workdir)
            if settings is not None:
                config.mkdir(parents=True, exist_ok=True)
                (config / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
            command = [str(self.binary), "-p", prompt, *choice, *args]
            started = time.monotonic()
            exit_code, stdout, stderr = _run_to_end(command, workdir, env, timeout)
            elapsed = time.monotonic() - started
            requests = tuple(server.requests[seen:])
            problems = [*server.problems, *responder.problems] if own else []
        if responder.unused:
            problems.append(f"{responder.unused} scripted repl(ies) never used")
        found = sorted(config.glob(f"projects/*/{session_id}.jsonl"))
        run = CliRun(
            prompt=prompt,
            cwd=workdir,
            env=env,
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            elapsed=elapsed,
            requests=requests,
            problems=tuple(problems),
            session_id=session_id,
            transcript=found[0] if found else None,
        )
        if check:
            run.check()
        return run


def _run_to_end(
    command: list[str], cwd: Path, env: Mapping[str, str], timeout: float
) -> tuple[int, str, str]:
    """Run ``command`` in its own process group and wait for it; kill the group on timeout."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # The CLI has not been reaped yet, so its group id is still its own: the kill
        # reaches it and whatever it started (a hook, a shell), and nothing else.
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise AssertionError(
            f"claude -p ran past {timeout:.0f}s and was killed\n"
            f"stdout:\n{out.decode(errors='replace')}\nstderr:\n{err.decode(errors='replace')}"
        ) from None
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")
