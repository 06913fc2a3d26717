"""memdir's model table against the one Claude Code ships, and what the table decides."""

from __future__ import annotations

import datetime
import importlib.util
import mmap
import re
from pathlib import Path

import pytest

from memdir.errors import UsageError
from memdir.models import (
    DEFAULT_ANTHROPIC_MODEL,
    MODEL_FAMILIES,
    check_not_retired,
    in_service,
    model_family,
    retirement,
    upcoming_retirement,
)
from memdir.models._table import LATEST_PER_FAMILY


def _bundled_cli() -> Path:
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("claude-agent-sdk is not installed (it is in the dev extra)")
    binary = Path(next(iter(spec.submodule_search_locations))) / "_bundled" / "claude"
    if not binary.is_file():
        pytest.skip(f"claude-agent-sdk has no bundled CLI at {binary}")
    return binary


def _slice_after(data: mmap.mmap, marker: bytes, size: int) -> str:
    at = data.find(marker)
    assert at >= 0, f"{marker!r} is not in the bundled CLI"
    return data[at : at + size].decode("utf-8", "replace")


@pytest.fixture(scope="module")
def claude_code_tables() -> tuple[str, str]:
    """Claude Code's table of retirement dates and its model catalog, as shipped."""
    with (
        _bundled_cli().open("rb") as handle,
        mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as data,
    ):
        retirements = _slice_after(data, b'"claude-opus-4-5":{modelName:', 4000)
        catalog = _slice_after(data, b"pricing_tiers:{", 60_000)
    return retirements, catalog


def _long_date(text: str) -> datetime.date:
    return datetime.datetime.strptime(text, "%B %d, %Y").date()


def test_retirement_dates_are_claude_codes_first_party_ones(
    claude_code_tables: tuple[str, str],
) -> None:
    retirements, _ = claude_code_tables
    rows = re.findall(
        r'"(claude-[a-z0-9-]+)":\{modelName:"([^"]+)",retirementDates:\{firstParty:(null|"[^"]+")',
        retirements,
    )
    assert len(rows) >= 9
    for name, label, first_party in rows:
        family = model_family(name)
        expected = None if first_party == "null" else _long_date(first_party.strip('"'))
        assert (name, family.retired_on) == (name, expected)
        assert family.label == label


def test_context_windows_output_and_prices_are_claude_codes(
    claude_code_tables: tuple[str, str],
) -> None:
    _, catalog = claude_code_tables
    tiers = {
        name: tuple(float(v) for v in values)
        for name, *values in re.findall(
            r"(\w+):\{input:([\d.]+),output:([\d.]+),cache_write_5m:([\d.]+),"
            r"cache_write_1h:([\d.]+),cache_read:([\d.]+)",
            catalog.split("models:[", 1)[0],
        )
    }
    assert "tier_2_10_cache_read_0_10" in tiers
    models = re.findall(
        r'\{id:"(claude-[a-z0-9-]+)",family:"(\w+)",display_name:"[^"]+"(.*?)capabilities:',
        catalog,
    )
    assert len(models) >= 20
    for name, line, body in models:
        family = model_family(name)
        assert (name, family.family) == (name, line)
        window = re.search(r"context:\{window:([0-9e.]+)", body)
        expected_window = int(float(window.group(1))) if window else 200_000
        assert (name, family.context_tokens) == (name, expected_window)
        upper = re.search(r"max_output_tokens:\{default:\d+,upper:(\d+)\}", body)
        assert upper is not None
        assert (name, family.max_output_tokens) == (name, int(upper.group(1)))
        tier = re.search(r'pricing:"(\w+)"', body)
        assert tier is not None
        prices = family.list_prices
        assert prices is not None, name
        ours = (prices.input, prices.output, prices.cache_write, prices.cache_write_1h)
        assert (name, (*ours, prices.cache_read)) == (name, tiers[tier.group(1)])
    latest = re.search(r"latest_per_family:\{([^}]*)\}", catalog)
    assert latest is not None
    assert dict(re.findall(r'(\w+):"([^"]+)"', latest.group(1))) == dict(LATEST_PER_FAMILY)


def test_todays_default_is_claude_codes_side_query_model_and_in_service() -> None:
    assert DEFAULT_ANTHROPIC_MODEL == "claude-sonnet-5-5"
    assert retirement(DEFAULT_ANTHROPIC_MODEL) is None
    family = model_family(DEFAULT_ANTHROPIC_MODEL)
    assert (family.family, family.context_tokens, family.retired_on) == ("sonnet", 1_000_000, None)


def test_every_retired_model_names_a_replacement_in_service() -> None:
    retired = [f for f in MODEL_FAMILIES if f.retired_on is not None]
    assert {f.prefix for f in retired} >= {"claude-sonnet-4-5", "claude-opus-4-0"}
    for family in retired:
        assert family.replacement is not None
        assert retirement(family.replacement, today=datetime.date(2100, 1, 1)) is None


@pytest.mark.parametrize(
    ("name", "today", "expected"),
    [
        ("claude-sonnet-4-5", datetime.date(2026, 11, 29), "claude-sonnet-4-5"),
        ("claude-sonnet-4-5", datetime.date(2026, 11, 30), "claude-sonnet-5-5"),
        ("anthropic:claude-sonnet-4-5-20250929", None, "anthropic:claude-sonnet-5-5"),
        ("claude-opus-4-1-20250805", None, "claude-opus-4-1-20250805"),  # no first-party date
        ("claude-3-5-haiku-20241022", None, "claude-haiku-5-5"),
        ("claude-opus-5-5", None, "claude-opus-5-5"),
        ("gpt-4o", None, "gpt-4o"),
        ("claude-next-1", None, "claude-next-1"),
    ],
)
def test_in_service(name: str, today: datetime.date | None, expected: str) -> None:
    assert in_service(name, today=today) == expected


def test_a_refusal_is_one_line_naming_the_replacement() -> None:
    with pytest.raises(UsageError) as caught:
        check_not_retired("claude-opus-4-5", today=datetime.date(2027, 1, 22))
    assert str(caught.value) == (
        "claude-opus-4-5 (Claude Opus 4.5) was retired on January 22, 2027; "
        "use anthropic:claude-opus-5-5 instead"
    )
    check_not_retired("claude-opus-4-5", today=datetime.date(2027, 1, 21))


def test_prices_follow_the_list_prices() -> None:
    # Opus 5.5 reads its cache at $0.20 against $4.00 of input: 0.05, not Anthropic's usual 0.1.
    assert model_family("claude-opus-5-5").prices.cache_read == 0.05
    assert model_family("claude-sonnet-4-6").prices.cache_read == 0.1
    assert model_family("claude-haiku-5-5").list_prices is not None


def test_a_retirement_to_come_is_announced_until_the_day() -> None:
    assert upcoming_retirement("anthropic:claude-opus-4-5", today=datetime.date(2027, 1, 21)) == (
        "claude-opus-4-5 (Claude Opus 4.5) will be retired on January 22, 2027; "
        "use anthropic:claude-opus-5-5"
    )
    assert upcoming_retirement("claude-opus-4-5", today=datetime.date(2027, 1, 22)) is None
    assert upcoming_retirement("claude-opus-5-5") is None
