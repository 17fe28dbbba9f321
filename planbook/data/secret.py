"""A secret as a value: ``Secret.env("GITHUB_TOKEN")`` or ``Secret("hunter2-…", name="db")``.

Why a type and not a guess: a value the user marks secret never needs to be found by its
argument's name or its shape. The plan, the store, the model's prompts, cassettes, spans
and views hold the **reference** (``{"$secret": "env:GITHUB_TOKEN"}``); only the call
boundary — where the runner hands arguments to a tool, an agent or an MCP server — calls
:func:`reveal` and gives the tool the real value. A stored run keeps the reference, so a
resumed run (even in a new process, for an environment secret) resolves it again.

Its ``str`` is ``***``; its ``repr`` names it (``Secret.env('GITHUB_TOKEN')``), never the value.
Pickling keeps the reference only. Every value a secret resolves to is put in the process's
vault (:mod:`planbook.outbound.vault`) the moment it is known, so each exit hides it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from ..outbound.vault import VAULT
from .errors import SecretError

#: the key of a secret's JSON form: ``{"$secret": "env:GITHUB_TOKEN"}``
SECRET_KEY = "$secret"
_ENV_PREFIX = "env:"

#: named literal secrets of this process, so a reference read back (a stored run, a plan's
#: JSON) resolves in the process that made it
_NAMED: dict[str, str] = {}
_NAMED_LOCK = threading.Lock()
_UNNAMED = iter(range(1, 1 << 62))
#: this process's mark in an unnamed secret's reference: a stored run's ``unnamed-3`` must not
#: name another process's third secret when it is resumed there (it is "not known" there instead)
_PROCESS_MARK = os.urandom(4).hex()


class Secret:
    """A value that is secret by type (see the module docstring)."""

    __slots__ = ("_ref", "_value")

    def __init__(self, value: str, *, name: str | None = None) -> None:
        if not isinstance(value, str):
            raise SecretError(f"Secret(...) takes the secret as text, not {type(value).__name__}: "
                              "convert it with str(...) first")
        if name is not None and (not isinstance(name, str) or not name or name.startswith(_ENV_PREFIX)):
            raise SecretError(f"a Secret's name must be non-empty text not starting with {_ENV_PREFIX!r}, "
                              f"got {name!r}: use Secret.env(NAME) for an environment variable")
        with _NAMED_LOCK:
            if name is None:
                name = f"unnamed-{_PROCESS_MARK}-{next(_UNNAMED)}"
            _NAMED[name] = value
        self._ref = name
        self._value: str | None = value
        VAULT.add([value])

    @classmethod
    def env(cls, variable: str) -> "Secret":
        """The environment variable ``variable``, read when a step is called (so a run resumed
        in a new process reads it again); an unset variable is an error at that call."""
        if not isinstance(variable, str) or not variable:
            raise SecretError(f"Secret.env takes the name of an environment variable, got {variable!r}")
        secret = object.__new__(cls)
        secret._ref = _ENV_PREFIX + variable
        secret._value = None
        value = os.environ.get(variable)
        if value:
            VAULT.add([value])  # known from now on, before any step runs
        return secret

    @classmethod
    def from_ref(cls, ref: str) -> "Secret":
        """The secret a stored reference names (``env:NAME`` or a name given in this process)."""
        if not isinstance(ref, str) or not ref:
            raise SecretError(f"a secret reference is text (env:NAME or a name), got {ref!r}")
        if ref.startswith(_ENV_PREFIX):
            return cls.env(ref[len(_ENV_PREFIX):])
        secret = object.__new__(cls)
        secret._ref = ref
        secret._value = None
        return secret

    # ------------------------------------------------------------------ what it is
    @property
    def ref(self) -> str:
        """What the plan, the store and every view hold: ``env:NAME`` or the secret's name."""
        return self._ref

    @property
    def name(self) -> str:
        """The variable's or the given name."""
        return self._ref[len(_ENV_PREFIX):] if self._ref.startswith(_ENV_PREFIX) else self._ref

    def to_json(self) -> dict[str, str]:
        """The JSON form that stands for it everywhere but the call: ``{"$secret": ref}``."""
        return {SECRET_KEY: self._ref}

    def reveal(self) -> str:
        """The real value. Only the call boundary asks (:func:`reveal`); nothing that is written,
        shown or sent does."""
        if self._ref.startswith(_ENV_PREFIX):
            variable = self._ref[len(_ENV_PREFIX):]
            value = os.environ.get(variable)
            if not value:
                raise SecretError(f"{self!r} is not set: set the environment variable {variable} "
                                  "before running (or resuming) this run")
        elif self._value is not None:
            value = self._value
        else:
            with _NAMED_LOCK:
                found = _NAMED.get(self._ref)
            if found is None:
                raise SecretError(f"the secret named {self._ref!r} is not known in this process: create it "
                                  f"again (planbook.Secret(value, name={self._ref!r})) before running or "
                                  "resuming, or use Secret.env(NAME) to read it from the environment")
            value = found
        VAULT.add([value])
        return value

    # ------------------------------------------------------------------ how it shows
    def __str__(self) -> str:
        return "***"

    def __repr__(self) -> str:
        if self._ref.startswith(_ENV_PREFIX):
            return f"Secret.env({self.name!r})"
        return f"Secret(***, name={self._ref!r})"

    def __format__(self, spec: str) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._ref == self._ref

    def __hash__(self) -> int:
        return hash((Secret, self._ref))

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (Secret.from_ref, (self._ref,))  # the reference travels, never the value

    def __copy__(self) -> "Secret":
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> "Secret":
        return self

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema  # pydantic is a dependency; only a model with a Secret field asks

        return core_schema.no_info_plain_validator_function(
            _as_secret, serialization=core_schema.plain_serializer_function_ser_schema(
                lambda s: s.to_json(), when_used="json"))


