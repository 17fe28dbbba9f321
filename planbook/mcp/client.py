"""An MCP server's tools as a planbook :class:`~planbook.workers.tools.Toolbox`.

Each server's tools are :class:`MCPTool` objects typed from their JSON Schemas, gathered in an
:class:`MCPToolbox`; :func:`connect` starts one. The server's process, its session and the
private event loop they run on are :mod:`planbook.mcp.connection`'s (a call from any
thread waits for a task on that loop, so Ctrl-C and a step's timeout work as for any
blocking tool).
"""

from __future__ import annotations

import atexit
import math
import os
import shlex
import shutil
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ..data.errors import MCPError
from ..data.secret import Secret
from ..outbound import mask_text
from ..workers.tools import Tool, Toolbox
from .connection import Connection, reason_of
from .schema import Argument, args_model, arguments, python_signature

#: seconds to wait for a server to start and list its tools
START_TIMEOUT = 60.0


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise MCPError('MCP needs the official SDK: pip install "planbook[mcp]" (mcp>=2); for the tutorials, '
                       'pip install "planbook[tutorials]"') from None


class MCPTool(Tool):
    """A tool served by an MCP server: the server's schema is what a model is shown."""

    def __init__(self, fn: Any, *, name: str, mcp_name: str, description: str, input_schema: dict[str, Any],
                 hints: Any, cache: bool, version: str | None = None, approve: bool | None = None) -> None:
        read_only = bool(getattr(hints, "read_only_hint", None))
        #: the MCP spec's defaults: a tool that is not read-only may be destructive
        self.destructive = not read_only and getattr(hints, "destructive_hint", None) is not False
        idempotent = (read_only or bool(getattr(hints, "idempotent_hint", None))) and not self.destructive
        # cache=True (asked for on connect) applies to the tools that may be called twice; the
        # others are never cached (a cached call would skip its effect), as for any tool
        # a call the server *says* may destroy something (destructive_hint=True) waits for a
        # decision; a tool with no hints at all (most servers give none) is idempotent=False
        # but runs unasked. approve=False on connect() lets every call run, True makes all ask
        said_destructive = getattr(hints, "destructive_hint", None) is True and not read_only
        super().__init__(fn, name=name, description=description, cache=cache and idempotent, idempotent=idempotent,
                         version=version, approve=said_destructive if approve is None else approve)
        #: the tool's name on the server (``name`` is the name in plans, with the prefix)
        self.mcp_name = mcp_name
        self.input_schema = input_schema
        self.hints = hints
        # the arguments are typed from the schema, not from ``fn``'s signature: a server's argument
        # may be named ``from`` or ``_x`` (plans pass a mapping, so any name can be sent as it is)
        args, notes = arguments(input_schema)
        model, attrs, refused = args_model(name, args)
        self.args_model = model
        self._use_fields({arg: model.model_fields[attr] for arg, attr in attrs.items()})
        #: the server's argument name -> the model's field name, where they differ
        self._renamed = {arg: attr for arg, attr in attrs.items() if arg != attr}
        #: no readable ``properties``: any argument is passed on unchecked
        self._open = bool(notes) and not args
        #: the typed arguments (an argument pydantic refused is ``Any``)
        self.arguments = [Argument(a.name, self._fields[a.name].annotation, a.required, a.default) for a in args]
        #: why some arguments are not type-checked (shown as a warning on connect)
        self.untyped = notes + refused

    @property
    def _takes_kwargs(self) -> bool:
        return self._open

    def coerce(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """As :meth:`Tool.coerce`, keyed by the server's argument names (``from``, ``_x``)."""
        if not self._renamed:
            return super().coerce(args)
        from pydantic import ValidationError

        known = {k: v for k, v in args.items() if k in self._fields}
        try:
            model = self.args_model.model_validate(known)
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e.get('input')!r})" for e in exc.errors())
            raise ValueError(f"bad arguments for tool {self.name!r}: {details}") from None
        coerced = {k: model.__dict__[self._renamed.get(k, k)] for k in known}
        coerced.update({k: v for k, v in args.items() if k not in self._fields})
        return coerced

    @property
    def parameters(self) -> dict[str, Any]:
        schema = dict(self.input_schema)
        schema.pop("title", None)
        return schema


