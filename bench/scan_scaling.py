"""``scan(limit=200)`` against the reference algorithm, over growing memory directories.

Claude Code reads the head of every memory file and then keeps the newest 200; memdir
lists and stats first and reads only the heads it keeps. Both run here on the same
directories (200, 2,000 and 20,000 files), best of several rounds each, and the ratio
reference / memdir is printed per size.

    python bench/scan_scaling.py [--rounds 3] [--sizes 200,2000,20000]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from memdir.store import FRONTMATTER_MAX_LINES, parse_memory_file, scan_memory_files

BODY = "\n".join(f"line {i} of a memory body with some words in it" for i in range(60))


def populate(root: Path, count: int) -> None:
    root.mkdir(parents=True)
    for i in range(count):
        path = root / f"memory_{i:05d}.md"
        path.write_text(
            f"---\nname: Memory {i}\ndescription: fact number {i}\ntype: project\n---\n\n{BODY}\n"
        )
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def reference_scan(root: Path, limit: int) -> list[tuple[float, str]]:
    """Read every file's head, then sort newest first and cap (the reference order)."""
    found = []
    for path in root.rglob("*.md"):
        if path.name == "MEMORY.md":
            continue
        with open(path, encoding="utf-8") as handle:
            head = "".join(handle.readline() for _ in range(FRONTMATTER_MAX_LINES))
        parse_memory_file(head)
        found.append((path.stat().st_mtime, path.name))
    found.sort(reverse=True)
    return found[:limit]


def best(function: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="200,2000,20000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            root = Path(tmp) / f"m{size}"
            populate(root, size)
            ours = best(functools.partial(scan_memory_files, root, limit=200), args.rounds)
            theirs = best(functools.partial(reference_scan, root, 200), args.rounds)
            assert [h.filename for h in scan_memory_files(root, limit=200)] == [
                name for _, name in reference_scan(root, 200)
            ]
            results[str(size)] = {
                "memdir_ms": round(ours * 1000, 2),
                "reference_ms": round(theirs * 1000, 2),
                "ratio_reference_to_memdir": round(theirs / ours, 2),
            }
    print(json.dumps({"bench": "scan_scaling", "limit": 200, "sizes": results}, indent=2))


if __name__ == "__main__":
    main()
