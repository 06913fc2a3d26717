"""Rules come only from feedback memories, outlive a rewrite that drops them, and go with
their memory; switching one off sticks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memdir.rules import RULES_NAME, load_rules, rules_from_frontmatter, set_enabled
from memdir.rules._book import _STATE_DIR
from memdir.state import STATE_DIR_NAME
from tests.rules._memories import PNPM, feedback, write_memory


def bump(path: Path) -> None:
    """Give the file a new mtime, as a later write would."""
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))


def test_the_book_lives_in_memdirs_state_folder() -> None:
    assert _STATE_DIR == STATE_DIR_NAME


def test_a_feedback_memory_states_its_rule(tmp_path: Path) -> None:
    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    (rule,) = load_rules(tmp_path)
    assert (rule.tool, rule.match, rule.action, rule.instead) == (
        "Bash",
        "npm",
        "deny",
        "pnpm install",
    )
    assert rule.memory == "feedback_pnpm.md"
    assert rule.reason.startswith("We use pnpm in this repo, never npm")
    assert rule.enabled
    assert (tmp_path / RULES_NAME).is_file()


def test_only_a_feedback_memory_carries_rules(tmp_path: Path) -> None:
    write_memory(tmp_path, "project_x.md", PNPM.replace("type: feedback", "type: project"))
    assert load_rules(tmp_path) == []


def test_claude_codes_current_layout_keeps_type_under_metadata(tmp_path: Path) -> None:
    text = (
        "---\nname: no-npm\ndescription: never npm\nmetadata:\n  type: feedback\n"
        "rule:\n  tool: Bash\n  match: npm\n---\nbody\n"
    )
    write_memory(tmp_path, "no-npm.md", text)
    (rule,) = load_rules(tmp_path)
    assert (rule.match, rule.action, rule.reason) == ("npm", "deny", "never npm")


def test_a_rule_survives_a_rewrite_that_drops_it(tmp_path: Path) -> None:
    path = write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    (before,) = load_rules(tmp_path)
    without = "\n".join(line for line in PNPM.splitlines() if not line.startswith("rule:"))
    path.write_text(without + "\nAlso for CI.\n", encoding="utf-8")
    bump(path)
    assert load_rules(tmp_path) == [before]


def test_rule_none_takes_it_back(tmp_path: Path) -> None:
    path = write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    assert load_rules(tmp_path)
    path.write_text(feedback("none"), encoding="utf-8")
    bump(path)
    assert load_rules(tmp_path) == []


def test_a_rule_goes_with_its_memory(tmp_path: Path) -> None:
    path = write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    assert load_rules(tmp_path)
    path.unlink()
    assert load_rules(tmp_path) == []
    assert json.loads((tmp_path / RULES_NAME).read_text())["memories"] == {}


def test_team_memories_state_rules_too(tmp_path: Path) -> None:
    write_memory(tmp_path / "team", "feedback_dist.md", feedback('{tool: Write, match: "dist/**"}'))
    (rule,) = load_rules(tmp_path)
    assert (rule.memory, rule.tool, rule.match) == ("team/feedback_dist.md", "Edit", "dist/**")


@pytest.mark.parametrize(
    "value",
    [
        "never use npm",  # prose stays prose
        "{tool: Read, match: x}",  # not a tool a rule can be about
        "{tool: Bash, match: '$X'}",
        "{tool: Bash, match: npm, action: block}",
        "{tool: Bash}",
    ],
)
def test_a_rule_that_cannot_be_checked_stays_prose(value: str) -> None:
    from memdir.store import parse_memory_file

    parsed = parse_memory_file(feedback(value))
    assert rules_from_frontmatter(parsed.frontmatter, "m.md", parsed.body) == []


def test_several_rules_in_one_memory(tmp_path: Path) -> None:
    write_memory(
        tmp_path,
        "feedback_js.md",
        feedback("[{tool: Bash, match: npm}, {tool: Bash, match: yarn, action: warn}]"),
    )
    assert [(r.match, r.action) for r in load_rules(tmp_path)] == [
        ("npm", "deny"),
        ("yarn", "warn"),
    ]


def test_switching_off_sticks_when_the_memory_is_read_again(tmp_path: Path) -> None:
    path = write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    (rule,) = load_rules(tmp_path)
    assert not set_enabled(tmp_path, rule.id[:4], False).enabled
    path.write_text(PNPM + "\nMore.\n", encoding="utf-8")
    bump(path)
    (again,) = load_rules(tmp_path)
    assert again.id == rule.id
    assert not again.enabled
    assert set_enabled(tmp_path, rule.id, True).enabled
    assert load_rules(tmp_path)[0].enabled


def test_switching_an_unknown_rule_says_so(tmp_path: Path) -> None:
    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    with pytest.raises(LookupError, match="no rule"):
        set_enabled(tmp_path, "zzzz", False)


def test_an_unchanged_memory_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    assert load_rules(tmp_path)
    import memdir.rules._book as book

    def refuse(root: Path, name: str) -> None:
        raise AssertionError(f"{name} read again")

    monkeypatch.setattr(book, "_read_memory", refuse)
    assert load_rules(tmp_path)
