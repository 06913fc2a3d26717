"""A throwaway PostgreSQL server, for tests and benchmarks of the queue backend.

``initdb`` into a temporary directory, ``pg_ctl start`` on a free port of 127.0.0.1
(with durability switched off: the data dies with the directory anyway), stopped and
removed on exit. PostgreSQL refuses to run as root, so under root the server runs as
the ``postgres`` user, which then owns the directory.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from memdir.errors import MemdirError

__all__ = ["PostgresNotFoundError", "TemporaryPostgres", "find_postgres_bin"]

# Where distributions put the server's binaries when they are not on PATH.
_SEARCH = ("usr/lib/postgresql/*/bin", "usr/local/pgsql/bin", "opt/homebrew/opt/postgresql*/bin")


class PostgresNotFoundError(MemdirError):
    """No PostgreSQL server binaries here (or no unprivileged user to run them as)."""


def find_postgres_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: on PATH, else a usual place."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    for pattern in _SEARCH:
        for candidate in sorted(Path("/").glob(pattern), reverse=True):
            if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
                return candidate
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class TemporaryPostgres:
    """A PostgreSQL server for as long as the ``with`` block (or :meth:`stop`)."""

    def __init__(self, *, max_connections: int = 200, durable: bool = False) -> None:
        self.max_connections = max_connections
        self.durable = durable
        """Keep PostgreSQL's durability (fsync, synchronous commit): what a test that
        crashes the server (:meth:`halt`) needs, or commits acknowledged just before
        the crash come back undone, as they would not on a real server."""
        self.port: int | None = None
        self._base: Path | None = None
        self._bin: Path | None = None
        self._owner: tuple[int, int] | None = None
        self._options = ""

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq connection string for ``dbname`` on this server."""
        if self.port is None:
            raise RuntimeError("the server is not running")
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def _server_user(self) -> tuple[int, int] | None:
        if os.geteuid() != 0:
            return None
        try:
            entry = pwd.getpwnam("postgres")
        except KeyError as exc:
            raise PostgresNotFoundError(
                "running as root and there is no 'postgres' user to run the server as"
            ) from exc
        return entry.pw_uid, entry.pw_gid

    def _run(self, *args: str) -> None:
        assert self._bin is not None
        owner = self._owner
        subprocess.run(
            [str(self._bin / args[0]), *args[1:]],
            check=True,
            capture_output=True,
            # Dropped by the child before the exec (and its supplementary groups too).
            user=owner[0] if owner else None,
            group=owner[1] if owner else None,
            extra_groups=[] if owner else None,
            env={**os.environ, "LC_ALL": "C"},
        )

    def start(self) -> TemporaryPostgres:
        """initdb and start; raises :class:`PostgresNotFoundError` without binaries."""
        self._bin = find_postgres_bin()
        if self._bin is None:
            raise PostgresNotFoundError("no PostgreSQL binaries (initdb, pg_ctl) on this machine")
        owner = self._owner = self._server_user()
        self._base = Path(tempfile.mkdtemp(prefix="memdir-pg-"))
        if owner is not None:
            os.chown(self._base, *owner)
        data = str(self._base / "data")
        self._run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.port = _free_port()
        fast = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
        self._options = (
            f"-p {self.port} -k {self._base} -c listen_addresses=127.0.0.1 "
            f"{'' if self.durable else fast}-c max_connections={self.max_connections}"
        )
        try:
            self._pg_start()
        except BaseException:
            self.stop()
            raise
        return self

    def _pg_start(self) -> None:
        assert self._base is not None
        data, log = str(self._base / "data"), str(self._base / "server.log")
        self._run("pg_ctl", "-D", data, "-l", log, "-o", self._options, "-w", "start")

    def halt(self) -> None:
        """Stop the server as a crash would (``-m immediate``: every connection cut),
        keeping its data and port for :meth:`resume`."""
        if self._base is None:
            raise RuntimeError("the server is not running")
        self._run("pg_ctl", "-D", str(self._base / "data"), "-m", "immediate", "-w", "stop")

    def resume(self) -> None:
        """Start the halted server again, on the same port, with its data."""
        if self._base is None:
            raise RuntimeError("the server was removed")
        self._pg_start()

    def restart(self) -> None:
        """``pg_ctl restart -m fast``, as an operator's: every connection is cut, and the
        server comes back on the same port with the same options and its data (what it
        acknowledged is kept; :meth:`halt` is the crash)."""
        if self._base is None:
            raise RuntimeError("the server is not running")
        data, log = str(self._base / "data"), str(self._base / "server.log")
        # -l as at start: without it the new server would hold pg_ctl's output pipe open.
        self._run(
            "pg_ctl", "-D", data, "-l", log, "-o", self._options, "-m", "fast", "-w", "restart"
        )

    def stop(self) -> None:
        """Stop the server (immediately: nothing in it is worth a checkpoint) and remove
        its directory. Safe to call twice."""
        base, self._base = self._base, None
        if base is None:
            return
        with contextlib.suppress(subprocess.CalledProcessError, OSError):
            self._run("pg_ctl", "-D", str(base / "data"), "-m", "immediate", "-w", "stop")
        self.port = None
        shutil.rmtree(base, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
