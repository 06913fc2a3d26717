"""One lock for the index: ``forget`` in one process while extractions run in another.

Two real processes share a memory directory (``_index_child.py``): one extracts with the
offline engine, the other forgets memories. Each trial has two phases:

1. In step: before each request of the memory agent the extraction stops and the parent
   has the other process forget one memory at a seeded point of the run (between its
   Read of the index and its Write, between the memory's Write and the summary, …), then
   lets it go on. Afterwards, with no repair: every memory reported saved and still
   there has its index line, none that was forgotten has one, and no line points at a
   missing file.
2. Free: forgetting in a loop while several extractions run, nothing in step. Then the
   repair step, after which the same holds.

The default run makes a few trials; ``MEMDIR_INDEX_TRIALS`` makes more and
``MEMDIR_INDEX_SEED`` picks the seed (every failure names it).
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import IO

from memdir.store import ENTRYPOINT_NAME, MemoryDir, repair_memory_dir

CHILD = Path(__file__).with_name("_index_child.py")
DEFAULT_SEED = 20_261_204
RUNS_IN_STEP = 6
RUNS_FREE = 4
_LINK = re.compile(r"\]\(([^)\s]+\.md)\)")


class Child:
    """A child process spoken to line by line."""

    def __init__(self, mode: str, root: Path, seed: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), mode, str(root), str(seed)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert self.read() == "READY"

    def send(self, line: str) -> None:
        stdin: IO[str] | None = self.proc.stdin
        assert stdin is not None
        stdin.write(line + "\n")
        stdin.flush()

    def read(self) -> str:
        stdout: IO[str] | None = self.proc.stdout
        assert stdout is not None
        line = stdout.readline()
        assert line, f"child exited with {self.proc.wait()}"
        return line.rstrip("\n")

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.send("QUIT")
        finally:
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            code = self.proc.wait(timeout=60)
        assert code == 0, f"child exited with {code}"


@dataclasses.dataclass
class Ledger:
    saved: set[str] = dataclasses.field(default_factory=set)
    forgotten: set[str] = dataclasses.field(default_factory=set)


def memory_files(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*.md")
        if p.name != ENTRYPOINT_NAME and ".memdir" not in p.parts and p.is_file()
    }


def index_links(root: Path) -> list[str]:
    try:
        text = (root / ENTRYPOINT_NAME).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [link.removeprefix("./") for link in _LINK.findall(text)]


def problems(root: Path, ledger: Ledger) -> list[str]:
    """What breaks "every memory saved is indexed, no forgotten line returns"."""
    files = memory_files(root)
    links = set(index_links(root))
    found = [f"saved but not indexed: {rel}" for rel in sorted(files - links)]
    found += [f"a line for a missing file: {link}" for link in sorted(links - files)]
    found += [
        f"saved, gone, never forgotten: {rel}"
        for rel in sorted(ledger.saved - files - ledger.forgotten)
    ]
    return found


def run_in_step(extract: Child, forget: Child, rng: random.Random, ledger: Ledger) -> None:
    """One extraction, with one forget before the request ``at`` (if the run gets there)."""
    at = rng.randint(1, 4)
    extract.send("RUN")
    while (line := extract.read()) != "END":
        kind, _, rest = line.partition(" ")
        if kind == "STEP":
            if int(rest) == at:
                forget.send("FORGET")
                answer = forget.read()
                if answer.startswith("FORGOT "):
                    ledger.forgotten.add(answer.removeprefix("FORGOT "))
            extract.send("GO")
        elif kind == "SAVED":
            ledger.saved.add(rest)
            ledger.forgotten.discard(rest)  # saved again after it was forgotten


def run_free(extract: Child, forget: Child, ledger: Ledger) -> None:
    forget.send("LOOP")
    extract.send(f"FREE {RUNS_FREE}")
    while (line := extract.read()) != "END":
        kind, _, rest = line.partition(" ")
        if kind == "SAVED":
            ledger.saved.add(rest)
    forget.send("STOP")
    while (line := forget.read()) != "STOPPED":
        ledger.forgotten.add(line.removeprefix("FORGOT "))


def trial(root: Path, seed: int) -> tuple[Ledger, list[str], list[str], list[str]]:
    """What was saved and forgotten, and the problems after the in-step phase, after the
    free phase, and after its repair."""
    rng = random.Random(seed)
    ledger = Ledger()
    extract = Child("extract", root, seed)
    forget = Child("forget", root, seed + 1)
    try:
        for _ in range(RUNS_IN_STEP):
            run_in_step(extract, forget, rng, ledger)
        in_step = problems(root, ledger)
        run_free(extract, forget, ledger)
        free = problems(root, ledger)
    finally:
        extract.close()
        forget.close()
    repair_memory_dir(MemoryDir(root))
    return ledger, in_step, free, problems(root, ledger)


def test_forget_during_extractions_loses_no_index_line(tmp_path: Path) -> None:
    seed = int(os.environ.get("MEMDIR_INDEX_SEED", DEFAULT_SEED))
    trials = int(os.environ.get("MEMDIR_INDEX_TRIALS", "3"))
    saved_any = False
    for n in range(trials):
        root = tmp_path / f"trial-{n}"
        root.mkdir()
        ledger, in_step, _, repaired = trial(root, seed + 10 * n)
        where = f"[trial {n}, MEMDIR_INDEX_SEED={seed}]"
        assert not in_step, f"{where} in step, no repair:\n" + "\n".join(in_step)
        assert not repaired, f"{where} after the free phase and the repair:\n" + "\n".join(repaired)
        saved_any = saved_any or bool(ledger.saved & ledger.forgotten)
    assert saved_any, "no trial forgot a memory it saved: the test tested nothing"