class MCPToolbox(Toolbox):
    """The tools of one MCP server. Use it as ``tools=`` of a run; ``close()`` stops the server.

    ``with planbook.mcp.connect([...]) as tools:`` closes it at the end of the block; the
    server is also stopped at interpreter exit (a kernel's shutdown).
    """

    def __init__(self, connection: Connection) -> None:
        super().__init__()
        self._connection = connection
        self._key: tuple[Any, ...] = ()

    @property
    def server(self) -> str:
        """What was connected to: the command line or the URL."""
        return self._connection.label

    @property
    def pid(self) -> int | None:
        """The server process's id (stdio servers on Linux; None otherwise)."""
        return self._connection.pid

    @property
    def server_log(self) -> str:
        """What the server wrote to its stderr (kept after ``close()``), with the secrets it was
        started with (and every other the process knows) as ``***``."""
        return mask_text(self._connection.log_text())

    @property
    def closed(self) -> bool:
        return self._connection.closed

    def close(self) -> None:
        """Stop the server and close the session; calls after this raise :class:`MCPError`."""
        self._connection.close()
        _LIVE[:] = [box for box in _LIVE if box is not self]  # by identity: a Mapping's == compares items

    def __enter__(self) -> MCPToolbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"pid {self.pid}" if self.pid else "open"
        return mask_text(f"MCPToolbox({self.server!r}, {state}: {sorted(self)})")  # a URL's credentials: ***


#: the open connections: connecting again to the same thing (a re-run notebook cell)
#: closes the earlier one, so one server is left, not two; all are closed at exit
_LIVE: list[MCPToolbox] = []



def server_program(name: str) -> str:
    """A server installed in the kernel's own environment (``pip install mcp-server-time`` in a
    virtualenv whose ``bin`` is not on PATH, as when Jupyter was started without activating it)
    is found beside the interpreter; anything else is left for the OS to find, or to report."""
    if os.sep in name or (os.altsep and os.altsep in name) or shutil.which(name):
        return name
    beside = shutil.which(name, path=os.path.dirname(sys.executable))
    return beside or name

def connect(
    command: str | Sequence[str] | None = None,
    *,
    url: str | None = None,
    env: Mapping[str, str | Secret] | None = None,
    cwd: str | None = None,
    headers: Mapping[str, str | Secret] | None = None,
    prefix: str = "",
    cache: bool = False,
    call_timeout: float | None = None,
    replace: bool = True,
    start_timeout: float = START_TIMEOUT,
    approve: bool | None = None,
) -> MCPToolbox:
    """Start an MCP server (``command``, over stdio) or reach one (``url``, streamable HTTP).

    Returns a Toolbox with the server's tools, typed from their input schemas so a plan is
    checked before it runs. ``prefix`` is put before every tool name (to combine servers
    whose names clash). ``cache=True`` lets a run with a store reuse earlier results (off
    by default: a server's read-only or idempotent hints do not mean "same answer").
    ``approve``: by default a tool the server marks ``destructive_hint=True`` waits for a
    decision before each call, as
    ``@planbook.tool(approve=True)`` does; ``approve=False`` lets every call run unasked,
    ``approve=True`` makes every call ask.
    ``call_timeout``: seconds one call may take. ``replace``: close an open connection to
    the same command or URL first (a notebook cell run again leaves one server, not two).
    ``env`` and ``headers`` values may be a :class:`planbook.Secret`, revealed only when the
    server is started; the values of secret-named variables, headers and flags, and the
    credentials of a URL, are secrets of the process from before the server starts (its log
    lines, errors, the record and the store show them as ``***``).
    """
    if (command is None) == (url is None):
        raise ValueError("connect() takes a command (a stdio server) or url= (streamable HTTP), exactly one")
    _require_sdk()
    argv: list[str] | None = None
    if command is not None:
        argv = shlex.split(command) if isinstance(command, str) else [str(c) for c in command]
        if not argv:
            raise ValueError("connect(): the command is empty; give the server's command line, "
                             "e.g. connect('mcp-server-time --local-timezone UTC')")
        label = shlex.join(argv)
        argv[0] = server_program(argv[0])
    else:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"connect(url=...): {url!r} is not an http(s) URL of a streamable-HTTP MCP endpoint")
        label = url
    if not _seconds(start_timeout):
        raise ValueError(f"connect(start_timeout=...): the seconds a server may take to start and list its tools, "
                         f"a number above 0 (default {START_TIMEOUT:g}), got {start_timeout!r}")
    if call_timeout is not None and not _seconds(call_timeout):
        raise ValueError(f"connect(call_timeout=...): the seconds one call may take, a number above 0, or None "
                         f"for no limit; got {call_timeout!r}")
    if approve not in (None, True, False):
        raise TypeError(f"connect(approve=...): None (destructive tools ask), True or False, got {approve!r}")
    if prefix and not prefix.isidentifier():
        raise ValueError(f"prefix {prefix!r} must make tool names Python identifiers (letters, digits, _)")
    key = (tuple(argv) if argv else url, tuple(sorted((env or {}).items())), cwd, prefix)
    for earlier in [box for box in _LIVE if box._key == key] if replace else []:
        warnings.warn(f"closed the earlier connection to the same MCP server ({earlier!r}): connect(..., "
                      "replace=False) keeps both", stacklevel=2)
        earlier.close()
    connection = Connection(label, command=argv, env=env, cwd=cwd, url=url, headers=headers)
    listed = connection.start(start_timeout)
    box = MCPToolbox(connection)
    try:
        for spec in listed:
            # one tool the toolbox cannot hold costs that tool, with a warning, not the server's others
            name = prefix + _identifier(spec.name)
            if name in box:
                first = box[name].mcp_name  # type: ignore[attr-defined]
                warnings.warn(f"skipped the MCP tool {spec.name!r} of {label}: its name in plans, {name!r}, is "
                              f"already the name of its tool {first!r}; the other tools work", stacklevel=2)
                continue
            try:
                tool = _make_tool(connection, spec, name, cache, call_timeout, approve)
            except Exception as exc:  # noqa: BLE001 - named in the warning
                warnings.warn(f"skipped the MCP tool {spec.name!r} of {label}: {reason_of(exc)}; the other tools "
                              "work", stacklevel=2)
                continue
            if tool.untyped:
                warnings.warn(f"the MCP tool {spec.name!r} of {label}: " + "; ".join(tool.untyped)
                              + " (the server still checks what it is sent)", stacklevel=2)
            box.add(tool)
    except BaseException:
        connection.close()
        raise
    box._key = key
    _LIVE.append(box)
    return box


