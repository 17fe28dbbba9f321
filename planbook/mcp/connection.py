"""One MCP server's connection: its process (or URL), its session and the private event loop
they live on, for the toolbox in :mod:`planbook.mcp.client`.

An MCP session is bound to the event loop and the task that opened it, and a notebook's
own loop is already running. So each connection owns one private loop thread for the
server's life: the session is opened and closed in one task there, and a tool call from
any thread (the runner's, a parallel worker) is a task started there that the calling thread
waits for (:class:`Handoff`). Ctrl-C and a step's timeout therefore work as for any blocking
tool. Closing ends the server's process group (a server may start processes of its own).
The SDK is imported inside the loop's task, when a connection starts (``import planbook``
and ``import planbook.mcp`` stay without it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout  # the builtin TimeoutError only from 3.11
from concurrent.futures import wait as wait_futures
from typing import Any

from ..data.errors import MCPError, MCPServerNotFound
from ..data.secret import Secret, reveal
from ..outbound import is_secret_name, remember
from ..outbound.redact import url_secrets

__all__ = ["Connection", "Handoff", "start_secrets"]

#: the schemes of an Authorization header's value: the credential is what follows
_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "apikey", "api-key"})


def start_secrets(command: list[str] | None, env: Mapping[str, Any] | None, headers: Mapping[str, Any] | None,
                  url: str | None) -> list[str]:
    """What a server is started with that is secret: the values of secret-named environment
    variables and headers (``GITHUB_TOKEN``, ``Authorization``, ``X-Api-Key``; an
    Authorization value's credential alone too, and a Basic one's password), the values of
    secret-named flags of the command (``--api-key X``, ``--token=X``), and the credentials of
    every URL among them (user, password, query values). A :class:`~planbook.data.secret.Secret`
    is known already (its value joined the vault when it was made or read)."""
    found: list[str] = []
    for name, value in [*(env or {}).items(), *(headers or {}).items()]:
        if isinstance(value, Secret) or not isinstance(value, str):
            continue
        if is_secret_name(str(name)):
            found += [value, *_credential_parts(value)]
        found += url_secrets(value) if "://" in value else []
    args = list(command or [])
    for index, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag.startswith("-") and is_secret_name(flag.lstrip("-")):
            if eq:
                found.append(value)
            elif index + 1 < len(args) and not args[index + 1].startswith("-"):
                found.append(args[index + 1])
        found += url_secrets(arg) if "://" in arg else []
    return found + url_secrets(url)


def _credential_parts(value: str) -> list[str]:
    """``Bearer abc`` → ``abc``; ``Basic dXNlcjpwdw==`` → also ``user:pw`` and ``pw``."""
    scheme, _, credential = value.strip().partition(" ")
    if scheme.lower() not in _AUTH_SCHEMES or not credential.strip():
        return []
    credential = credential.strip()
    parts = [credential]
    if scheme.lower() == "basic":
        import base64
        import binascii

        try:
            pair = base64.b64decode(credential, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return parts
        parts += [pair, pair.partition(":")[2]]
    return parts


def _values(mapping: Mapping[str, Any] | None, what: str) -> dict[str, Any] | None:
    """``env=`` or ``headers=`` checked: text or a :class:`Secret` under each name."""
    if mapping is None:
        return None
    if not isinstance(mapping, Mapping):
        raise TypeError(f"connect({what}=...): a mapping of names to texts, got {type(mapping).__name__}")
    for name, value in mapping.items():
        if not isinstance(name, str) or not isinstance(value, (str, Secret)):
            raise TypeError(f"connect({what}=...): {name!r} must name a text or a planbook.Secret, got "
                            f"{type(value).__name__}: convert it with str(...) or give Secret.env(NAME)")
    return dict(mapping)


class Connection:
    """One server process (or URL) and its session, on a private event-loop thread."""

    def __init__(self, label: str, *, command: list[str] | None, env: Mapping[str, Any] | None, cwd: str | None,
                 url: str | None, headers: Mapping[str, Any] | None) -> None:
        env, headers = _values(env, "env"), _values(headers, "headers")
        # secrets of the process before anything starts: the server's log lines, an MCPError, the
        # step's error, the record and the store all show them as ***
        remember(start_secrets(command, env, headers, url))
        self.label = label
        #: env and header values as given: a planbook.Secret stays one until the server is started
        self.command, self.env, self.cwd, self.url, self.headers = command, env, cwd, url, headers
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=f"planbook-mcp {label}", daemon=True)
        self.session: Any = None
        self.version: str | None = None
        self.pid: int | None = None
        #: the HTTP client handed to the SDK (a URL with headers), closed with the session
        self.http_client: Any = None
        self.closed = False
        self._stop: asyncio.Event | None = None
        self._main: Future[None] | None = None
        #: the cancel scope around the session's life (set on the loop), and whether the start was given up
        self._scope: Any = None
        self._abandoned = False
        #: how far the start got, for the message when it runs out of time
        self._phase = "waiting for its event loop"
        self._log_text: str | None = None
        self.log_path: str | None = None
        if command is not None:
            fd, self.log_path = tempfile.mkstemp(prefix="planbook-mcp-", suffix=".log")
            os.close(fd)

    # ------------------------------------------------------------- life
    def start(self, timeout: float) -> list[Any]:
        """Start the server, open the session and list the tools (all pages), within ``timeout`` s.

        The timeout is a deadline for all of it: a server that never answers ``initialize``,
        or pages its tool list without end, is given up at about ``timeout`` and its process
        ended before the error is raised (a server that outlived its error would stay running).
        """
        self.thread.start()
        ready: Future[list[Any]] = Future()
        self._main = asyncio.run_coroutine_threadsafe(self._serve(ready), self.loop)

        def ended(f: Future[Any]) -> None:  # before the tools were listed: that is the error
            if not ready.done():
                ready.set_exception((None if f.cancelled() else f.exception())
                                    or MCPError(f"the MCP server {self.label} ended before listing its tools"))

        self._main.add_done_callback(ended)
        try:
            return ready.result(timeout)
        except BaseException as exc:
            phase = self._phase
            self._abandon()
            self.close()
            if isinstance(exc, (KeyboardInterrupt, MCPError)):
                raise
            if isinstance(exc, FutureTimeout):
                raise MCPError(f"the MCP server {self.label} did not start within start_timeout={timeout:g} s "
                               f"({phase}), so it was stopped. {self._advice(phase)}{self._log_tail()}") from None
            if self.command and isinstance(_innermost(exc), FileNotFoundError) and shutil.which(self.command[0]) is None:
                raise MCPServerNotFound(self.label, self.command[0]) from None
            raise MCPError(f"could not start the MCP server {self.label}: {reason_of(exc)}{self._log_tail()}") from None

    def _advice(self, phase: str) -> str:
        """What to do about a start that ran out of time, by how far it got."""
        if phase.startswith("listing"):
            return ("It was still listing its tools, each page pointing to a next one: a list that never ends is a "
                    "fault of the server to report to its authors; a server with very many tools may need longer: "
                    "connect(..., start_timeout=SECONDS).")
        where = ("check that the URL is a streamable-HTTP MCP endpoint" if self.url is not None else
                 "check that the command runs an MCP server speaking stdio (run in a terminal, it waits for input "
                 "and writes nothing but protocol messages to stdout)")
        return f"If it is slow to start, give it longer: connect(..., start_timeout=SECONDS); otherwise {where}."

    def _abandon(self) -> None:
        """End a start that failed or ran out of time: cancel it and end the server's process now.

        The SDK's own shutdown waits seconds for a server to exit after its stdin closes; a
        server that did not start in time gets SIGTERM at once (its process group: what it
        started too), and SIGKILL if the start still has not unwound.
        """
        main = self._main
        if main is None or main.done():
            return
        self.loop.call_soon_threadsafe(self._cancel_start)
        pid = self.pid if self.pid is not None else _pid_with_stderr(self.log_path) if self.log_path else None
        if pid is not None:
            _signal_group(pid, signal.SIGTERM)
        if not wait_futures([main], timeout=2.0).done and pid is not None:
            _signal_group(pid, signal.SIGKILL)
        wait_futures([main], timeout=10.0)  # the SDK's shutdown is bounded; this only guards against a stuck loop

    def _cancel_start(self) -> None:
        """On the loop: cancel the start (the SDK's transport then closes the session and reaps the process)."""
        self._abandoned = True
        if self._scope is not None:
            self._scope.cancel()

    async def _serve(self, ready: Future[list[Any]]) -> None:
        # the SDK (an optional extra) loads when a server starts, not with planbook
        import anyio
        from mcp import ClientSession
        from mcp.types import PaginatedRequestParams

        if self._abandoned:  # given up before this task first ran
            return
        self._stop = asyncio.Event()
        # one scope around the whole life: cancelling it unwinds a start stuck anywhere
        with anyio.CancelScope() as self._scope:
            transport, client = self._transport()
            async with contextlib.AsyncExitStack() as stack:
                if client is not None:  # the SDK leaves open a client it was handed: closed here, with the session
                    await stack.enter_async_context(client)
                self.http_client = client
                self._phase = "connecting to it" if self.url is not None else "starting its process"
                streams = await stack.enter_async_context(transport)
                async with ClientSession(streams[0], streams[1]) as session:
                    self._phase = "waiting for its answer to initialize"
                    initialized = await session.initialize()
                    info = getattr(initialized, "server_info", None)
                    #: the server's name and version: part of a cached call's key (a new server version
                    #: may answer differently)
                    self.version = f"{getattr(info, 'name', '?')} {getattr(info, 'version', '?')}"
                    tools: list[Any] = []
                    cursor = None
                    pages = 0
                    while True:
                        self._phase = (f"listing its tools: {pages} pages, {len(tools)} tools so far" if pages
                                       else "waiting for its list of tools")
                        asked = PaginatedRequestParams(cursor=cursor) if cursor else None
                        page = await session.list_tools(params=asked)
                        pages += 1
                        tools.extend(page.tools)
                        cursor = page.next_cursor
                        if not cursor:
                            break
                    self.session = session
                    if self.log_path is not None:
                        self.pid = _pid_with_stderr(self.log_path)
                    self._phase = "started"
                    ready.set_result(tools)
                    await self._stop.wait()

    def _transport(self) -> tuple[Any, Any]:
        """The SDK transport to open, and the HTTP client it was handed (None: it makes its own)."""
        if self.url is not None:
            from mcp.client.streamable_http import streamable_http_client

            client = None
            if self.headers:  # the SDK's own client settings (timeouts for long calls), with the headers
                from mcp.shared._httpx_utils import create_mcp_http_client

                client = create_mcp_http_client(headers=reveal(dict(self.headers)))  # the call boundary
            return streamable_http_client(self.url, http_client=client), client
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert self.command is not None and self.log_path is not None
        params = StdioServerParameters(command=self.command[0], args=self.command[1:],
                                       env=reveal(dict(self.env or {})) or None, cwd=self.cwd)  # the call boundary
        self._log = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115 - the server writes it while it runs
        return stdio_client(params, errlog=self._log), None

    def close(self) -> None:
        """Close the session and stop the server (waits for the process to end). Idempotent."""
        if self.closed:
            return
        self.closed = True
        if self.thread.is_alive():
            if self._stop is not None:
                self.loop.call_soon_threadsafe(self._stop.set)
            if self._main is not None:
                try:
                    self._main.result(15)
                except BaseException:  # noqa: BLE001 - a session that already broke still closes
                    pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()
        if self.log_path is not None:
            if getattr(self, "_log", None) is not None:
                self._log.close()
            self._log_text = self._read_log()
            try:
                os.unlink(self.log_path)
            except OSError:
                pass

    # ------------------------------------------------------------- calls
    def call(self, name: str, args: dict[str, Any], timeout: float | None) -> Any:
        if self.closed:
            raise MCPError(f"the MCP server {self.label} is closed: connect again to call {name!r}")
        if self.session is None or self._main is None or self._main.done():
            raise MCPError(f"the MCP server {self.label} is gone{self._exit_note()}{self._log_tail()}")
        call = Handoff(self.loop, self.session.call_tool(name, args))
        try:
            result = call.result(timeout)
        except KeyboardInterrupt:
            call.cancel()
            raise
        except FutureTimeout:
            call.cancel()
            raise MCPError(f"MCP tool {name!r} on {self.label} did not answer within {timeout:g} s") from None
        except (Exception, asyncio.CancelledError) as exc:  # cancelled: the session was torn down
            if self.pid is not None and not _alive(self.pid) or self._main.done():
                raise MCPError(f"the MCP server {self.label} stopped during the call to {name!r}"
                               f"{self._exit_note()}: {reason_of(exc)}{self._log_tail()}") from None
            raise MCPError(f"MCP tool {name!r} on {self.label} failed: {reason_of(exc)}") from None
        if result.is_error:
            raise MCPError(f"MCP tool {name!r} on {self.label} reported an error: {_text_of(result) or '(no message)'}")
        if result.structured_content is not None:
            return result.structured_content
        return _content_value(result)

    # ------------------------------------------------------------- the log
    def log_text(self) -> str:
        return self._log_text if self._log_text is not None else self._read_log()

    def _read_log(self) -> str:
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def _log_tail(self, lines: int = 5) -> str:
        tail = [line for line in self.log_text().splitlines() if line.strip()][-lines:]
        return ("; the server's last log lines:\n  " + "\n  ".join(tail)) if tail else ""

    def _exit_note(self) -> str:
        if self.pid is None:
            return ""
        return f" (pid {self.pid} has exited)" if not _alive(self.pid) else f" (pid {self.pid})"


class Handoff:
    """A coroutine run on the session's loop and waited for on the calling thread.

    What ``run_coroutine_threadsafe(...).result()`` does, with less in between: the loop is
    woken once to start a task, and the task's end releases one lock the caller sleeps on
    (no concurrent Future chained to the task, with its condition and callbacks). A call's
    own time is a few ms of which this handoff is the part planbook adds; under load each
    thread it wakes waits for a core, so it wakes as little as it can.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, coro: Any) -> None:
        self._loop = loop
        self._coro = coro
        self._task: asyncio.Task[Any] | None = None
        self._ended = threading.Lock()
        self._ended.acquire()
        loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:  # on the loop
        self._task = self._loop.create_task(self._coro)
        self._task.add_done_callback(self._end)

    def _end(self, task: asyncio.Task[Any]) -> None:  # on the loop
        if not task.cancelled():
            task.exception()  # retrieved: a call given up on that then failed is not logged as lost
        self._ended.release()

    def result(self, timeout: float | None) -> Any:
        """The coroutine's result (or its exception); FutureTimeout after ``timeout`` s."""
        if not self._ended.acquire(timeout=-1 if timeout is None else timeout):
            raise FutureTimeout()
        assert self._task is not None  # released only by the task's end
        return self._task.result()

    def cancel(self) -> None:
        """Cancel the call (it was given up on: a timeout, Ctrl-C). Runs after ``_start`` on the loop."""
        with contextlib.suppress(RuntimeError):  # the loop has closed: nothing left to cancel
            self._loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()




def _text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content if getattr(c, "type", "") == "text").strip()