def _as_secret(value: Any) -> Secret:
    if isinstance(value, Secret):
        return value
    ref = secret_ref(value)
    if ref is None:
        raise ValueError("expected a Secret or its JSON form {\"$secret\": \"env:NAME\"}")
    return Secret.from_ref(ref)


def secret_ref(value: Any) -> str | None:
    """The reference of a secret's JSON form (``{"$secret": "env:NAME"}``), else None."""
    if type(value) is dict and len(value) == 1 and SECRET_KEY in value and isinstance(value[SECRET_KEY], str):
        return str(value[SECRET_KEY])
    return None


def has_secrets(value: Any) -> bool:
    """True when ``value`` (args: dicts, lists, tuples) holds a :class:`Secret` anywhere."""
    if isinstance(value, Secret):
        return True
    if isinstance(value, Mapping):
        return any(has_secrets(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_secrets(v) for v in value)
    return False


def reveal(value: Any, found: list[str] | None = None) -> Any:
    """``value`` with every :class:`Secret` in it replaced by its real value: only the call
    boundary calls this, right before the tool, agent or server gets its arguments. ``value``
    itself when it holds none. ``found``: the real values are appended to it too (a call
    shipped to another process masks what its tool echoes with them)."""
    if isinstance(value, Secret):
        text = value.reveal()
        if found is not None:
            found.append(text)
        return text
    if type(value) is dict:
        out = None
        for k, v in value.items():
            if isinstance(v, (Secret, dict, list, tuple)):
                new = reveal(v, found)
                if new is not v:
                    if out is None:
                        out = dict(value)
                    out[k] = new
        return value if out is None else out
    if isinstance(value, list):
        items = [reveal(v, found) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    if isinstance(value, tuple):
        items = [reveal(v, found) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else tuple(items)
    return value


def from_json_refs(value: Any) -> Any:
    """JSON data (a stored run's args, a plan read from YAML or JSON) with every
    ``{"$secret": ref}`` made a :class:`Secret` again; ``value`` itself when it holds none."""
    if type(value) is dict:
        ref = secret_ref(value)
        if ref is not None:
            return Secret.from_ref(ref)
        out = None
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                new = from_json_refs(v)
                if new is not v:
                    if out is None:
                        out = dict(value)
                    out[k] = new
        return value if out is None else out
    if type(value) is list:
        items = [from_json_refs(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


def to_json_refs(value: Any) -> Any:
    """Args with every :class:`Secret` as its JSON form (what is written and sent); ``value``
    itself when it holds none."""
    if isinstance(value, Secret):
        return value.to_json()
    if isinstance(value, dict):
        out = None
        for k, v in value.items():
            if isinstance(v, (Secret, dict, list, tuple)):
                new = to_json_refs(v)
                if new is not v:
                    if out is None:
                        out = dict(value)
                    out[k] = new
        return value if out is None else out
    if isinstance(value, (list, tuple)):
        items = [to_json_refs(v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value
