"""Retrying a provider call that failed for a reason that may pass."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
import socket
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from memdir.errors import ModelError

__all__ = [
    "RETRYABLE_STATUS",
    "RetryPolicy",
    "TransientError",
    "UnreachableError",
    "is_retryable_status",
    "retry_after",
    "single_attempt",
    "split_known",
    "unreachable",
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
    on_retry: Callable[[str], object] | None = None
    """Told before each wait, in one line, what failed and when the next attempt comes,
    so that a wait is not silence (``memdir extract`` prints it on stderr)."""

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


class UnreachableError(ModelError):
    """The provider's endpoint cannot be reached at all: nothing listens there, or its
    host name does not resolve. Repeating the call would fail the same way, so it is not
    retried, and a caller with more calls to make can stop at the first."""


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
            wait = policy.delay(attempt, failure.retry_after)
            if policy.on_retry is not None:
                with contextlib.suppress(Exception):  # a notice must not change the outcome
                    policy.on_retry(
                        f"{provider}: {failure.description}; trying again in {wait:.1f} s "
                        f"(attempt {attempt + 1} of {policy.max_retries + 1})"
                    )
            await asyncio.sleep(wait)


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


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from or while handling, outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and not any(current is s for s in seen) and len(seen) < 16:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def unreachable(exc: BaseException) -> str | None:
    """Why the endpoint behind a failed connection cannot be reached at all, or None.

    A refused connection (nothing listens on that port) and a host name the resolver
    does not know fail the same way on every repeat, and at once: retrying them only
    turns one line into minutes of silence. A timeout, a reset or a connection cut
    midway may pass and is left to the retry policy (None).
    """
    url = getattr(getattr(exc, "request", None), "url", None)
    where = f" {url}" if url is not None else ""
    for link in _chain(exc):
        if isinstance(link, socket.gaierror):
            host = f" {url.host}" if url is not None and getattr(url, "host", None) else ""
            return f"cannot resolve the host name{host} ({link.strerror or link}); check --base-url"
        if isinstance(link, ConnectionRefusedError):
            return f"connection refused by{where or ' the endpoint'}: is the server running?"
    return None


_single: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def single_attempt(client: T) -> T:
    """``client``, or a copy of it sharing its connections that makes one attempt per call.

    The retries are memdir's (:class:`RetryPolicy`); a caller's SDK client with its own
    ``max_retries`` would repeat each of them again, multiplying the wait. Copies are
    kept per client, so each is made once.
    """
    retries = getattr(client, "max_retries", 0)
    with_options = getattr(client, "with_options", None)
    if not isinstance(retries, int) or retries <= 0 or with_options is None:
        return client
    try:
        copy = _single.get(client)
        if copy is None:
            copy = _single[client] = with_options(max_retries=0)
    except TypeError:  # not weakly referable, or options it does not take: use it as it is
        return client
    return copy  # type: ignore[no-any-return]