def _make_tool(connection: Connection, spec: Any, name: str, cache: bool, timeout: float | None,
               approve: bool | None = None) -> MCPTool:
    schema = dict(spec.input_schema or {"type": "object"})
    mcp_name = spec.name

    def call(**kwargs: Any) -> Any:
        return connection.call(mcp_name, kwargs, timeout)

    call.__name__ = name
    description = (spec.description or spec.title or "").strip().splitlines()
    tool = MCPTool(call, name=name, mcp_name=mcp_name, description=description[0] if description else "",
                   input_schema=schema, hints=spec.annotations, cache=cache, version=connection.version,
                   approve=approve)
    # for help() and a re-wrapping Toolbox.add: set after the tool typed itself from the schema
    sig = python_signature(tool.arguments)
    call.__signature__ = sig  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY}
    return tool


def _seconds(value: Any) -> bool:
    """Whether ``value`` is a usable timeout: a finite number of seconds above 0 (not a bool)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and value > 0)


def _identifier(name: str) -> str:
    text = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    return text if text.isidentifier() else f"t_{text}"


def close_all() -> None:
    """Stop every server this process connected to (run at interpreter exit)."""
    for box in list(_LIVE):
        try:
            box.close()
        except Exception:  # noqa: BLE001 - at exit, the others still close
            pass


atexit.register(close_all)


__all__ = ["MCPTool", "MCPToolbox", "close_all", "connect", "server_program"]


def with_servers(tools: Any, commands: Sequence[str], *, cache: bool = False) -> tuple[Toolbox, list[MCPToolbox]]:
    """``tools`` plus the tools of each server (a command line or an http(s) URL), for ``--mcp``.

    Returns the combined toolbox and the servers to close when the run ends; a server that
    fails to start closes the ones already started.
    """
    from ..workers.tools import as_toolbox

    servers: list[MCPToolbox] = []
    try:
        for command in commands:
            is_url = command.startswith(("http://", "https://"))
            servers.append(connect(url=command, cache=cache) if is_url else connect(command, cache=cache, replace=False))
        if tools is None and len(servers) == 1:
            return servers[0], servers  # the server's own box: server_log, close()
        boxes = ([as_toolbox(tools)] if tools is not None else []) + list(servers)
        return Toolbox.merge(*boxes), servers
    except BaseException:
        for server in servers:
            server.close()
        raise
