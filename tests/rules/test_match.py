"""The matcher sees commands as bash runs them: no spelling, chain, wrapper or
substitution slips a forbidden command past a rule, and lookalikes do not fire."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from memdir.rules import Rule, check_tool_call, command_matches, invocations, path_matches


def rule(tool: str, match: str, action: str = "deny") -> Rule:
    return Rule(
        id="r1",
        tool=tool,
        match=match,
        action="deny" if action == "deny" else "warn",
        instead=None,
        reason="why",
        memory="feedback_x.md",
    )


def fires(match: str, command: str) -> bool:
    return bool(check_tool_call([rule("Bash", match)], "Bash", {"command": command}, "/p"))


@dataclass(frozen=True)
class Case:
    command: str
    match: str = "npm install"


HOSTILE = [
    Case("npm install"),
    Case("npm --silent install left-pad"),
    Case("'npm' install"),
    Case('"npm" "install"'),
    Case("\\npm install"),
    Case('n""pm in""stall'),
    Case("$'\\x6epm' install"),
    Case("/usr/bin/npm install"),
    Case("./node_modules/.bin/npm install"),
    Case("/usr/bin/np? install"),
    Case("ls && npm install"),
    Case("ls; npm install"),
    Case("false || npm install"),
    Case("cat x | npm install"),
    Case("ls\nnpm install"),
    Case("(npm install)"),
    Case("{ npm install; }"),
    Case("echo $(npm install)"),
    Case("echo `npm install`"),
    Case('echo "$(npm install)"'),
    Case("diff <(npm install) x"),
    Case("FOO=1 npm install"),
    Case("env FOO=1 npm install"),
    Case("env -i PATH=/usr/bin npm install"),
    Case("env -S 'npm install'"),
    Case("sudo npm install"),
    Case("sudo -u root -E npm install"),
    Case("sudo -- npm install"),
    Case("command npm install"),
    Case("builtin command npm install"),
    Case("exec npm install"),
    Case("nice -n 10 npm install"),
    Case("nohup npm install &"),
    Case("time npm install"),
    Case("timeout -s KILL 60 npm install"),
    Case("xargs -n1 npm install < pkgs"),
    Case("sudo env X=1 nice command /usr/local/bin/npm install"),
    Case("bash -c 'npm install'"),
    Case('sh -lc "cd web && npm install"'),
    Case("bash -c \"bash -c 'npm install'\""),
    Case("eval npm install"),
    Case("eval 'npm install'"),
    Case("if true; then npm install; fi"),
    Case("for p in a b; do npm install $p; done"),
    Case("f() { npm install; }; f"),
    Case("npm install > /dev/null 2>&1"),
    Case("npm install 'unterminated"),  # a parse error does not hide the command
    Case("npx cowsay hi", match="npx"),
    Case("npm ci", match="npm"),
    # Short options written together, and options that carry their value.
    Case("sudo -Eu root npm install"),
    Case("sudo -iu root npm install"),
    Case("sudo -uroot npm install"),
    Case("sudo --user=root npm install"),
    Case("env -iS 'npm install'"),
    Case("env -S'npm install'"),
    Case("env --split-string='npm install'"),
    # Brace lists bash expands into the command's words.
    Case("{npm,install}"),
    Case("{npm,install} --force"),
    Case("ls; {npm,install}"),
    # Shell options with a value before -c, and scripts fed on stdin.
    Case("bash -o errexit -c 'npm install'"),
    Case("bash +O extglob -c 'npm install'"),
    Case("bash --rcfile /dev/null -c 'npm install'"),
    Case("bash <<< 'npm install'"),
    Case("bash <<X\nnpm install\nX\n"),
    Case(". /dev/stdin <<< 'npm install'"),
    # Programs that run another command.
    Case("find . -maxdepth 0 -exec npm install \\;"),
    Case("watch -n 5 npm install"),
    Case("su -c 'npm install'"),
    Case("su ci -c 'npm install'"),
    Case("runuser -u ci -- npm install"),
    Case("script -qc 'npm install'", match="npm"),
    Case("script -c 'npm install'"),
    Case("flock /tmp/lock npm install"),
    Case("chroot / npm install"),
    Case("taskset 1 npm install"),
    Case("strace -o /dev/null npm install"),
    Case("trap 'npm install' EXIT"),
    Case("coproc npm install"),
    Case("busybox sh -c 'npm install'"),
]


@pytest.mark.parametrize("case", HOSTILE, ids=[c.command for c in HOSTILE])
def test_a_hostile_spelling_still_fires(case: Case) -> None:
    assert fires(case.match, case.command)


LOOKALIKES = [
    Case("pnpm install"),
    Case("npm run build"),
    Case("npm uninstall x"),
    Case("echo npm install"),
    Case("grep 'npm install' README.md"),
    Case("git commit -m 'npm install'"),
    Case("command -v npm", match="npm"),
    Case("cat npm-install.log"),
    Case("$TOOL install"),  # only run time knows the program
    Case("npm-check install"),
    Case("npmx install"),
    Case("sudo -u npm pnpm install"),  # npm is the user here, not the program
    Case("echo {npm,install}"),  # expanded into echo's words
    Case("find . -name npm -print"),
]


@pytest.mark.parametrize("case", LOOKALIKES, ids=[c.command for c in LOOKALIKES])
def test_a_lookalike_does_not_fire(case: Case) -> None:
    assert not fires(case.match, case.command)


def test_a_rule_for_a_program_and_option_needs_both() -> None:
    assert command_matches("git push --force", ["git", "push", "origin", "main", "--force"])
    assert not command_matches("git push --force", ["git", "push", "origin", "main"])


def test_a_word_known_only_at_run_time_is_none() -> None:
    assert invocations('npm install "$PKG"') == [["npm", "install", None]]


@pytest.mark.parametrize(
    ("glob", "path", "expected"),
    [
        ("dist/**", "dist/app.js", True),
        ("dist/**", "/p/dist/a/b/c.js", True),
        ("dist/", "/p/dist/a.js", True),
        ("dist/**", "/p/src/dist.js", False),
        ("dist/**", "/elsewhere/dist/a.js", False),
        ("*.lock", "/p/deep/down/pnpm.lock", True),
        ("*.lock", "/p/lockfile", False),
        ("src/*.gen.ts", "/p/src/a.gen.ts", True),
        ("src/*.gen.ts", "/p/src/x/a.gen.ts", False),
        ("**/generated/*", "/p/a/b/generated/x.py", True),
        ("dist/**", "/p/src/../dist/a.js", True),
    ],
)
def test_a_path_glob_is_relative_to_the_project(glob: str, path: str, expected: bool) -> None:
    assert path_matches(glob, path, "/p") is expected


def test_a_file_rule_holds_for_every_tool_that_writes_a_file() -> None:
    rules = [rule("Edit", "dist/**")]
    for tool, key in [
        ("Edit", "file_path"),
        ("Write", "file_path"),
        ("MultiEdit", "file_path"),
        ("NotebookEdit", "notebook_path"),
    ]:
        assert check_tool_call(rules, tool, {key: "/p/dist/x"}, "/p"), tool
    assert not check_tool_call(rules, "Read", {"file_path": "/p/dist/x"}, "/p")
    assert not check_tool_call(rules, "Bash", {"command": "ls dist"}, "/p")


def test_a_switched_off_rule_does_not_fire() -> None:
    off = Rule(**{**rule("Bash", "npm").as_dict(), "enabled": False})
    assert not check_tool_call([off], "Bash", {"command": "npm i"}, "/p")


@pytest.mark.parametrize(
    ("command", "fired"),
    [
        ("pytest tests/", True),
        ("pytest -x tests/", False),
        ("pytest -vx tests/", False),
        ("pytest -q --maxfail=1 tests/", True),
        ("cd app && pytest -k slow", True),
        ("python -m pytest", False),  # another program: `match` names pytest itself
        ("sudo env CI=1 pytest -xq", False),
        ("ruff check . && pytest", True),
        ("pytest --exitfirst", True),  # a different spelling is a different word
    ],
)
def test_a_rule_that_requires_a_flag_fires_on_a_command_without_it(
    command: str, fired: bool
) -> None:
    from memdir.rules import rules_from_frontmatter

    made_rules = rules_from_frontmatter(
        {
            "type": "feedback",
            "description": "Always pass -x to pytest: stop at the first failure.",
            "rule": {"tool": "Bash", "match": "pytest", "require": "-x", "action": "deny"},
        },
        "feedback_pytest_x.md",
    )
    assert made_rules is not None
    (made,) = made_rules
    assert made.require == "-x"
    hits = check_tool_call([made], "Bash", {"command": command}, "/p")
    assert bool(hits) is fired


def test_a_required_long_option_may_carry_its_value() -> None:
    from memdir.rules._match import carries

    assert carries(["pytest", "--maxfail=1"], "--maxfail")
    assert carries(["pytest", "--maxfail", "1"], "--maxfail")
    assert not carries(["pytest", "--max"], "--maxfail")
    assert not carries(["pytest", "--x"], "-x")
    assert carries(["pytest", "-x", "--lf"], "-x --lf")
    assert not carries(["pytest", "-x"], "-x --lf")
