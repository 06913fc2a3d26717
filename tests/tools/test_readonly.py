"""The read-only gate on the memory agent's Bash: what it lets through and what it stops."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memdir.tools._readonly import is_read_only_command

ALLOWED = [
    "ls",
    "ls -la",
    "cat MEMORY.md",
    "grep -rn x .",
    'grep -rn "deploy key" ~/notes',
    "find . -name '*.md'",
    "head -30 user_role.md",
    "wc -l user_role.md",
    "git log --oneline -5",
    "git status",
    "git diff HEAD~1 -- src",
    "rg -n TODO src",
    "ls -la | head -20",
    "cat a.md && wc -l b.md",
    "cd /tmp && ls",
    "grep -c x a.md 2>/dev/null",
    "ls 2>&1 | sort",
    "tail -n 50 log.txt",
    "stat -c %s MEMORY.md",
    'echo "done"',
    "pwd",
    "sort -u names.txt",
    "find . -type f -newer MEMORY.md",
    "git show HEAD:README.md",
    "git branch",
    "git branch -a",
    "diff a.md b.md",
    "ls ~/.claude",
    # Separators, groups and layout.
    "ls\ncat a.md",
    "ls -la\n",
    "  pwd  ",
    "ls; pwd",
    "ls || pwd",
    "(ls)",
    "{ ls; pwd; }",
    "cat a.md |\n  wc -l",
    # Quoting that stays literal.
    "echo 'it''s'",
    "grep -n 'a|b' notes.md",
    'grep -n "say \\"hi\\"" notes.md',
    'echo "cost: \\$5"',
    "git log --format='%h %s' -3",
    "find . -name \"*.md\" -o -name '*.txt'",
    "cat notes/café.md",
    # Redirections that write nothing.
    "cat < MEMORY.md",
    "ls >/dev/null 2>&1",
    "ls &>/dev/null",
    'ls > "/dev/null"',
    # Allowlisted commands and flags.
    "uniq -c names.txt",
    "sort -k2,2 -t, data.csv",
    "jq .name package.json",
    "rg --files",
    "date +%Y-%m-%d",
    "date -u -d yesterday +%s",
    "tree -L 2",
    "du -sh .",
    "file MEMORY.md",
    "sha256sum MEMORY.md",
    "test -f MEMORY.md",
    "printf '%s\\n' a b",
    "hostname",
    "which git",
    "basename /a/b.md .md",
    # Read-only git.
    "git --no-pager log -3",
    "git blame MEMORY.md",
    "git ls-files",
    "git rev-parse --show-toplevel",
    "git branch -vv",
    "git branch --list 'feat*'",
    "git branch --contains=HEAD",
    "git tag",
    "git tag -l 'v1*'",
    "git remote -v",
    "git remote show origin",
    "git stash list",
    "git stash show -p",
    "git worktree list",
    "git config --get user.name",
    "git config --list",
    "git reflog",
    "git reflog show -n 5",
    "git grep -n TODO",
    "git cat-file -p HEAD",
    "git log --output-indicator-new=+",
]

DENIED = [
    # Writing redirections.
    "echo x > f",
    "echo x >> f",
    "echo x >| f",
    "ls &> out",
    "ls 1>f",
    "ls 2>f",
    "ls > /tmp/x",
    "ls 2>>/dev/null",
    "echo x >&2",
    "echo x >&f",
    "ls >/dev/null -la > f",
    "cat < /etc/passwd > out",
    "cat 3<x",
    "{ ls; } > f",
    # bash's network pseudo-files: opening one connects, and the host name carries data.
    "cat < /dev/tcp/example.com/80",
    "cat < '/dev/udp/10.0.0.1/53'",
    "head -1 < /dev/tcp/data.example.com/443",
    # Writers, wrappers and interpreters.
    "tee x",
    "tee -a x",
    "cat a | tee b",
    "sed -i s/a/b/ x",
    "sed 's/a/b/w out' x",
    "sed -n p x",
    "awk '{print > \"f\"}' x",
    "xargs rm",
    "ls | xargs rm",
    "env rm x",
    "sudo ls",
    "bash -c 'rm x'",
    "sh -c ls",
    "eval ls",
    "exec ls",
    "command rm x",
    "nohup rm x",
    "timeout 5 rm x",
    "time ls",
    "coproc ls",
    "source x",
    ". x",
    "cp a b",
    "mv a b",
    "touch x",
    "mkdir d",
    "chmod 777 x",
    "ln -s a b",
    "dd if=a of=b",
    "truncate -s0 x",
    "curl http://x",
    "wget x",
    "python -c 'open(1)'",
    "perl -e x",
    "node -e x",
    "pip install x",
    "make",
    "kill 1",
    "rm -rf ~",
    "/bin/rm x",
    # Flags that write or run programs.
    "find . -delete",
    "find . -exec rm {} \\;",
    "find . -execdir rm x ;",
    "find . -ok rm x ;",
    "find . -fprint f",
    "find . '-delete'",
    'find . -de""lete',
    "sort -o out in",
    "sort --out=f in",
    "uniq a b",
    "uniq -c a b",
    "tree -o f",
    "tree -R",
    "rg --pre cat x",
    "rg --pre=cat x",
    "rg --hostname-bin=x y",
    "date -s 2020-01-01",
    "date --set=2020-01-01",
    "date 010100002030",  # GNU MMDDhhmm[[CC]YY]: sets the clock
    "date -u 123123592099.59",
    "date 1200",  # BSD [[[mm]dd]HH]MM
    "date '12:00'",  # BusyBox hh:mm
    "date '2030-01-01 00:00'",
    "file -C -m magic",
    "base64 -o out in",
    "printf -v x y",
    "hostname evil",
    "tail -f log.txt",
    "tail --follow=name log.txt",
    # Substitutions and expansions.
    "$(rm x)",
    "echo `rm x`",
    "ls `rm`",
    "cat <(ls)",
    "ls >(cat)",
    "echo $(whoami)",
    'echo "x$(rm y)"',
    'echo "`rm y`"',
    "ls $HOME",
    'echo "$HOME"',
    "cat ${FILE}",
    "echo $((1+2))",
    # Command names that are not plain words.
    "'rm' x",
    '"rm" x',
    "\\rm x",
    "r\\m x",
    'l""s',
    "$'ls'",
    "FOO=1 ls",
    "x=1",
    "$CMD",
    "${CMD} x",
    # Globs and brace expansion.
    "ls *.md",
    "cat ?.md",
    "cat [ab].md",
    "rm -rf /",
    "cat {a,b}",
    "git stash show stash@{0}",
    "echo $'\\x41'",
    "ls a\\ b",
    # Git that writes, or runs what config says.
    "git commit -m x",
    "git push",
    "git checkout .",
    "git reset --hard",
    "git add .",
    "git rm x",
    "git clean -fd",
    "git branch new-branch",
    "git branch -D x",
    "git branch -m a b",
    "git branch --set-upstream-to=o/m",
    "git tag v1",
    "git tag -d v1",
    "git stash",
    "git stash pop",
    "git stash drop",
    "git config user.name x",
    "git config --unset user.name",
    "git -c core.pager=sh log",
    "git --exec-path=/x log",
    "git --git-dir=/x log",
    "git -C repo log",
    "cd repo && git log",
    "git log --output=f",
    "git log --out=f",
    "git diff --ext-diff",
    "git log -p --textconv",
    "git grep -Ocat x",
    "git gc",
    "git apply p",
    "git remote add o u",
    "git worktree add ../x",
    "git reflog expire --all",
    "git",
    # Heredocs and herestrings.
    "cat <<EOF > f\nx\nEOF",
    "cat <<'EOF'\nx\nEOF",
    "cat <<< hi",
    # Chains hiding a writer.
    "ls; rm x",
    "ls && rm -rf x",
    "ls || touch x",
    "ls\nrm x",
    "(rm x)",
    "{ rm x; }",
    "ls & rm x",
    "ls &",
    "ls |& cat",
    "! ls",
    # Compound commands and functions.
    "if true; then rm x; fi",
    "for f in a; do rm $f; done",
    "while true; do ls; done",
    "case x in a) ls;; esac",
    "f() { rm x; }; f",
    "function f { ls; }",
    "[ -f x ]",
    "[[ -f x ]]",
    # Layout tree-sitter and bash could read differently.
    "ls # comment",
    "ls \\\n -la",
    "ls\r",
    # Not parseable, or empty.
    "ls (",
    '"unterminated',
    "ls |",
    "&&",
    "",
    "   ",
    "ls\x00",
    "ls \ud800",
]

NOT_STRINGS: list[object] = [None, b"ls", 42, ["ls"]]


@pytest.mark.parametrize("command", ALLOWED, ids=ALLOWED)
def test_allowed(command: str) -> None:
    assert is_read_only_command(command) is True


@pytest.mark.parametrize("command", DENIED, ids=DENIED)
def test_denied(command: str) -> None:
    assert is_read_only_command(command) is False


@pytest.mark.parametrize("value", NOT_STRINGS, ids=repr)
def test_non_strings_are_denied(value: object) -> None:
    assert is_read_only_command(value) is False


def test_tables_are_large_and_disjoint() -> None:
    assert len(ALLOWED) >= 40
    assert len(DENIED) >= 90
    assert len(set(ALLOWED)) == len(ALLOWED)
    assert len(set(DENIED)) == len(DENIED)
    assert not set(ALLOWED) & set(DENIED)


WRITERS = ["rm x", "touch x", "tee x", "echo a > x", "git commit -m m", "sed -i s/a/b/ x", "mv a b"]
READERS = ["ls -la", "cat a.md", "wc -l a.md", "head -5 a.md", "grep -n x a.md", "pwd"]
JOINERS = [";", " ; ", "&&", " && ", "||", " || ", "|", " | "]


def _join(segments: list[str], joiners: list[str]) -> str:
    return segments[0] + "".join(j + s for j, s in zip(joiners, segments[1:], strict=True))


@st.composite
def _chains(draw: st.DrawFn, *, writer: bool) -> str:
    # One to four segments in all; with a writer, it goes anywhere among the readers.
    readers = st.lists(
        st.sampled_from(READERS), min_size=0 if writer else 1, max_size=3 if writer else 4
    )
    segments = draw(readers)
    if writer:
        at = draw(st.integers(min_value=0, max_value=len(segments)))
        segments.insert(at, draw(st.sampled_from(WRITERS)))
    count = len(segments) - 1
    joiners = draw(st.lists(st.sampled_from(JOINERS), min_size=count, max_size=count))
    return _join(segments, joiners)


@given(_chains(writer=True))
def test_a_chain_with_a_writer_is_never_read_only(command: str) -> None:
    assert not is_read_only_command(command)


@given(_chains(writer=False))
def test_a_chain_of_readers_is_read_only(command: str) -> None:
    assert is_read_only_command(command)


def test_threads_get_the_same_answers() -> None:
    commands = [*ALLOWED, *DENIED] * 3
    expected = [is_read_only_command(command) for command in commands]
    workers = 8
    start = threading.Barrier(workers)

    def answer_all(_: int) -> list[bool]:
        start.wait(timeout=60)  # every thread parses at the same time, not one after another
        return [is_read_only_command(command) for command in commands]

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(answer_all, range(workers)))
    assert results == [expected] * workers