def _content_value(result: Any) -> Any:
    """Text content as a string (one block) or a list; other blocks as their JSON."""
    if all(getattr(c, "type", "") == "text" for c in result.content):
        texts = [c.text for c in result.content]
        return texts[0] if len(texts) == 1 else texts
    return [c.model_dump(mode="json", exclude_none=True) for c in result.content]


def _innermost(exc: BaseException) -> BaseException:
    """The first exception inside task groups' exception groups."""
    while getattr(exc, "exceptions", None):  # an exception group (3.11+, or anyio's backport)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


def reason_of(exc: BaseException) -> str:
    """The innermost useful message of an exception (task groups wrap them): what a connection's
    errors and the client's warnings about a skipped tool say went wrong."""
    exc = _innermost(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        pass
    if sys.platform.startswith("linux"):
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the server ``pid`` and what it started: the SDK starts a server in a session of its
    own, so its process group is its pid; a process that leads no group gets the signal alone."""
    try:
        if hasattr(os, "killpg") and os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (OSError, AttributeError):  # gone already (or no such signal here): nothing to end
        pass


def _pid_with_stderr(path: str) -> int | None:
    """The child process whose stderr is ``path`` (Linux: /proc), so tests and messages can name it."""
    if not os.path.isdir("/proc"):
        return None
    me = os.getpid()
    real = os.path.realpath(path)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/fd/2") != real:
                continue
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me:
            return int(entry)
    return None
