"""What indexing a new turn costs for search, with 100 and with 10,000 turns indexed.

A session's transcript only grows, and each pass reads from where the last one stopped,
so the cost of a new turn should not depend on how much is indexed already. For each
size, a project folder gets that many turns in sessions of at most 1,000 turns, all
indexed; then, round after round, ten turns are appended to the last session and the
pass that indexes them is timed: once naming that session (as a host that knows which
session grew does) and once over the whole folder (as ``memdir search`` does, which
also checks every other session for changes). The median per new turn is printed for
each size, with the ratio 10,000 / 100, and the bytes each pass read per new turn
(exactly the bytes appended: the index never reads a session's old lines again).

    python bench/search_indexing.py [--rounds 30] [--batch 10] [--sizes 100,10000]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from memdir.search import SearchIndex

SESSION_TURNS = 1000
_VOCABULARY_SIZE = 5000


def _vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(_VOCABULARY_SIZE)]


def turn_line(rng: random.Random, words: list[str], number: int) -> bytes:
    """One transcript line of about 40 words, user and assistant in turn."""
    role = "user" if number % 2 == 0 else "assistant"
    text = " ".join(rng.choices(words, k=40))
    content: object = text if role == "user" else [{"type": "text", "text": text}]
    entry = {
        "type": role,
        "uuid": f"turn-{number}",
        "sessionId": "bench",
        "timestamp": "2026-03-01T10:00:00.000Z",
        "message": {"role": role, "content": content},
    }
    return (json.dumps(entry) + "\n").encode()


class Project:
    """A project folder with ``size`` turns indexed, and a session that grows."""

    def __init__(self, root: Path, size: int) -> None:
        self.rng = random.Random(size)
        self.words = _vocabulary(self.rng)
        (root / "memory").mkdir(parents=True)
        sessions = []
        self.number = 0
        for first in range(0, size, SESSION_TURNS):
            path = root / f"session-{first // SESSION_TURNS}.jsonl"
            count = min(SESSION_TURNS, size - first)
            lines = [self.turn() for _ in range(count)]
            path.write_bytes(b"".join(lines))
            sessions.append(path)
        self.sessions = len(sessions)
        self.growing = sessions[-1]
        self.index = SearchIndex(root / "memory")
        assert self.index.index_sessions().lines_read == size
        self.times: dict[str, list[float]] = {"named": [], "folder": []}
        self.read: list[float] = []

    def turn(self) -> bytes:
        line = turn_line(self.rng, self.words, self.number)
        self.number += 1
        return line

    def grow(self, batch: int, how: str) -> None:
        """Append ``batch`` turns to the growing session and time the pass that indexes
        them: naming the session, or over the whole folder."""
        added = b"".join(self.turn() for _ in range(batch))
        with open(self.growing, "ab") as handle:
            handle.write(added)
        start = time.perf_counter()
        stats = self.index.index_sessions([self.growing] if how == "named" else None)
        self.times[how].append((time.perf_counter() - start) / batch)
        assert stats.lines_read == batch, stats
        self.read.append(stats.bytes_read / len(added))

    def figures(self) -> dict[str, float]:
        return {
            "named_us_per_turn": round(statistics.median(self.times["named"]) * 1e6, 1),
            "folder_us_per_turn": round(statistics.median(self.times["folder"]) * 1e6, 1),
            "bytes_read_per_byte_added": round(statistics.mean(self.read), 3),
            "sessions": self.sessions,
        }


def measure(sizes: list[int], rounds: int, batch: int) -> dict[int, dict[str, float]]:
    """Both sizes side by side: each round grows every project once, in turn, so a
    change in the machine's load falls on all of them alike."""
    with tempfile.TemporaryDirectory(prefix="search-indexing-") as tmp:
        projects = {size: Project(Path(tmp) / str(size), size) for size in sizes}
        try:
            for round_number in range(2 * rounds):
                how = "named" if round_number % 2 == 0 else "folder"
                for project in projects.values():
                    project.grow(batch, how)
            return {size: project.figures() for size, project in projects.items()}
        finally:
            for project in projects.values():
                project.index.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--sizes", default="100,10000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = measure(sizes, args.rounds, args.batch)
    small, large = results[sizes[0]], results[sizes[-1]]
    report = {
        "bench": "search_indexing",
        "rounds": args.rounds,
        "batch": args.batch,
        "sizes": {str(size): figures for size, figures in results.items()},
        "ratio_named": round(large["named_us_per_turn"] / small["named_us_per_turn"], 2),
        "ratio_folder": round(large["folder_us_per_turn"] / small["folder_us_per_turn"], 2),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
