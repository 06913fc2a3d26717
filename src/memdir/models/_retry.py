"""Retrying a provider call that failed for a reason that may pass."""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from memdir.errors import ModelError

__all__ = [
    "RETRYABLE_STATUS",
    "RetryPolicy",
    "TransientError",
    "is_retryable_status",
    "retry_after",
    "split_known",
    "with_retries",
]

T = TypeVar("T")

# 408 timeout, 409 conflict, 429 rate limit, 529 overloaded and any 5xx are worth another try.
RETRYABLE_STATUS = frozenset({408, 409, 429})


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP status from a provider may succeed if the call is repeated."""
    return status in RETRYABLE_STATUS or status >= 500


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How often and how patiently to repeat a call that failed transiently."""

    max_retries: int = 4
    """Repeats after the first attempt (0: try once)."""
    initial_delay: float = 0.5
    """Seconds before the first repeat; doubles each time."""
    max_delay: float = 8.0
    """Upper bound on one wait, including a provider's ``retry-after``."""
    jitter: float = 0.25
    """Random extra share of each wait, so many clients do not retry in lockstep."""

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before repeat number ``attempt`` (1-based)."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_delay))
        base = min(self.initial_delay * 2.0 ** (attempt - 1), self.max_delay)
        return base * (1 + random.random() * self.jitter)


class TransientError(Exception):
    """Raised inside a call to say: this failure may pass, try again.

    ``cause`` is the provider's exception; ``retry_after`` the wait it asked for;
    ``status`` the HTTP status it answered with, if any.
    """

    def __init__(
        self, description: str, *, retry_after: float | None = None, status: int | None = None
    ) -> None:
        super().__init__(description)
        self.description = description
        self.retry_after = retry_after
        self.status = status


async def with_retries(
    call: Callable[[], Awaitable[T]], policy: RetryPolicy, *, provider: str
) -> T:
    """Run ``call``, repeating it on :class:`TransientError` failures as ``policy`` allows.

    When the repeats run out, raises :class:`~memdir.errors.ModelError` naming the
    provider, the number of attempts and the last failure.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except TransientError as failure:
            attempt += 1
            if attempt > policy.max_retries:
                raise ModelError(
                    f"{provider}: {failure.description} (gave up after {attempt} attempts)",
                    status=failure.status,
                ) from failure.__cause__
            await asyncio.sleep(policy.delay(attempt, failure.retry_after))


def retry_after(exc: Any) -> float | None:
    """The ``retry-after`` seconds of a provider's error response, if it sent one."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def split_known(method: Callable[..., Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` for an SDK method, with the keys it does not declare moved to ``extra_body``.

    Request parameters pass through untouched even when the installed SDK has no
    argument for them (a newer API field, a server-specific option): they are still sent
    in the JSON body, in their original order after the declared ones.
    """
    declared = inspect.signature(method).parameters
    known = {k: v for k, v in kwargs.items() if k in declared}
    unknown = {k: v for k, v in kwargs.items() if k not in declared}
    if unknown:
        known["extra_body"] = {**unknown, **dict(known.get("extra_body") or {})}
    return known
