"""What both fake provider servers share: lifecycle, the script, recording and faults."""

from __future__ import annotations

import abc
import asyncio
import itertools
import json
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit

from memdir.cost import Provider, model_family
from memdir.errors import UsageError
from memdir.messages import Message
from memdir.testing._http import Exchange, LocalServer
from memdir.testing._script import Fault, Handler, RecordedRequest, Reply, check_reply

__all__ = ["FakeServer", "sse"]


class _RefusedError(Exception):
    """A request the fake cannot answer as scripted: answered with an error, and recorded.

    ``payload`` is the error body to send when the provider's has more than a status and a
    message (OpenAI's ``code`` and ``param``); None sends the provider's usual one.
    """

    def __init__(self, status: int, message: str, *, payload: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.payload = payload


def sse(event: str | None, data: object) -> bytes:
    """One Server-Sent Event: an optional ``event:`` line and a ``data:`` line."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


class FakeServer(abc.ABC):
    """What both fakes share: lifecycle, the script, recording and fault handling."""

    _endpoint: ClassVar[str]
    _url_suffix: ClassVar[str]
    _request_id_header: ClassVar[str]
    _first_event: ClassVar[str | None]
    _provider: ClassVar[Provider]

    def __init__(
        self,
        replies: Sequence[Reply],
        *,
        handler: Handler | None,
        min_cache_tokens: int | None,
        model: str,
        clock: Callable[[], float] | None,
        context_tokens: int | None = None,
    ) -> None:
        self._model = model
        self._min_cache_tokens = min_cache_tokens
        self._context_tokens = context_tokens
        self._clock = clock or time.monotonic
        self._handler = handler
        self._replies: deque[Reply] = deque(check_reply(r) for r in replies)
        self._requests: list[RecordedRequest] = []
        self._problems: list[str] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._http: LocalServer | None = None
        self._thread: threading.Thread | None = None

    # Lifecycle.

    def start(self) -> Self:
        """Bind a free port on 127.0.0.1 and serve from a background thread."""
        if self._http is not None:
            raise UsageError("the fake server is already running")
        self._stopping.clear()
        self._http = LocalServer(self._on_request, self._problem)
        # A short poll interval keeps stop() prompt: shutdown() waits for the next poll.
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=f"{type(self).__name__}-{self._http.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections and pending delays, and close every socket."""
        http, thread = self._http, self._thread
        if http is None or thread is None:
            return
        self._http = self._thread = None
        self._stopping.set()
        http.shutdown()
        http.close()
        thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # stop() joins threads; off the event loop so it never blocks other tasks.
        await asyncio.to_thread(self.stop)

    @property
    def base_url(self) -> str:
        """The URL to pass to the SDK client as ``base_url``."""
        if self._http is None:
            raise UsageError("the fake server is not running; call start() or use `with`")
        return f"http://127.0.0.1:{self._http.port}{self._url_suffix}"

    @property
    def model(self) -> str:
        """The model name every response reports."""
        return self._model

    @property
    def min_cache_tokens(self) -> int | None:
        """The shortest prefix, in tokens, that the prompt cache keeps for every model, as
        given to the server; None when each request's ``model`` decides (the table of
        :func:`memdir.cost.model_family`, see :meth:`min_cache_tokens_for`)."""
        return self._min_cache_tokens

    def min_cache_tokens_for(self, model: str) -> int:
        """The shortest prefix, in tokens, that the cache keeps for a request naming ``model``."""
        if self._min_cache_tokens is not None:
            return self._min_cache_tokens
        return model_family(model, self._provider).min_cache_tokens

    def prompt_limit_for(self, model: str) -> int | None:
        """The most prompt tokens the server takes in a request naming ``model``: the
        ``context_tokens`` given to the server, else the model table's limit
        (:attr:`memdir.cost.ModelFamily.prompt_limit`); None for a model the table does
        not know, which is never refused."""
        if self._context_tokens is not None:
            return self._context_tokens
        family = model_family(model, self._provider)
        return family.prompt_limit if family.prefix else None

    @property
    def clock(self) -> Callable[[], float]:
        """The clock cache lifetimes are measured on (``time.monotonic`` unless given one)."""
        return self._clock

    # The script.

    def add_replies(self, *replies: Reply) -> None:
        """Append replies to the script."""
        checked = [check_reply(r) for r in replies]
        with self._lock:
            self._replies.extend(checked)

    @property
    def unused(self) -> int:
        """How many scripted replies have not been served yet."""
        with self._lock:
            return len(self._replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def problems(self) -> list[str]:
        """What went wrong that the script did not ask for (a copy)."""
        with self._lock:
            return list(self._problems)

    def assert_no_errors(self) -> None:
        """Raise AssertionError if the server answered anything the script did not ask for:
        a request with no reply left, an unknown path, an invalid request, a failing handler.
        """
        problems = self.problems
        if problems:
            raise AssertionError("the fake server saw problems:\n- " + "\n- ".join(problems))

    def assert_all_used(self) -> None:
        """Raise AssertionError if scripted replies are left, or if any problem was recorded."""
        self.assert_no_errors()
        left = self.unused
        if left:
            raise AssertionError(f"{left} scripted repl{'y' if left == 1 else 'ies'} never used")

    def reset_cache(self) -> None:
        """Forget everything the prompt cache holds."""
        with self._lock:
            self._reset_cache()

    # Provider hooks.

    @abc.abstractmethod
    def _reset_cache(self) -> None: ...

    @abc.abstractmethod
    def _error_json(self, status: int, message: str, request_id: str) -> dict[str, Any]: ...

    @abc.abstractmethod
    def _invalid(self, body: dict[str, Any]) -> str | None:
        """Why the provider would refuse ``body`` with a 400, or None."""
        ...

    @abc.abstractmethod
    def _prompt_tokens(self, body: dict[str, Any]) -> int:
        """The request's prompt tokens, counted as the context window counts them."""
        ...

    @abc.abstractmethod
    def _too_long(
        self, body: dict[str, Any], tokens: int, limit: int, request_id: str
    ) -> tuple[str, dict[str, Any]]:
        """The provider's message and error body for a prompt of ``tokens`` past ``limit``."""
        ...

    @abc.abstractmethod
    def _answer(
        self, body: dict[str, Any], message: Message, number: int
    ) -> tuple[dict[str, Any], Mapping[str, Any]]:
        """The response body for ``message`` and its usage; called under the lock."""
        ...

    @abc.abstractmethod
    def _frames(self, body: dict[str, Any], response: dict[str, Any]) -> list[bytes]: ...

    @abc.abstractmethod
    def _truncated_frames(self, number: int) -> list[bytes]: ...

    # Serving.

    def _problem(self, message: str) -> None:
        with self._lock:
            self._problems.append(message)

    def _next_reply(self, raw: bytes) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        if self._handler is None:
            raise _RefusedError(500, "no scripted reply left for this request")
        try:
            # A fresh decode, so a handler that edits its argument cannot touch the record.
            return check_reply(self._handler(json.loads(raw)))
        except Exception:
            raise _RefusedError(
                500, "the reply handler failed:\n" + traceback.format_exc()
            ) from None

    def _prepare(
        self, exchange: Exchange, path: str, decoded: object, raw: bytes, number: int
    ) -> Fault | tuple[dict[str, Any], Mapping[str, Any]]:
        """The fault to play, or the response body and its usage; refusals raise."""
        if exchange.command != "POST" or path != self._endpoint:
            raise _RefusedError(404, f"{exchange.command} {path} is not served by this fake")
        if not isinstance(decoded, dict):
            raise _RefusedError(400, "the request body is not a JSON object")
        reason = self._invalid(decoded)
        if reason is not None:
            raise _RefusedError(400, reason)
        self._check_window(decoded, number)
        reply = self._next_reply(raw)
        if isinstance(reply, Fault):
            return reply
        message = Message.assistant(reply) if isinstance(reply, str) else reply
        try:
            with self._lock:
                return self._answer(decoded, message, number)
        except Exception as error:  # a reply the converters reject, say
            raise _RefusedError(500, f"the reply could not be sent: {error!r}") from None

    def _check_window(self, body: dict[str, Any], number: int) -> None:
        """Refuse, with the provider's 400, a prompt longer than the model takes: the APIs
        neither serve nor bill it. Checked before a reply is taken from the script."""
        limit = self.prompt_limit_for(str(body.get("model")))
        if limit is None:
            return
        tokens = self._prompt_tokens(body)
        if tokens > limit:
            message, payload = self._too_long(body, tokens, limit, f"req_fake_{number}")
            raise _RefusedError(400, message, payload=payload)

    def _on_request(self, exchange: Exchange) -> None:
        raw = exchange.read_body()
        number = next(self._ids)
        request_id = f"req_fake_{number}"
        headers = {k.lower(): v for k, v in exchange.headers.items()}
        path = urlsplit(exchange.path).path
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = None
        body = decoded if isinstance(decoded, dict) else {}

        def record(status: int, usage: Mapping[str, Any] | None = None) -> None:
            entry = RecordedRequest(
                path=path, headers=headers, raw=raw, body=body, status=status, usage=usage
            )
            with self._lock:
                self._requests.append(entry)

        reply_headers = {self._request_id_header: request_id}
        try:
            outcome = self._prepare(exchange, path, decoded, raw, number)
        except _RefusedError as refusal:
            self._problem(f"request {number} ({exchange.command} {path}): {refusal.message}")
            record(refusal.status)
            payload = refusal.payload or self._error_json(
                refusal.status, refusal.message, request_id
            )
            exchange.send_bytes(refusal.status, json.dumps(payload).encode(), reply_headers)
            return
        if isinstance(outcome, Fault):
            record(200 if outcome.malformed or outcome.truncate_stream else outcome.status)
            self._fault(exchange, outcome, body, number, {**reply_headers, **outcome.headers})
            return
        response, usage = outcome
        record(200, usage)
        if body.get("stream") is True:
            exchange.send_stream(self._frames(body, response), reply_headers)
        else:
            exchange.send_bytes(200, json.dumps(response).encode(), reply_headers)

    def _fault(
        self,
        exchange: Exchange,
        fault: Fault,
        body: dict[str, Any],
        number: int,
        headers: Mapping[str, str],
    ) -> None:
        if fault.delay > 0 and self._stopping.wait(fault.delay):
            exchange.hang_up()  # stop() was called: leave without answering
            return
        stream = body.get("stream") is True
        if fault.malformed:
            if stream:
                exchange.send_stream([sse(self._first_event, "{not json")], headers)
            else:
                exchange.send_bytes(200, b'{"id": "broken', headers)
        elif fault.truncate_stream:
            if stream:
                exchange.send_stream(self._truncated_frames(number), headers, complete=False)
            else:
                payload = json.dumps({"id": "cut", "padding": "x" * 64}).encode()
                exchange.send_bytes(200, payload, headers, cut_at=len(payload) // 2)
        elif fault.body is None or isinstance(fault.body, Mapping):
            error = fault.body
            if error is None:
                message = f"scripted fault (HTTP {fault.status})"
                error = self._error_json(fault.status, message, f"req_fake_{number}")
            exchange.send_bytes(fault.status, json.dumps(dict(error)).encode(), headers)
        else:
            try:
                json.loads(fault.body)
                content_type = "application/json"
            except ValueError:
                content_type = "text/plain; charset=utf-8"
            exchange.send_bytes(
                fault.status, fault.body.encode(), headers, content_type=content_type
            )
