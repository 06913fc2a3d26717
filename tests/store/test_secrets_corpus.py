"""Recall and false alarms of the write guard on whole corpora of credentials and notes.

The in-project corpus (``secret_corpus.py``) is built from public token formats at run
time. The shared one, gathered from gitleaks' and detect-secrets' own test cases and from
real conversation text, is read from ``../shared`` when this checkout has it (its
licences keep it out of the project) and the test is skipped otherwise. The bar is the
same for both: at least 95% of the credentials refused, at most 1% of the notes.
``bench/secret_guard.py`` prints the same figures next to detect-secrets'.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path

import pytest

from memdir.permissions import memory_write_guard
from memdir.store import format_memory_file, scan_secrets
from tests.store.secret_corpus import FORMATS, SYNTAXES, Format, build_corpus, describe

SHARED_CORPUS = (
    Path(__file__).resolve().parents[2] / ".." / "shared" / "research-data" / "secrets"
).resolve() / "corpus.json"
RECALL_AT_LEAST = 0.95
FALSE_ALARMS_AT_MOST = 0.01


def refusals(root: Path, texts: Iterable[str]) -> list[bool]:
    """For each text, whether the write guard refuses it as the body of a memory file."""
    memory = root / "mem"
    memory.mkdir(exist_ok=True)
    guard = memory_write_guard(memory)
    results = []
    for index, text in enumerate(texts):
        body = format_memory_file(
            name=f"note-{index}", description="a reference note", type="reference", body=text
        )
        results.append(guard(memory / f"note-{index}.md", body) is not None)
    return results


def rates(labels: list[bool], refused: list[bool]) -> tuple[float, float]:
    """(recall over the positives, false-alarm rate over the negatives)."""
    hits = sum(r for positive, r in zip(labels, refused, strict=True) if positive)
    alarms = sum(r for positive, r in zip(labels, refused, strict=True) if not positive)
    positives = sum(labels)
    return hits / positives, alarms / (len(labels) - positives)


def test_the_corpus_is_big_and_varied_enough() -> None:
    counts = describe(build_corpus())
    assert counts["positives"] >= 300
    assert counts["negatives"] >= 300
    assert counts["providers"] + counts["syntaxes"] >= 150
    assert len(SYNTAXES) >= 30
    assert build_corpus() == build_corpus()  # seeded: the same every run


def test_in_project_corpus(tmp_path: Path) -> None:
    corpus = build_corpus()
    refused = refusals(tmp_path, (entry.text for entry in corpus))
    recall, false_alarms = rates([e.label == "positive" for e in corpus], refused)
    missed = [
        e.syntax + ": " + e.text[:80]
        for e, r in zip(corpus, refused, strict=True)
        if e.label == "positive" and not r
    ]
    alarmed = [
        e.text[:80] for e, r in zip(corpus, refused, strict=True) if e.label == "negative" and r
    ]
    assert recall >= RECALL_AT_LEAST, missed
    assert false_alarms <= FALSE_ALARMS_AT_MOST, alarmed


@pytest.mark.parametrize(
    "fmt", [f for f in FORMATS if f.rule_id], ids=lambda f: f"{f.provider} {f.kind}"
)
def test_each_format_is_named_by_its_rule(fmt: Format) -> None:
    token = fmt.make(random.Random(f"{fmt.provider}/{fmt.kind}"))
    findings = scan_secrets(f"saved for later: {token} (do not share)")
    assert fmt.rule_id in {f.rule_id for f in findings}, findings


@pytest.mark.skipif(not SHARED_CORPUS.is_file(), reason="no shared secrets corpus here")
def test_shared_corpus(tmp_path: Path) -> None:
    entries = json.loads(SHARED_CORPUS.read_text(encoding="utf-8"))
    refused = refusals(tmp_path, (entry["text"] for entry in entries))
    recall, false_alarms = rates([e["label"] == "positive" for e in entries], refused)
    assert recall >= RECALL_AT_LEAST
    assert false_alarms <= FALSE_ALARMS_AT_MOST
