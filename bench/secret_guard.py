"""The write guard's secret scanner against detect-secrets, on the same corpora.

Three corpora. The in-project one is built at run time from public token formats
(``tests/store/secret_corpus.py``: fake credentials of many providers in many syntaxes,
and ordinary memory text). The spellings one, built the same way
(``tests/store/secret_spellings.py``), holds credentials in the forms a name-and-shape
scan misses (URL passwords with any character, passwords in sentences, SAS signatures,
bare AWS secret keys, base64-wrapped and line-split keys, Oracle, PuTTY, .pgpass, ldap,
htpasswd, Twilio, zero-width and look-alike characters) beside risky-looking benign text;
its misses are reported per family. The shared one (``../shared/research-data/secrets``, read if
present) holds gitleaks' and detect-secrets' own test cases and real conversation text;
its licences keep it out of the project.

Each text is the body of a memory file (``format_memory_file``, type ``reference``), as
the memory agent would write it. memdir's side is the write guard, asked whether it
refuses the file at ``mem/note-N.md``; detect-secrets' side is ``scan_file`` on the same
file text saved as ``note.md``, with all its default plugins and filters. A credential
counts as caught if the file is refused (flagged); a benign note counts as a false alarm
if it is. The script also times one scan of a 100 KB memory.

    python bench/secret_guard.py [--shared PATH] [--no-detect-secrets]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.store.secret_corpus, the corpus the tests build

from tests.store.secret_corpus import build_corpus, describe  # noqa: E402
from tests.store.secret_spellings import build_spellings  # noqa: E402

from memdir.permissions import memory_write_guard  # noqa: E402
from memdir.store import contains_secret, format_memory_file, scan_secrets  # noqa: E402

SHARED = ROOT.parent / "shared" / "research-data" / "secrets" / "corpus.json"


def memory_file(index: int, body: str) -> str:
    return format_memory_file(
        name=f"note-{index}", description="a reference note", type="reference", body=body
    )


def memdir_flags(texts: Sequence[str]) -> list[bool]:
    with tempfile.TemporaryDirectory() as tmp:
        memory = Path(tmp) / "mem"
        memory.mkdir()
        guard = memory_write_guard(memory)
        return [
            guard(memory / f"note-{i}.md", memory_file(i, text)) is not None
            for i, text in enumerate(texts)
        ]


def detect_secrets_scanner() -> Callable[[Sequence[str]], list[bool]] | str:
    """detect-secrets' scan over the same files, or why it cannot run."""
    # Imported by name so that type-checking does not need it installed: it is a
    # benchmark's comparison, not one of memdir's dependencies.
    try:
        detect_secrets = importlib.import_module("detect_secrets")
        settings = importlib.import_module("detect_secrets.settings")
    except ImportError:
        return "detect-secrets is not installed (pip install detect-secrets)"
    SecretsCollection = detect_secrets.SecretsCollection  # noqa: N806
    default_settings = settings.default_settings

    def flags(texts: Sequence[str]) -> list[bool]:
        results = []
        with tempfile.TemporaryDirectory() as tmp, default_settings():
            path = os.path.join(tmp, "note.md")
            for i, text in enumerate(texts):
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(memory_file(i, text))
                collection = SecretsCollection()
                collection.scan_file(path)
                results.append(any(True for _ in collection))
        return results

    return flags


def score(labels: Sequence[bool], flagged: Sequence[bool], seconds: float) -> dict[str, Any]:
    positives = sum(labels)
    caught = sum(f for label, f in zip(labels, flagged, strict=True) if label)
    alarms = sum(f for label, f in zip(labels, flagged, strict=True) if not label)
    return {
        "recall": round(caught / positives, 4),
        "caught": caught,
        "false_alarms": alarms,
        "false_alarm_rate": round(alarms / (len(labels) - positives), 4),
        "seconds": round(seconds, 2),
    }


def by_group(
    groups: Sequence[str], labels: Sequence[bool], flagged: Sequence[bool]
) -> dict[str, str]:
    """Caught / total per group of positives, and false alarms per group of negatives."""
    total: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    for group, label, flag in zip(groups, labels, flagged, strict=True):
        key = group if label else f"negative: {group}"
        total[key] += 1
        hits[key] += flag
    return {key: f"{hits[key]}/{total[key]}" for key in sorted(total) if hits[key] or total[key]}


