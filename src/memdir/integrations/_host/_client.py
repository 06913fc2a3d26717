"""The host's endpoint and client settings, and memdir's own model on them.

memdir never sends through the host's client: a host may close it as soon as its turn
ends (``async with AsyncOpenAI(...) as client:``), before the memory run starts, and a
request on a closed client fails for good. It sends instead through a client of its own
made with the same settings — base URL, key, organization, project, default headers and
query, timeout, and a custom ``http_client``'s transport, headers, auth and hooks — so
that a memory request goes where the host's go, is billed to the same organization (whose
cache it can then read) and passes the same gateway. Making a client builds an SSL
context (100 ms and more), so it is made in a worker thread, started as soon as the host's
client is seen, never on the host's event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import importlib
import ssl
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal

from memdir.models import Model, ModelRequest, ModelResponse

__all__ = ["ClientSettings", "Endpoint", "HostModel", "HostModels"]

Provider = Literal["openai", "anthropic"]


@dataclass(frozen=True, kw_only=True)
class ClientSettings:
    """What a host's SDK client sends with every request, read from the client."""

    provider: Provider
    """Which SDK: ``openai`` (``AsyncOpenAI``) or ``anthropic`` (``AsyncAnthropic``)."""
    api_key: str | None = None
    base_url: str | None = None
    organization: str | None = None
    """OpenAI's ``organization`` (the ``OpenAI-Organization`` header)."""
    project: str | None = None
    """OpenAI's ``project`` (the ``OpenAI-Project`` header)."""
    auth_token: str | None = None
    """Anthropic's bearer token, for a client made with one instead of a key."""
    default_headers: tuple[tuple[str, str], ...] = ()
    default_query: tuple[tuple[str, str], ...] = ()
    timeout: Any = field(default=None, compare=False)
    """The client's timeout as the SDK holds it (a number or an ``httpx.Timeout``)."""
    http_client: Any = field(default=None, compare=False)
    """The host's own ``httpx.AsyncClient`` when it gave one (a proxy, a gateway's auth,
    a custom transport); memdir's client sends through the same transport."""
    transport_id: int | None = None
    """``id`` of that client's transport: settings over another transport differ."""

    @classmethod
    def of(cls, client: object) -> ClientSettings | None:
        """The settings of an ``openai.AsyncOpenAI`` or ``anthropic.AsyncAnthropic``
        client (or one made from either with ``with_options``); None for anything else."""
        module = type(client).__module__
        provider: Provider
        if module.startswith("openai"):
            provider = "openai"
        elif module.startswith("anthropic"):
            provider = "anthropic"
        else:
            return None
        headers = getattr(client, "_custom_headers", None) or {}
        query = getattr(client, "_custom_query", None) or {}
        pool = getattr(client, "_client", None)
        custom = pool if pool is not None and not _is_sdk_default(pool, provider) else None
        transport = getattr(custom, "_transport", None) if custom is not None else None
        return cls(
            provider=provider,
            api_key=_text(getattr(client, "api_key", None)),
            base_url=_text(str(getattr(client, "base_url", "") or "")),
            organization=_text(getattr(client, "organization", None)),
            project=_text(getattr(client, "project", None)),
            auth_token=_text(getattr(client, "auth_token", None)),
            default_headers=tuple((str(k), str(v)) for k, v in headers.items()),
            default_query=tuple((str(k), str(v)) for k, v in query.items()),
            timeout=getattr(client, "timeout", None),
            http_client=custom,
            transport_id=id(transport) if transport is not None else None,
        )

    def new_client(self) -> Any:
        """A client of memdir's own with these settings (blocking: builds an SSL
        context; call it off the event loop). It makes one attempt per call: memdir
        retries on its own."""
        kwargs: dict[str, Any] = {
            "api_key": self.api_key,
            "base_url": self.base_url,
            "default_headers": dict(self.default_headers) or None,
            "default_query": dict(self.default_query) or None,
            "max_retries": 0,
        }
        if self.timeout is not None:
            kwargs["timeout"] = self.timeout
        if self.http_client is not None:
            kwargs["http_client"] = _copy_http_client(self.http_client)
        else:
            sdk = importlib.import_module(self.provider)
            # The SDK's own kind of pool, on an SSL context made once per process: a
            # context of its own would load the CA bundle again, holding the GIL.
            kwargs["http_client"] = sdk.DefaultAsyncHttpxClient(
                verify=sdk_ssl_context(self.provider)
            )
        if self.provider == "openai":
            from openai import AsyncOpenAI

            return AsyncOpenAI(organization=self.organization, project=self.project, **kwargs)
        from anthropic import AsyncAnthropic

        return AsyncAnthropic(auth_token=self.auth_token, **kwargs)


@functools.cache
def sdk_ssl_context(provider: Provider) -> ssl.SSLContext:
    """The SSL context the SDK's HTTP library would make for a client (its CA bundle, its
    environment), made once per process: loading the bundle takes 10-20 ms, much of it
    holding the GIL, so a host's loop stalls even when a thread does it. Blocking: call
    it ahead of time, off the loop (:func:`warm_ssl_contexts`)."""
    sdk = importlib.import_module(provider)
    library = _library_of(sdk.DefaultAsyncHttpxClient)
    context: ssl.SSLContext = library.create_ssl_context()
    return context


