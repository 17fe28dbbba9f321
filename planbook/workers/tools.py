"""Tools: Python callables with typed arguments that plan steps can call.

A tool's signature becomes a pydantic model, so args are checked before a plan runs
(and again, with real values, just before the call) and its JSON schema can be shown
to a model. The first docstring line is the description a model sees.
"""

from __future__ import annotations

import copy
import functools
import inspect
import types
import typing
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from ..data.secret import Secret, has_secrets, reveal
from ..outbound.redact import shown_arg


class Tool:
    """A registered callable. Call it like the function; ``validate`` checks args."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        main_thread: bool = False,
        cache: bool | None = None,
        idempotent: bool = True,
        version: str | None = None,
        approve: bool = False,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"a tool must be callable, got {fn!r}")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            # a generator's body runs only when someone iterates it: not in its step, and a
            # second consumer would silently get nothing
            raise TypeError(f"tool {self.name!r} is a generator function (it uses yield): its body would not run "
                            "in its step. Return a list instead (e.g. `return list(...)`), or wrap it: "
                            f"`def {self.name}(...): return list(gen(...))`")
        if not self.name.isidentifier():
            raise ValueError(f"tool name {self.name!r} must be a Python identifier (letters, digits, _)")
        doc = inspect.getdoc(fn) or ""
        self.description = description if description is not None else (doc.splitlines()[0] if doc else "")
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))
        self.args_model = _args_model(fn, self.name)
        self._use_fields(dict(self.args_model.model_fields))
        #: always run on the runner's thread, even when a live view runs steps in a worker
        #: thread (for objects bound to a thread: a sqlite3 connection, signal handlers, GUI calls)
        self.main_thread = main_thread
        #: the cross-run step cache: True reuses an earlier run's result of the same call (for a
        #: tool whose answer depends only on its arguments), False never does, None follows the
        #: run's ``cache=`` (off by default); see :func:`planbook.engine.persistence.uses_cache`
        if cache not in (None, True, False):
            raise TypeError(f"tool {self.name!r}: cache must be True, False or None, got {cache!r}")
        if cache and not idempotent:
            raise ValueError(f"tool {self.name!r}: cache=True and idempotent=False contradict each other (a cached "
                             "step would skip its side effect); a tool declared idempotent=False is never cached: "
                             "drop cache=True")
        self.cache = cache
        #: False: calling it twice may do the work twice, so a resume after a crash stops
        #: and asks before running again a call that may already have taken effect
        self.idempotent = idempotent
        #: part of the cache key: change it when the tool's code changes what it returns
        self.version = version
        if approve not in (True, False):
            raise TypeError(f"tool {self.name!r}: approve must be True (every call waits for a decision) or False, "
                            f"got {approve!r}")
        #: every step calling it waits for a person's decision first (planbook.engine.approvals)
        self.approve = approve
        if main_thread and self.is_async:
            raise ValueError(f"tool {self.name!r} is async: it runs on an event loop, not on the main thread; "
                             "drop main_thread=True, or make it a plain function")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.name}: {self.description}>"

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments (what a model is shown)."""
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return schema

    def schema(self) -> dict[str, Any]:
        """An OpenAI-style function description."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def validate(self, args: Mapping[str, Any], *, skip: Iterable[str] = ()) -> list[str]:
        """Problems binding ``args`` to the signature; names in ``skip`` are not type-checked.

        Skipped names are the ones holding ``$id`` references, whose values exist only at run time.
        """
        skipped = set(skip)
        fields = self._fields
        problems: list[str] = []
        if may_hold_secrets(args):
            args = _secrets_as_text(args, fields)
        unknown = [k for k in args if k not in fields]
        if unknown and not self._takes_kwargs:
            expected = ", ".join(f"{n}: {_type_name(f.annotation)}" for n, f in fields.items()) or "no arguments"
            problems += [f"tool {self.name!r} has no argument {k!r} (it takes {expected})" for k in unknown]
        try:
            self.args_model.model_validate({k: v for k, v in args.items() if k not in skipped and k in fields})
        except ValidationError as exc:
            for err in exc.errors():
                arg = str(err["loc"][0]) if err["loc"] else "?"
                if arg in skipped:
                    continue
                if err["type"] == "missing":
                    problems.append(f"tool {self.name!r} needs argument {arg!r} ({_type_name(fields[arg].annotation)})")
                else:
                    expected = _type_name(fields[arg].annotation) if arg in fields else "?"
                    problems.append(
                        f"argument {arg!r} of tool {self.name!r} expects {expected}, got "
                        f"{shown_arg(arg, err['input'], repr)} ({err['msg']})"  # a password is not echoed
                    )
        return problems

    def arg_type(self, name: str) -> Any:
        """The declared type of argument ``name`` (``Any`` when not said): checking a plan asks
        whether a ``$id`` written in it can fit (planbook.spec.reftypes)."""
        field = self._fields.get(name)
        return Any if field is None else field.annotation

    @functools.cached_property
    def returns(self) -> Any:
        """The type the tool declares it returns (``Any`` when not annotated or not resolvable): what
        a whole ``$id`` of its step gives, checked against the argument it is written in."""
        return _return_type(self.fn)

    def _use_fields(self, fields: dict[str, Any]) -> None:
        """Keep the arguments' fields (looked up on every call) and, per argument, the types pydantic
        passes through unchanged (None: any value), for :meth:`coerce`. A subclass that types its
        arguments another way (an MCP tool, from the server's schema) gives its own fields here."""
        self._fields = fields
        self._plain, self._required = _plain_fields(fields)

    def coerce(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The args as the function will receive them (pydantic-coerced). Raises ValueError.

        Args whose values already have their parameter's plain type (an ``int`` for ``int``,
        a ``str`` for ``str | None``, anything for an unannotated one) are what pydantic
        would return: they are passed on without building the model (a call of a fast tool
        cost more in validation than in the tool).
        """
        plain = self._plain
        if plain is not None:  # None: a subclass that checks args its own way
            for name, value in args.items():
                allowed = plain.get(name, _SLOW)
                if allowed is not None and type(value) not in allowed:
                    break
            else:
                if self._required.issubset(args):
                    return dict(args)
        fields = self._fields
        known = {k: v for k, v in args.items() if k in fields}
        try:
            model = self.args_model.model_validate(known)
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e.get('input')!r})" for e in exc.errors()
            )
            raise ValueError(f"bad arguments for tool {self.name!r}: {details}") from None
        coerced = {k: model.__dict__[k] for k in known}
        coerced.update({k: v for k, v in args.items() if k not in fields})
        return coerced

    @property
    def _takes_kwargs(self) -> bool:
        try:
            params = inspect.signature(self.fn).parameters.values()
        except (TypeError, ValueError):
            return True
        return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


#: what stands for a Secret when a plan is checked: a Secret gives its tool text
_SECRET_STAND_IN = "***"


def may_hold_secrets(args: Mapping[str, Any]) -> bool:
    """Whether ``args`` holds a :class:`~planbook.data.secret.Secret` (plain values are skipped
    without a call each: every step of a plan is checked before it runs)."""
    values = args.values()
    if _PASSED.issuperset(map(type, values)):  # the common case, in C: every value plain
        return False
    return any(type(v) not in _PASSED and has_secrets(v) for v in values)


def _secrets_as_text(args: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` as the tool will see them when checked before the run: each Secret is text then
    (its value is read only at the call), except for an argument typed ``Secret`` itself."""
    return {k: v if _takes_secret(fields.get(k)) else _stand_in(v) for k, v in args.items()}


def _stand_in(value: Any) -> Any:
    if isinstance(value, Secret):
        return _SECRET_STAND_IN
    if isinstance(value, Mapping):
        return {k: _stand_in(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stand_in(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_stand_in(v) for v in value)
    return value


def _takes_secret(field: Any) -> bool:
    """A parameter annotated ``Secret`` (or ``Secret | None``): its tool reveals it itself."""
    if field is None:
        return False
    annotation = field.annotation
    members = get_args(annotation) if get_origin(annotation) in (typing.Union, types.UnionType) else (annotation,)
    return Secret in members


def secret_free_args(tool: "Tool", args: Mapping[str, Any], plan_args: Mapping[str, Any],
                     found: list[str]) -> dict[str, Any]:
    """The call boundary's one step before coercion: resolved ``args`` with every Secret that
    ``plan_args`` (the step's args as written) put in them replaced by its real value, each
    value appended to ``found``. Only those arguments are walked — a result an argument
    references may be large, and was not written with a Secret in it. An argument typed
    ``Secret`` keeps it: its tool reveals it when it wants. Raises SecretError for a secret
    that cannot be read (an unset variable)."""
    fields = getattr(tool, "_fields", {})  # a Tool subclass that checks args its own way may have none
    return {k: reveal(v, found) if k in plan_args and not _takes_secret(fields.get(k)) and has_secrets(plan_args[k])
            else v for k, v in args.items()}


#: the types whose values pydantic returns as they are, when the value has exactly that type
_PASSED: frozenset[type] = frozenset({int, float, str, bool, type(None)})
#: the pass-through types of a parameter coerce must hand to pydantic: none
_SLOW: frozenset[type] = frozenset()


def _plain_fields(fields: Mapping[str, Any]) -> tuple[dict[str, frozenset[type] | None], frozenset[str]]:
    """For :meth:`Tool.coerce`: each parameter's pass-through types (None: ``Any``), and the
    required names. A parameter with constraints or another type is left out (pydantic checks it)."""
    plain: dict[str, frozenset[type] | None] = {}
    for name, info in fields.items():
        annotation = info.annotation
        if info.metadata:
            continue
        if annotation is Any:
            plain[name] = None
            continue
        members = get_args(annotation) if get_origin(annotation) in (typing.Union, types.UnionType) else (annotation,)
        if all(isinstance(m, type) and m in _PASSED for m in members):
            plain[name] = frozenset(members)
    required = frozenset(name for name, info in fields.items() if info.is_required())
    return plain, required


def _type_name(annotation: Any) -> str:
    """``int``, ``list[int]``, ``str | None``: what a person would write in the signature."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return "any"
    if isinstance(annotation, type) and not get_args(annotation):  # list[int] is not a plain class
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _args_model(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    """A pydantic model of the callable's keyword-bindable parameters."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return create_model(f"{name}_args", __config__=ConfigDict(extra="allow"))
    try:
        hints = get_type_hints(fn, include_extras=True)  # Annotated[str, Field(max_length=8)] keeps its constraint
    except Exception:  # one unresolvable annotation (often the return type): resolve per parameter
        hints = {}
    fields: dict[str, Any] = {}
    for param in sig.parameters.values():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ValueError(f"tool {name!r}: positional-only parameter {param.name!r} cannot be passed by name")
        if param.name.startswith("_") or param.name == "model_config":
            # pydantic would silently drop these, and the tool would look like it takes no such argument
            raise ValueError(
                f"tool {name!r}: parameter {param.name!r} cannot be a tool argument "
                "(pydantic reserves names starting with '_' and 'model_config'); rename it"
            )
        annotation = hints.get(param.name, param.annotation)
        if annotation is inspect.Parameter.empty:
            annotation = Any
        elif isinstance(annotation, str):
            annotation = _resolve_annotation(fn, name, param.name, annotation)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    config = ConfigDict(arbitrary_types_allowed=True, extra="ignore")
    with warnings.catch_warnings():  # args named json, copy, schema... are fine for a tool
        warnings.filterwarnings("ignore", message="Field name .* shadows an attribute", category=UserWarning)
        return create_model(f"{name}_args", __config__=config, **fields)


def _return_type(fn: Callable[..., Any]) -> Any:
    """``fn``'s return annotation as a type; ``Any`` when there is none or it cannot be resolved
    (a wrong guess would refuse a plan that could run: not knowing lets it pass)."""
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else getattr(type(fn), "__call__", None)
    try:
        hints = get_type_hints(target)
    except Exception:  # noqa: BLE001 - an unresolvable name, a builtin, a partial: the type is not known
        return Any
    return hints.get("return", Any)


def _resolve_annotation(fn: Callable[..., Any], tool: str, arg: str, text: str) -> Any:
    """A string annotation (``from __future__ import annotations``) as a type, or Any with a warning.

    A type defined inside a function cannot be found from its name later; the argument
    is then not type-checked, and the warning says so (pydantic would fail at the first call).
    """
    namespace = dict(getattr(fn, "__globals__", {}))
    try:
        namespace.update(inspect.getclosurevars(fn).nonlocals)
    except (TypeError, ValueError):
        pass
    try:
        return eval(text, namespace)  # noqa: S307 - what typing.get_type_hints does with annotations
    except Exception as exc:
        warnings.warn(
            f"tool {tool!r}: cannot resolve the type {text!r} of argument {arg!r} ({exc}); "
            "it is not checked. Define the type at module level so it can be found by name.",
            stacklevel=4,
        )
        return Any


#: the attribute a function registered with ``@tool`` / ``@box.tool`` carries: its Tool, options included
REGISTERED = "__planbook_tool__"


class Toolbox(Mapping[str, Tool]):
    """A named set of tools. ``@box.tool`` registers; a Toolbox is a read-only mapping."""

    def __init__(self, tools: Iterable[Callable[..., Any] | Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(
        self,
        fn: Callable[..., Any] | Tool,
        *,
        name: str | None = None,
        description: str | None = None,
        main_thread: bool | None = None,
        cache: bool | None = None,
        idempotent: bool | None = None,
        version: str | None = None,
        approve: bool | None = None,
    ) -> Tool:
        """Register ``fn`` (replacing a tool of the same name: re-running a notebook cell must work)."""
        given = (name, description, main_thread, cache, idempotent, version, approve)
        # a function registered with @tool(...) / @box.tool(...) carries its Tool: given again (tools=[fn]),
        # it keeps its options (idempotent=False, approve=True, cache=...) instead of losing them quietly
        # (a wrapper made with functools.wraps copies the attribute: it keeps the options, and its own code)
        source: Any = fn if isinstance(fn, Tool) else getattr(fn, REGISTERED, None) or fn
        call = fn.fn if isinstance(fn, Tool) else fn
        if isinstance(source, Tool) and source.fn is call and all(v is None for v in given):
            tool_obj = source
        else:
            def option(value: Any, attr: str, default: Any) -> Any:
                return value if value is not None else getattr(source, attr, default)

            tool_obj = Tool(call, name=name or getattr(source, "name", None),
                            description=description or (source.description if isinstance(source, Tool) else None),
                            main_thread=bool(option(main_thread, "main_thread", False)),
                            cache=option(cache, "cache", None),
                            idempotent=bool(option(idempotent, "idempotent", True)),
                            version=option(version, "version", None),
                            approve=option(approve, "approve", False))
        self._tools[tool_obj.name] = tool_obj
        return tool_obj

    def tool(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        main_thread: bool = False,
        cache: bool | None = None,
        idempotent: bool = True,
        version: str | None = None,
        approve: bool = False,
    ) -> Any:
        """Decorator: ``@box.tool`` or ``@box.tool(name="x", main_thread=True, cache=True)``.

        Returns the function unchanged.
        """

        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            made = self.add(f, name=name, description=description, main_thread=main_thread, cache=cache,
                            idempotent=idempotent, version=version, approve=approve)
            try:
                setattr(f, REGISTERED, made)  # tools=[f] elsewhere keeps these options
            except (AttributeError, TypeError):  # a builtin or a bound method takes no attribute: nothing to keep
                pass
            return f

        return register(fn) if fn is not None else register

    def remove(self, name: str) -> None:
        del self._tools[name]

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Toolbox({sorted(self._tools)})"

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self._tools.values()]

    @staticmethod
    def merge(*boxes: Toolbox | Mapping[str, Any], prefixes: Iterable[str] | None = None) -> Toolbox:
        """One Toolbox with the tools of several (e.g. two MCP servers and your functions).

        A name in two boxes is an error naming both (a silent winner would call the wrong
        tool); ``prefixes`` (one per box, ``""`` for none) renames them apart.
        """
        names = list(prefixes) if prefixes is not None else [""] * len(boxes)
        if len(names) != len(boxes):
            raise ValueError(f"merge: {len(names)} prefixes for {len(boxes)} toolboxes; give one per toolbox ('' for none)")
        merged, origin = Toolbox(), dict[str, int]()  # a tool's name -> the index of its toolbox
        for index, (box, prefix) in enumerate(zip(boxes, names)):
            for name, fn in as_toolbox(box).items():
                new_name = prefix + name
                if new_name in merged:
                    raise ValueError(f"two toolboxes have a tool named {new_name!r} (toolboxes {origin[new_name] + 1} "
                                     f"and {index + 1}): merge them with prefixes=[...] (e.g. ['a_', 'b_']), "
                                     "or connect an MCP server with prefix=")
                origin[new_name] = index
                if prefix:  # a renamed copy keeps the tool's kind and options (an MCP tool stays one)
                    fn = copy.copy(fn)
                    fn.name = new_name
                merged.add(fn)
        return merged


#: Tools registered with the module-level ``@planbook.tool``.
default_toolbox = Toolbox()


def tool(
    fn: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None,
    main_thread: bool = False, cache: bool | None = None, idempotent: bool = True, version: str | None = None,
    approve: bool = False,
) -> Any:
    """Register a function in the default toolbox (used when a run is given no ``tools``).

    ``cache=True``: a run with a store may answer a call with an earlier run's result of the
    same call (only for a tool whose answer depends on nothing but its arguments: not a
    clock, a price, a file); ``cache=False``: never, even when a run asks for ``cache=True``;
    the default follows the run, whose cache is off unless asked for. ``idempotent=False``:
    a resume after a crash asks before calling it again, and it is never cached.
    ``version``: part of the cache key, instead of the code's fingerprint. ``approve=True``: a step
    calling it waits for a person's decision before it starts (send an email, spend money).
    """
    return default_toolbox.tool(fn, name=name, description=description, main_thread=main_thread, cache=cache,
                                idempotent=idempotent, version=version, approve=approve)


ToolsLike = Toolbox | Mapping[str, Callable[..., Any]] | Iterable[Callable[..., Any]] | None


def as_toolbox(tools: ToolsLike) -> Toolbox:
    """Accept a Toolbox, a ``{name: fn}`` mapping, a list of functions, or None (the default toolbox)."""
    if tools is None:
        return default_toolbox
    if isinstance(tools, Toolbox):
        return tools
    if isinstance(tools, Mapping):
        box = Toolbox()
        for key, fn in tools.items():
            box.add(fn, name=key)
        return box
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        raise TypeError(
            f"tools must be a Toolbox, a mapping of name to function, or a list of functions; got {type(tools).__name__}"
        )
    items = list(tools)
    if any(isinstance(t, Toolbox) for t in items):  # tools=[mcp_tools, my_box, fn]: one box, clashes refused
        return Toolbox.merge(*(t if isinstance(t, Toolbox) else Toolbox([t]) for t in items))
    return Toolbox(items)
