"""memdir as a Stop hook of the Claude Agent SDK, in the host's own process.

The SDK runs Claude Code underneath and calls Python hook callbacks on its own event loop.
:class:`MemdirStopHook` is such a callback: on each ``Stop`` it schedules the extraction
of the session's transcript as a task on that loop and answers at once, so the agent is
never held up; the work is the same as ``memdir hook claude-code`` does in a process of
its own (cursor per session in the memory folder, the same folder Claude Code loads)::

    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient
    from memdir.integrations.claude_agent_sdk import MemdirStopHook

    memory = MemdirStopHook()
    options = ClaudeAgentOptions(hooks={"Stop": [memory.matcher()]})
    async with ClaudeSDKClient(options) as client:
        ...
    await memory.drain()  # before the process exits: let the last extraction finish

The SDK is imported only by :meth:`MemdirStopHook.matcher`; the callback itself needs
nothing of it.
"""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdir._claude_setup import hook_memory_off
from memdir._hook_entry import NO_MODEL_MESSAGE, HookOptions, choose_backend, job_from
from memdir._hook_worker import (
    HookLog,
    extract_session,
    extract_through_claude_code_session,
    load_settled,
    memory_root_for,
    open_log,
)
from memdir.errors import MemdirError, MissingExtraError, one_line

if TYPE_CHECKING:
    from claude_agent_sdk import HookMatcher

    from memdir.models import Model
    from memdir.transcripts import Transcript

__all__ = ["MemdirStopHook"]


class MemdirStopHook:
    """A Claude Agent SDK hook callback that saves memories after each answer.

    ``memory_dir`` defaults to Claude Code's folder for the session's working directory,
    found as the CLI finds it under ``env``: pass the environment the CLI runs with
    (``{**os.environ, **options.env}``) when ``ClaudeAgentOptions.env`` changes ``HOME``
    or ``CLAUDE_CONFIG_DIR``; default: this process's;
    ``model`` is a :class:`~memdir.models.Model`, a spec (``anthropic:MODEL``, …) or None
    for the default: ``$MEMDIR_MODEL``, else Anthropic's API when a key is in the
    environment (``MEMDIR_ANTHROPIC_API_KEY``, ``ANTHROPIC_API_KEY``,
    ``ANTHROPIC_AUTH_TOKEN``), else the memory agent runs in Claude Code itself (the CLI
    the SDK runs, with its login), else nothing runs and the log says why; the offline
    engine only when named (``"offline"``). Runs of one session follow each other; a turn
    that ends while its session's run is still going is taken up by the next run, from the
    saved cursor. What each run did, and why one failed, is logged to ``.memdir/hook.log``
    in the memory folder, as by the command hook.
    """

    def __init__(
        self,
        memory_dir: str | os.PathLike[str] | None = None,
        model: Model | str | None = None,
        *,
        base_url: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.memory_dir = Path(memory_dir) if memory_dir is not None else None
        self.env = dict(env) if env is not None else None
        self.model = model
        self.base_url = base_url
        self._tasks: set[asyncio.Task[int]] = set()
        self._locks: dict[Path, asyncio.Lock] = {}
        self.results: list[int] = []
        """The exit status of each finished extraction (0 done, 1 a run failed, 2 unusable
        input), in the order they finished."""

    def matcher(self, timeout: float | None = None) -> HookMatcher:
        """A ``HookMatcher`` holding this callback, for ``ClaudeAgentOptions(hooks=...)``."""
        try:
            from claude_agent_sdk import HookMatcher
        except ImportError as exc:
            raise MissingExtraError(
                "memdir.integrations.claude_agent_sdk", "claude-agent-sdk", one_line(exc)
            ) from exc

        return HookMatcher(hooks=[self], timeout=timeout)  # type: ignore[list-item]

    async def __call__(
        self, input_data: Mapping[str, Any], tool_use_id: str | None, context: Any
    ) -> dict[str, Any]:
        """The hook: schedule the extraction for a ``Stop`` and return ``{}`` at once.

        Other events, and a ``Stop`` with ``stop_hook_active`` set, are ignored.
        """
        folder = str(self.memory_dir) if self.memory_dir is not None else None
        job = job_from(input_data, HookOptions(memory_dir=folder))
        if not isinstance(job, dict):
            return {}
        env = os.environ if self.env is None else self.env
        if hook_memory_off(job, env):  # Claude Code's memory is switched off for it
            return {}
        task = asyncio.get_running_loop().create_task(self._extract(job))
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        named = self.model if isinstance(self.model, str) else None
        if self.model is None or named is not None:
            backend = choose_backend(HookOptions(model=named), env)
            if backend.reason is not None:  # the run only logs why; the user is told
                return {"systemMessage": NO_MODEL_MESSAGE.format(reason=backend.reason)}
        return {}

    def _finished(self, task: asyncio.Task[int]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            self.results.append(task.result())

    async def _extract(self, job: Mapping[str, Any]) -> int:
        """One session's extraction, after any still going for the same memory folder."""
        try:
            root = memory_root_for(job, self.env)
        except MemdirError:
            return 2
        lock = self._locks.setdefault(root, asyncio.Lock())
        async with lock:
            try:
                handle = await asyncio.to_thread(open_log, root)
            except OSError:
                handle = io.StringIO()  # an unwritable folder: the run still goes ahead
            log = HookLog(handle)
            try:
                env = os.environ if self.env is None else self.env
                named = self.model if isinstance(self.model, str) else None
                backend = (
                    choose_backend(HookOptions(model=named), env)
                    if self.model is None or named is not None
                    else None
                )
                if backend is not None and backend.reason is not None:
                    log.line(f"extraction not started: {backend.reason}")
                    log.line(NO_MODEL_MESSAGE.format(reason=backend.reason))
                    return 2
                tail = job["answer_tail"]
                transcript = await asyncio.to_thread(_load, str(job["transcript_path"]), tail)
                if backend is not None and backend.claude_path is not None:
                    return await extract_through_claude_code_session(
                        transcript, root, log, cli_path=backend.claude_path, env=env
                    )
                return await extract_session(
                    transcript, root, log, model=self.model, base_url=self.base_url
                )
            except MemdirError as exc:
                log.line(f"extraction failed: {exc}")
                return 1
            except Exception as exc:  # never into the host's loop
                log.line(f"extraction failed: {type(exc).__name__}: {exc}")
                return 1
            finally:
                handle.close()

    async def drain(self, timeout: float = 600.0) -> None:  # noqa: ASYNC109 (as the extractor's)
        """Wait up to ``timeout`` seconds for the extractions scheduled so far."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)


def _load(path: str, answer_tail: str | None) -> Transcript:
    return load_settled(Path(os.path.expanduser(path)), answer_tail)
