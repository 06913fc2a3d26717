"""How long Claude Code waits for memdir's Stop hook, measured by Claude Code itself.

Each round runs one ``claude -p`` session (the real CLI bundled with ``claude-agent-sdk``,
offline against ``FakeAnthropicServer``) per side, the sides in turn, and reads the hook's
``durationMs`` from the ``stop_hook_summary`` line the CLI writes to the transcript:

- ``memdir_hook``: ``memdir hook claude-code`` as shipped (the extraction, with the
  offline model, goes on in a detached process);
- ``empty_hook``: a hook that does nothing (``true``): what any hook costs the CLI;
- ``waiting_extract``: ``memdir extract`` run inside the hook until it is done, as a hook
  that waits for its extraction would.

    python bench/hook_exit.py [--sessions 10]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.claude_code._cli import ClaudeCli, find_claude_binary

PROMPT = "I'm Ana, I lead the data platform team. Always use polars, never pandas."
PYTHON = shlex.quote(sys.executable)
SIDES = {
    "memdir_hook": f"{PYTHON} -m memdir hook claude-code --model offline",
    "empty_hook": "true",
    # The hook's input names the transcript; a shell reads it from stdin.
    "waiting_extract": (
        f'{PYTHON} -c \'import json,subprocess,sys; p=json.load(sys.stdin)["transcript_path"]; '
        f'subprocess.run([sys.executable,"-m","memdir","extract","--quiet",'
        f'"--model","offline",p])\''
    ),
}


def hook_ms(transcript: Path) -> float:
    for line in transcript.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry.get("subtype") == "stop_hook_summary":
            return float(entry["hookInfos"][0]["durationMs"])
    raise RuntimeError(f"no stop_hook_summary in {transcript}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    args = parser.parse_args()
    binary, version = find_claude_binary()
    durations: dict[str, list[float]] = {side: [] for side in SIDES}
    session_s: dict[str, list[float]] = {side: [] for side in SIDES}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.sessions):
            order = list(SIDES)
            order = order[round_ % len(order) :] + order[: round_ % len(order)]
            for side in order:
                cli = ClaudeCli(binary, version, Path(tmp) / f"{side}-{round_}")
                settings = {
                    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": SIDES[side]}]}]}
                }
                run = cli.run(PROMPT, replies=["Noted."], settings=settings)
                assert run.transcript is not None
                durations[side].append(hook_ms(run.transcript))
                session_s[side].append(run.elapsed)
    medians = {side: statistics.median(values) for side, values in durations.items()}
    print(
        json.dumps(
            {
                "bench": "hook_exit",
                "cli": version,
                "sessions_per_side": args.sessions,
                "hook_ms": {
                    side: {
                        "median": round(medians[side], 1),
                        "max": round(max(durations[side]), 1),
                        "all": durations[side],
                    }
                    for side in SIDES
                },
                "session_s_median": {
                    side: round(statistics.median(v), 2) for side, v in session_s.items()
                },
                "memdir_hook_over_empty_hook_ms": round(
                    medians["memdir_hook"] - medians["empty_hook"], 1
                ),
                "waiting_extract_to_memdir_hook": round(
                    medians["waiting_extract"] / medians["memdir_hook"], 2
                ),
                "seconds": round(time.perf_counter() - started, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