def measure(
    texts: Sequence[str],
    labels: Sequence[bool],
    groups: Sequence[str],
    detect: Callable[[Sequence[str]], list[bool]] | str | None,
) -> dict[str, Any]:
    report: dict[str, Any] = {"positives": sum(labels), "negatives": len(labels) - sum(labels)}
    sides: list[tuple[str, Callable[[Sequence[str]], list[bool]] | str | None]] = [
        ("memdir", memdir_flags),
        ("detect_secrets", "--no-detect-secrets" if detect is None else detect),
    ]
    for name, scanner in sides:
        if isinstance(scanner, str) or scanner is None:
            report[name] = {"skipped": scanner}
            continue
        start = time.perf_counter()
        flagged = scanner(texts)
        report[name] = score(labels, flagged, time.perf_counter() - start)
        report[name]["misses_and_alarms"] = imperfect(by_group(groups, labels, flagged))
    return report


def imperfect(groups: dict[str, str]) -> dict[str, str]:
    """The groups of positives not all caught, and of negatives with any false alarm."""
    kept = {}
    for key, value in groups.items():
        hits, total = value.split("/")
        if (hits != "0") if key.startswith("negative") else (hits != total):
            kept[key] = value
    return kept


def hundred_kb_memory() -> str:
    """About 100 KB of what memories hold: prose, ids, digests, URLs, code, references."""
    rng = random.Random(1)
    words = "the token budget for summaries is large and the password policy says rotate"
    lines: list[str] = []
    while sum(map(len, lines)) < 100_000:
        kind = rng.randrange(6)
        if kind == 0:
            lines.append(" ".join(rng.choice(words.split()) for _ in range(20)) + ".")
        elif kind == 1:
            lines.append(f"commit {rng.randbytes(20).hex()} fixed the build")
        elif kind == 2:
            lines.append(f'request_id = "{rng.randbytes(16).hex()}"')
        elif kind == 3:
            lines.append(f"url: https://example.com/a?b={rng.randrange(10**6)}&token_type=bearer")
        elif kind == 4:
            lines.append(f"    api_key = os.environ['API_KEY']  # line {rng.randrange(999)}")
        else:
            lines.append(f"sha256:{rng.randbytes(32).hex()}")
    return "\n".join(lines)


def scan_timing(rounds: int = 15) -> dict[str, float]:
    text = hundred_kb_memory()
    timings = {}
    for name, scan in (("scan_secrets", scan_secrets), ("contains_secret", contains_secret)):
        best = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            scan(text)
            best = min(best, time.perf_counter() - start)
        timings[f"{name}_ms"] = round(best * 1000, 1)
    timings["bytes"] = len(text)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=SHARED, help="the shared corpus.json")
    parser.add_argument("--no-detect-secrets", action="store_true", help="memdir only")
    args = parser.parse_args()
    detect = None if args.no_detect_secrets else detect_secrets_scanner()

    corpus = build_corpus()
    built = measure(
        [e.text for e in corpus],
        [e.label == "positive" for e in corpus],
        [e.syntax if e.label == "positive" else e.family for e in corpus],
        detect,
    )
    built |= describe(corpus)
    result: dict[str, Any] = {"in_project": built}
    spellings = build_spellings()
    result["spellings"] = measure(
        [e.text for e in spellings],
        [e.label == "positive" for e in spellings],
        [e.family for e in spellings],
        detect,
    )

    if args.shared.is_file():
        entries = json.loads(args.shared.read_text(encoding="utf-8"))
        labels = [e["label"] == "positive" for e in entries]
        texts = [e["text"] for e in entries]
        shared = measure(texts, labels, [e["rule_id"] for e in entries], detect)
        sources = [e["source"] for e in entries]
        shared["memdir"]["by_source"] = by_group(sources, labels, memdir_flags(texts))
        result["shared"] = shared
    else:
        result["shared"] = {"skipped": f"no corpus at {args.shared}"}
    result["scan_100kb"] = scan_timing()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
