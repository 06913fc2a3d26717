"""The host core: what every framework integration does the same way, in one place.

A framework module (an *adapter*) keeps only what differs by framework: it reads the
framework's messages as the conversation grows, names the conversation by the
framework's own id, records the request its model last sent, says which endpoint and
client settings that model uses, and loads memory back through the framework's own
mechanism. It hands each finished turn to a :class:`HostCore`, which owns the rest::

    core = HostCore(memory_dir, model, config=config, sink=sink, notify=notify,
                    backend=backend, max_conversations=256)

    # as soon as the host's client is seen (its own client is built in a thread):
    endpoint = Endpoint(ClientSettings.of(sdk_client), model_name)
    core.host_model(endpoint)

    # at a turn's end (never raises; a failure becomes an ``extract.error`` event):
    core.report(lambda: HostTurn(
        messages=conversation,               # read incrementally by the adapter
        conversation=session_id,             # the framework's conversation id, or None
        request=SentRequest(wire="chat", body=body, replaces=n, sent_at=t),  # or None
        endpoint=endpoint,
        fallback=None if body else "why there is no request",
    ))

    loaded = await core.aload_memory(session_id)   # LoadedMemory(instructions, index)
    await core.run_tool(tool, tool_input, cwd=cwd, conversation=session_id)
    await core.drain(); core.drain_sync(); core.close()

- :class:`HostCore`: the backend (made in one place, :func:`default_backend`: a
  ``memdir.extract.InProcessBackend``; any ``memdir.extract.MemoryBackend`` may be
  passed, the queue's ``QueueExtractor`` among them; ``Backend`` is that protocol), the
  host-model policy (user model, else the host's endpoint on a client of memdir's own,
  else ``$MEMDIR_MODEL``, else offline), one fork-parameter builder per wire format (:func:`fork_params`), the error
  policy (:meth:`HostCore.failed`), memory loaded back (:meth:`HostCore.load_memory`,
  frozen per conversation so its requests share one cached prefix), the memory tools
  (:meth:`HostCore.run_tool`), drain and close.
- :class:`ClientSettings` / :class:`Endpoint` / :class:`HostModel`: the host's client
  settings (base URL, key, organization, project, default headers and query, a custom
  ``http_client``'s transport) and memdir's model on a client of its own built from them
  off the loop, which outlives the host's client.
- :class:`SentRequest`, :func:`fork_params`, :func:`anthropic_fork_params`,
  :func:`chat_fork_params`, :func:`has_cache_breakpoint`: the request as sent, and the
  fork built from it.
- :class:`Sessions`: an adapter's bounded per-conversation state.
- :class:`GrowingReader`: a conversation read as it grows, each framework message once.

Nothing here imports a framework.
"""

from memdir.extract import MemoryBackend as Backend
from memdir.integrations._host._backend import default_backend
from memdir.integrations._host._client import ClientSettings, Endpoint, HostModel, HostModels
from memdir.integrations._host._core import HostCore, HostTurn, LoadedMemory, Sessions
from memdir.integrations._host._reader import GrowingReader
from memdir.integrations._host._requests import (
    SentRequest,
    anthropic_fork_params,
    chat_fork_params,
    fork_params,
    has_cache_breakpoint,
)

__all__ = [
    "Backend",
    "ClientSettings",
    "Endpoint",
    "GrowingReader",
    "HostCore",
    "HostModel",
    "HostModels",
    "HostTurn",
    "LoadedMemory",
    "SentRequest",
    "Sessions",
    "anthropic_fork_params",
    "chat_fork_params",
    "default_backend",
    "fork_params",
    "has_cache_breakpoint",
]
