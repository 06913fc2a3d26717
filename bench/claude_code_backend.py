"""What memdir's memory run reads from Claude Code's prompt cache when it runs inside the
user's own Claude Code, against memdir's standalone request, with the real CLI.

A three-turn ``claude -p`` session (the CLI bundled with ``claude-agent-sdk``, offline
against ``FakeAnthropicServer``, which follows Anthropic's cache rules; each turn reads
a 150-line module, then answers) with memdir's Stop hook, twice:

- ``claude_code``: a logged-in user (OAuth tokens in the CLI's config folder, no API key
  anywhere): the hook's default, the session resumed as a fork inside Claude Code with
  memdir's prompt as the new message;
- ``standalone``: an API key in the environment and ``--mode standalone``: memdir's own
  request (its system prompt, its tools, the conversation rendered as messages).

For each turn's memory run: the input tokens read from the cache, written to it, and
sent uncached, as the server reported them.

    python bench/claude_code_backend.py [--turns 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.claude_code._cli import ClaudeCli, find_claude_binary
from tests.claude_code.test_claude_code_backend import NO_KEYS, SRC, log_in
from tests.claude_code.test_hook_cli import hook_settings, wait_for_workers
from tests.claude_code.test_hook_fork import QUESTIONS, answers, is_memdirs

from memdir.testing import FakeAnthropicServer, RecordedRequest

_FIELDS = ("cache_read_input_tokens", "cache_creation_input_tokens", "input_tokens")


def _memory_runs(requests: list[RecordedRequest]) -> list[dict[str, int]]:
    """The usage of memdir's requests of one turn, summed (a run may take several)."""
    total = dict.fromkeys(_FIELDS, 0)
    for request in requests:
        if is_memdirs(request.body) and request.usage is not None:
            for field in _FIELDS:
                total[field] += int(request.usage.get(field) or 0)
    return [total]


def side(name: str, turns: int, root: Path) -> dict[str, Any]:
    binary, version = find_claude_binary()
    cli = ClaudeCli(binary, version, root)
    module = cli.project / "ingest.py"
    module.write_text(
        "".join(
            f"def keep_{i}(rows):\n    return [r for r in rows if r.partition == {i}]\n"
            for i in range(75)
        )
    )
    if name == "claude_code":
        log_in(cli)
        env_extra = {**NO_KEYS, "PYTHONPATH": SRC}
        settings = hook_settings()
    else:
        env_extra = {"PYTHONPATH": SRC}
        settings = hook_settings("--model", "anthropic:claude-sonnet-5-5", "--mode", "standalone")
    per_turn: list[dict[str, int]] = []
    session: str | None = None
    started = time.perf_counter()
    with FakeAnthropicServer(handler=answers(module)) as server:
        for question in QUESTIONS[:turns]:
            seen = len(server.requests)
            run = cli.run(
                question, server=server, settings=settings, env_extra=env_extra, resume=session
            )
            session = run.session_id
            assert run.transcript is not None
            wait_for_workers(str(run.transcript))
            per_turn += _memory_runs(list(server.requests[seen:]))
        server.assert_no_errors()
    total = {f: sum(t[f] for t in per_turn) for f in _FIELDS}
    sent = sum(total.values())
    return {
        "per_turn": per_turn,
        "total": total,
        "read_share": round(total["cache_read_input_tokens"] / sent, 4) if sent else 0.0,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=3, choices=range(1, len(QUESTIONS) + 1))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = {
            name: side(name, args.turns, Path(tmp) / name) for name in ("claude_code", "standalone")
        }
    print(json.dumps(result, indent=2))
    print(f"\n{'turn':>4}  {'':>11}  {'cache read':>10}  {'cache write':>11}  {'uncached':>8}")
    for name, figures in result.items():
        for i, turn in enumerate(figures["per_turn"], 1):
            print(
                f"{i:>4}  {name:>11}  {turn['cache_read_input_tokens']:>10}  "
                f"{turn['cache_creation_input_tokens']:>11}  {turn['input_tokens']:>8}"
            )


if __name__ == "__main__":
    main()
