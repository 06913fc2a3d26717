"""The repair step after SIGKILLs: extract, dream, forget and undo killed at random points.

Each iteration starts one child (``_index_child.py``) on the same memory directory, so
damage piles up: an extraction with the offline engine, a consolidation pass, a forget
loop or an undo loop, picked by a seeded draw, killed with SIGKILL after a seeded delay.
Then the parent runs :func:`~memdir.store.repair_memory_dir` and checks the folder:

- index ⇔ files: every memory file has a line in ``MEMORY.md``, every line's file exists;
- no empty memory file, indexed or not;
- no temporary file anywhere, ``.memdir/`` included;
- the trash restorable: every entry complete, its copy readable.

The default run makes a dozen kills; ``MEMDIR_KILL_ITERATIONS`` makes more and
``MEMDIR_KILL_SEED`` picks the seed (every failure names it). The seed fixes the draws
and the delays; where a kill lands still depends on the machine's timing.
"""

from __future__ import annotations

import collections
import gzip
import os
import random
import re
import selectors
import subprocess
import sys
import time
from pathlib import Path

from memdir.store import (
    ENTRYPOINT_NAME,
    TRASH_DIR_NAME,
    MemoryDir,
    atomic_write,
    format_memory_file,
    repair_memory_dir,
    trash_entries,
)

CHILD = Path(__file__).with_name("_index_child.py")
DEFAULT_SEED = 20_261_205
START_TIMEOUT = 60.0
# Seconds a child may run after READY before its kill: a run of the extraction or a
# consolidation pass takes about a tenth of a second here, a forget a few milliseconds.
SPREAD = {"extract-loop": 0.4, "dream-loop": 0.4, "forget-loop": 0.05, "undo-loop": 0.05}
_LINK = re.compile(r"\]\(([^)\s]+\.md)\)")
_TEMP = re.compile(r"\..+\.(?:\d+-)?[A-Za-z0-9_]{8}\.tmp")
_TOPICS = ("billing", "search", "checkout", "ledger", "gateway", "payments", "auth", "docs")


def kill_after(mode: str, root: Path, seed: int, delay: float) -> bool:
    """Run a child and SIGKILL it ``delay`` seconds after READY; whether it was killed."""
    command = [sys.executable, str(CHILD), mode, str(root), str(seed)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        seen = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            deadline = time.monotonic() + START_TIMEOUT
            while b"READY\n" not in seen and time.monotonic() < deadline:
                if selector.select(timeout=deadline - time.monotonic()):
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        break
                    seen += chunk
            assert b"READY\n" in seen, f"{mode} never started: {seen!r}"
            # The kill point: the seeded delay, not a wait for anything to finish.
            until = time.monotonic() + delay
            while (left := until - time.monotonic()) > 0 and proc.poll() is None:
                if selector.select(timeout=left) and not os.read(fd, 4096):
                    break
        killed = proc.poll() is None
        proc.kill()
        proc.wait(timeout=30)
    return killed


def seed_memories(root: Path, rng: random.Random, duplicate: bool) -> None:
    """Give the children something to work on: a few memories with their lines, and for
    a consolidation pass an exact duplicate to retire."""
    md = MemoryDir(root)
    files = [p for p in root.glob("*.md") if p.name != ENTRYPOINT_NAME]
    wanted = [] if len(files) >= 4 else rng.sample(_TOPICS, 3)
    for topic in wanted:
        name = f"seeded-{topic}-{rng.randrange(1000)}.md"
        body = f"The {topic} service is owned by team {rng.randrange(10)}."
        text = format_memory_file(
            name=f"{topic} owner", description=f"who owns {topic}", type="project", body=body
        )
        atomic_write(root / name, text)
        with md.lock():
            index = root / ENTRYPOINT_NAME
            old = index.read_text(encoding="utf-8") if index.exists() else ""
            atomic_write(index, f"{old}- [{topic} owner]({name}) — who owns {topic}\n")
    if duplicate:
        files = sorted(p for p in root.glob("*.md") if p.name != ENTRYPOINT_NAME)
        if files:
            source = rng.choice(files)
            copy = root / f"copy-{rng.randrange(10_000)}.md"
            atomic_write(copy, source.read_bytes())
            with md.lock():
                index = root / ENTRYPOINT_NAME
                old = index.read_text(encoding="utf-8") if index.exists() else ""
                atomic_write(index, f"{old}- [Copy]({copy.name}) — a copy of {source.name}\n")


def inconsistencies(root: Path) -> list[str]:
    """Everything that breaks the folder's consistency, as the module describes it."""
    files = {
        p.relative_to(root).as_posix(): p
        for p in root.rglob("*.md")
        if p.name != ENTRYPOINT_NAME and ".memdir" not in p.parts and p.is_file()
    }
    index = root / ENTRYPOINT_NAME
    text = index.read_text(encoding="utf-8") if index.exists() else ""
    links = {link.removeprefix("./") for link in _LINK.findall(text)}
    found = [f"no index line: {rel}" for rel in sorted(set(files) - links)]
    found += [f"a line for a missing file: {link}" for link in sorted(links - set(files))]
    found += [f"empty memory: {rel}" for rel, p in sorted(files.items()) if not p.read_bytes()]
    found += [
        f"temporary file left: {p.relative_to(root)}"
        for p in root.rglob("*.tmp")
        if _TEMP.fullmatch(p.name)
    ]
    trash = root / TRASH_DIR_NAME
    complete = {entry.path.name for entry in trash_entries(MemoryDir(root))}
    folders = sorted(p.name for p in trash.iterdir()) if trash.is_dir() else []
    found += [f"incomplete trash entry: {name}" for name in folders if name not in complete]
    for name in sorted(complete):
        try:
            gzip.decompress((trash / name / "memory.gz").read_bytes())
        except (OSError, EOFError) as exc:
            found.append(f"trash entry {name} unreadable: {exc}")
    return found


def test_the_repair_step_leaves_a_consistent_folder_after_every_kill(tmp_path: Path) -> None:
    seed = int(os.environ.get("MEMDIR_KILL_SEED", DEFAULT_SEED))
    iterations = int(os.environ.get("MEMDIR_KILL_ITERATIONS", "12"))
    rng = random.Random(seed)
    root = tmp_path / "memory"
    root.mkdir()
    stats: collections.Counter[str] = collections.Counter()
    for n in range(iterations):
        mode = rng.choice(sorted(SPREAD))
        seed_memories(root, rng, duplicate=mode == "dream-loop")
        delay = rng.uniform(0.0, SPREAD[mode])
        stats[f"{mode} killed"] += kill_after(mode, root, rng.randrange(1 << 30), delay)
        for repair in repair_memory_dir(MemoryDir(root)):
            stats[repair.kind] += 1
        found = inconsistencies(root)
        where = f"[kill {n}: {mode} after {delay:.3f}s, MEMDIR_KILL_SEED={seed}]"
        assert not found, f"{where}\n" + "\n".join(found)
    assert sum(v for k, v in stats.items() if k.endswith("killed")) >= iterations // 2, stats
    print(f"\nrepair after kills, seed {seed}: {dict(sorted(stats.items()))}")