def warm_ssl_contexts() -> None:
    """Make :func:`sdk_ssl_context` for each SDK this process has imported already (and
    import none): for a worker thread started before the host's first turn."""
    for provider in ("openai", "anthropic"):
        if provider in sys.modules:
            with contextlib.suppress(Exception):
                sdk_ssl_context(provider)


def _library_of(klass: type) -> Any:
    """The ``httpx``-like library whose ``AsyncClient`` ``klass`` is or derives from
    (SDKs take ``httpx`` and, lately, ``httpx2``)."""
    base = next(
        (k for k in klass.__mro__ if k.__name__ == "AsyncClient" and hasattr(k, "send")), klass
    )
    return importlib.import_module(base.__module__.partition(".")[0])


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _is_sdk_default(pool: object, provider: Provider) -> bool:
    """Whether ``pool`` is the HTTP client the SDK made itself (no ``http_client`` given)."""
    try:
        if provider == "openai":
            from openai._base_client import AsyncHttpxClientWrapper as OpenAIDefault

            return isinstance(pool, OpenAIDefault)
        from anthropic._base_client import AsyncHttpxClientWrapper as AnthropicDefault

        return isinstance(pool, AnthropicDefault)
    except ImportError:  # an SDK laid out otherwise: treat its pool as the user's
        return False


def _copy_http_client(old: Any) -> Any:
    """An ``httpx.AsyncClient`` that sends as ``old`` does — its transport and mounts,
    headers, auth, timeout, redirects and the user's own event hooks (memdir's recorders
    left out) — and lives on when ``old`` is closed: a closed client refuses requests,
    while the transport it closed opens new connections when asked."""
    library = _library_of(type(old))  # the same library as ``old``

    hooks = {
        event: [h for h in handlers if not getattr(h, "__module__", "").startswith("memdir.")]
        for event, handlers in old.event_hooks.items()
    }
    new = library.AsyncClient(
        transport=old._transport,
        auth=old.auth,
        headers=old.headers,
        timeout=old.timeout,
        follow_redirects=old.follow_redirects,
        event_hooks=hooks,
        trust_env=False,  # the mounts below are the host's, proxies included
    )
    new._mounts = dict(old._mounts)
    return new


@dataclass(frozen=True)
class Endpoint:
    """Where a host's model lives: its client's settings and the model's name."""

    settings: ClientSettings
    model: str


class HostModel:
    """memdir's :class:`~memdir.models.Model` for a host's endpoint, on a client of its own.

    The model (and its client) is built in a worker thread as soon as this object is
    made; :meth:`request` waits for it without blocking the loop.
    """

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._built: concurrent.futures.Future[Model] = concurrent.futures.Future()
        threading.Thread(target=self._build, name="memdir-client", daemon=True).start()

    def _build(self) -> None:
        try:
            settings, name = self.endpoint.settings, self.endpoint.model
            model: Model
            if settings.provider == "openai":
                from memdir.models import OpenAIModel

                model = OpenAIModel(name, client_factory=settings.new_client)
            else:
                from memdir.models import AnthropicModel

                model = AnthropicModel(name, client_factory=settings.new_client)
            self._built.set_result(model)
        except BaseException as exc:  # reported by the request that needs it
            self._built.set_exception(exc)

    @property
    def name(self) -> str:
        """``openai:<model>`` or ``anthropic:<model>``."""
        return f"{self.endpoint.settings.provider}:{self.endpoint.model}"

    async def model(self) -> Model:
        """The built model (waited for in a thread the first time, if still building)."""
        if self._built.done():
            return self._built.result()
        return await asyncio.wrap_future(self._built)

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` on memdir's client for this endpoint."""
        return await (await self.model()).request(request)

    async def aclose(self) -> None:
        """Close what the model holds on the running loop."""
        if self._built.done() and self._built.exception() is None:
            aclose = getattr(self._built.result(), "aclose", None)
            if aclose is not None:
                await aclose()


class HostModels:
    """One :class:`HostModel` per endpoint, the latest few kept: a host that makes a
    client per turn gets the same model back (its settings are the same) and keeps no
    client alive."""

    def __init__(self, kept: int = 8) -> None:
        self._kept = kept
        self._models: OrderedDict[Endpoint, HostModel] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, endpoint: Endpoint) -> HostModel:
        """The model for ``endpoint``; made (and its build started) on first sight."""
        with self._lock:
            model = self._models.get(endpoint)
            if model is None:
                model = self._models[endpoint] = HostModel(endpoint)
            self._models.move_to_end(endpoint)
            while len(self._models) > self._kept:
                self._models.popitem(last=False)
            return model

    async def aclose(self) -> None:
        """Close what the models hold on the running loop."""
        with self._lock:
            models = list(self._models.values())
        for model in models:
            await model.aclose()

    def of_client(self, client: object, model: str) -> HostModel | None:
        """:meth:`get` for an SDK client and a model name; None for an unknown client."""
        settings = ClientSettings.of(client)
        return self.get(Endpoint(settings, model)) if settings is not None else None
