"""How much of the Stop hook's fork Claude Code's prompt cache serves, with the real CLI.

A three-turn ``claude -p`` session (the CLI bundled with ``claude-agent-sdk``, offline
against ``FakeAnthropicServer``; each turn reads a 150-line module, then answers) with
``memdir hook claude-code --mode fork``: after each turn the hook rebuilds the request
Claude Code recorded and forks from it. The server's usage for each fork gives the share
of its input read from the cache.

Claude Code puts an attribution block (``x-anthropic-billing-header: …``) first in its
system prompt when it sends a request and does not record it, so the fork's system prompt
lacks it. Two runs, one per assumption about the provider: it leaves that block out of the
cache (``billing_ignored``), or it caches it like any other block (``billing_counts``).
``scripts/check_claude_code_cache.py`` settles which holds, against the real API.

    python bench/claude_code_fork.py [--turns 3]
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
from tests.claude_code.test_hook_fork import QUESTIONS, fork_run, read_share


def side(turns: int, billing_counts: bool, root: Path) -> dict[str, Any]:
    binary, version = find_claude_binary()
    seen = fork_run(ClaudeCli(binary, version, root), billing_counts=billing_counts, turns=turns)
    forks = seen["forks"]
    usages = [dict(f.usage or {}) for f in forks]
    return {
        "per_fork_read_share": [round(read_share(f), 4) for f in forks],
        "session_read_share": round(read_share(*forks), 4),
        "per_fork_input": [
            {k: u.get(k) for k in ("input_tokens", "cache_read_input_tokens")}
            | {"cache_creation_input_tokens": u.get("cache_creation_input_tokens")}
            for u in usages
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=3, choices=range(1, len(QUESTIONS) + 1))
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        result = {
            name: side(args.turns, counts, Path(tmp) / name)
            for name, counts in (("billing_ignored", False), ("billing_counts", True))
        }
    print(
        json.dumps(
            {
                "bench": "claude_code_fork",
                "turns": args.turns,
                **result,
                "seconds": round(time.perf_counter() - started, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
