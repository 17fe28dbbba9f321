"""Approvals: which steps wait for a person before they start, and what a person decided.

A step asks when its tool was registered with ``approve=True``, or when the run's
``approve=`` names it (``True``: every step; a step id or tool name, or several; a
callable ``(step, context) -> Decision`` that answers for every step itself). The
answer is a :class:`Decision` — approve, skip, edit (new arguments, checked against the
tool's signature) or stop — given by a widget button, the CLI prompt, a
:class:`~planbook.notebook.handle.RunHandle` method or that callable. The runner applies it in
its decide step (:mod:`planbook.engine.steering`), as an event that says who decided.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..data.models import Plan, Step
from ..data.refs import args_with_refs, find_refs
from ..data.secret import Secret
from ..outbound.redact import shown_arg

Action = Literal["approve", "skip", "edit", "stop"]
#: who decided: a live view's button, the terminal prompt, Python code, or the clock (``approve_timeout``)
Who = Literal["widget", "cli", "api", "timeout"]
ACTIONS: tuple[str, ...] = ("approve", "skip", "edit", "stop")
WHO: tuple[str, ...] = ("widget", "cli", "api", "timeout")


@dataclass(frozen=True)
class StepRef:
    """The step a decision is about, as it was when decided: its id, the plan's revision, the
    work it would do (tool and arguments, or agent and task) and which execution of it comes
    next (its attempts so far). A decision covers that work, that once: a replan or an edit
    that changes it voids the decision, and so does a retry (a decision is never kept for a
    later execution); the step asks again."""

    id: str
    revision: int
    work: str
    attempts: int = 0

    @classmethod
    def of(cls, step: Step, revision: int) -> "StepRef":
        return cls(step.id, revision, work_of(step), step.attempts)

    def covers(self, step: Step) -> bool:
        """Whether ``step`` still does the work this reference names, as the same execution
        (another revision may keep it)."""
        return self.id == step.id and self.attempts == step.attempts and self.work == work_of(step)

    def changed(self, step: Step) -> str:
        """What changed since, in words (for the ``voided`` event; a secret-named arg shows as ***)."""
        if self.attempts != step.attempts and self.work == work_of(step):
            return (f"step {self.id!r} ran since the decision (it was for its execution {self.attempts + 1}; "
                    f"execution {step.attempts + 1} asks again)")
        return (f"step {self.id!r} changed since the decision (it was decided at revision {self.revision}; "
                f"now it is {shown_work(step)})")


def work_of(step: Step) -> str:
    """What running ``step`` does, as one comparable text (arguments in a canonical order).

    Never raises, whatever the arguments hold: a decision that cannot name its step could
    never be given (YAML's ``{1: one, two: 2}`` has keys ``json.dumps(sort_keys=True)`` cannot
    order; a tuple key it cannot write at all). A :class:`~planbook.data.secret.Secret` is
    its reference, so the text holds no secret value."""
    if step.tool is not None:
        return f"{step.tool}({json.dumps(_canonical(step.args, 0))})"
    return f"[{step.agent}] {step.task}"


#: how deep arguments are followed for a step's identity (a plan's JSON or YAML is never deeper)
_DEPTH = 200


def _canonical(value: Any, depth: int) -> Any:
    """``value`` as plain JSON data with a stable order: a mapping is its pairs sorted by each
    key's own canonical text (so ``1`` and ``"1"`` differ, and mixed or tuple keys sort), a
    tuple is a list, a Secret its reference, anything else its type and repr."""
    if value is None or type(value) in (str, int, bool):
        return value
    if type(value) is float:
        return value if value == value and value not in (float("inf"), float("-inf")) else ["float", repr(value)]
    if depth > _DEPTH:
        return ["deep", _repr(value)]
    if isinstance(value, Secret):
        return ["$secret", value.ref]
    if isinstance(value, Mapping):
        pairs = [(json.dumps(_canonical(k, depth + 1)), _canonical(v, depth + 1)) for k, v in value.items()]
        return ["{}", sorted(pairs, key=lambda pair: pair[0])]
    if isinstance(value, (list, tuple)):
        return ["[]", [_canonical(v, depth + 1) for v in value]]
    return ["repr", type(value).__qualname__, _repr(value)]


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # noqa: BLE001 - an object whose repr raises is still a value a step can carry
        return f"<{type(value).__qualname__} object>"


def shown_work(step: Step) -> str:
    """What running ``step`` does, as a person reads it: ``tool(name=value, ...)`` (a secret-named
    arg as ***) or ``[agent] task``."""
    if step.tool is not None:
        show = _shown  # escapes every control character
        return f"{step.tool}({', '.join(f'{name}={shown_arg(name, value, show)}' for name, value in step.args.items())})"
    return f"[{step.agent}] {step.task}"


def _shown(value: Any) -> str:
    """A value as JSON text, or its repr as a JSON string when JSON cannot write it (a tuple key)."""
    try:
        return json.dumps(value, default=repr)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(_repr(value))


@dataclass(frozen=True)
class Decision:
    """What a person decided about a step that waits: ``Decision.approve()``,
    ``Decision.skip("why")``, ``Decision.edit({"to": "me"})`` or ``Decision.stop("why")``."""

    action: Action
    args: dict[str, Any] | None = None
    reason: str = ""
    who: Who = "api"
    #: the step as it was when decided (set by whoever gives the decision for a step not yet asked
    #: about: the handle, the view); None: the step as it asks (a callable, the prompt)
    about: StepRef | None = field(default=None, compare=False)
    #: an edit whose args were checked against the tool when given (:func:`checked`): the run
    #: does not check them again (a decision is checked once, where it is given)
    checked: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"a decision is one of {', '.join(ACTIONS)}; got {self.action!r}")
        if self.who not in WHO:
            raise ValueError(f"who decided is one of {', '.join(WHO)}; got {self.who!r}")
        if self.action == "edit" and not isinstance(self.args, Mapping):
            raise TypeError(f"an edit carries the step's new arguments as a dict, got {self.args!r}")
        if self.action != "edit" and self.args is not None:
            raise ValueError(f"only an edit carries arguments; a {self.action} does not (got {self.args!r})")
        if self.args is not None:
            object.__setattr__(self, "args", dict(self.args))

    @classmethod
    def approve(cls, *, who: Who = "api") -> "Decision":
        return cls("approve", who=who)

    @classmethod
    def skip(cls, reason: str = "", *, who: Who = "api") -> "Decision":
        return cls("skip", reason=reason, who=who)

    @classmethod
    def edit(cls, args: Mapping[str, Any], *, reason: str = "", who: Who = "api") -> "Decision":
        return cls("edit", args=dict(args), reason=reason, who=who)

    @classmethod
    def stop(cls, reason: str = "", *, who: Who = "api") -> "Decision":
        return cls("stop", reason=reason, who=who)

    def naming(self, step: Step, revision: int) -> "Decision":
        """This decision, naming ``step`` as it is now."""
        return replace(self, about=StepRef.of(step, revision))

    def as_data(self) -> dict[str, Any]:
        """The event's data (args only for an edit)."""
        data: dict[str, Any] = {"decision": self.action, "who": self.who}
        if self.reason:
            data["reason"] = self.reason
        if self.args is not None:
            data["args"] = self.args
        return data


class ApprovalContext:
    """What an ``approve=`` callable sees besides the step: the goal, the results of the steps
    this one ``needs``, and the plan so far (a copy, made only if the callable reads it: a
    callable asked about every step of a long plan must not copy it each time).

    ``deadline``: when the run stops waiting for this answer (``time.monotonic()``; None: no
    limit) — the run's one deadline (``approve_timeout``), which a prompt shows and keeps to."""

    def __init__(self, goal: str, plan: Plan | Callable[[], Plan], needs: dict[str, Any] | None = None,
                 deadline: float | None = None) -> None:
        self.goal = goal
        self.needs = dict(needs or {})
        self._plan = plan
        self.deadline = deadline

    @property
    def plan(self) -> Plan:
        if callable(self._plan):
            self._plan = self._plan()
        return self._plan

    def __repr__(self) -> str:
        return f"ApprovalContext(goal={self.goal!r}, needs={sorted(self.needs)})"


ApproveCallback = Callable[[Step, ApprovalContext], Decision]
ApproveLike = bool | str | Iterable[str] | ApproveCallback | None


class ApprovalRule:
    """Which steps ask, built from a run's ``approve=`` and the tools' own ``approve=True``."""

    def __init__(self, approve: ApproveLike, tools: Mapping[str, Any], plan: Plan) -> None:
        self.every = False
        self.names: frozenset[str] = frozenset()
        self.callback: ApproveCallback | None = None
        self.tools = tools
        if approve is None or approve is False:
            pass
        elif approve is True:
            self.every = True
        elif callable(approve):
            self.callback = approve
        elif isinstance(approve, str) or isinstance(approve, Iterable):
            names = [approve] if isinstance(approve, str) else list(approve)
            bad = [n for n in names if not isinstance(n, str)]
            if bad:
                raise TypeError(f"approve= takes step ids or tool names (strings); got {bad!r}")
            known = {s.id for s in plan.steps} | set(tools)
            unknown = [n for n in names if n not in known]
            if unknown and plan.steps:
                raise ValueError(f"approve= names {', '.join(map(repr, unknown))}, which is neither a step id of plan "
                                 f"{plan.id!r} nor a tool: its steps are {[s.id for s in plan.steps]}, its tools "
                                 f"{sorted(tools)}")
            self.names = frozenset(names)
        else:
            raise TypeError("approve= is True (every step), step ids or tool names, or a callable "
                            f"(step, context) -> Decision; got {type(approve).__name__}")

    def stored(self) -> bool | list[str] | None:
        """What a store keeps of ``approve=`` so a resumed run asks about the same steps (a
        callable cannot be stored: a resume is given it again, or asks through the tools' own rule)."""
        if self.every:
            return True
        return sorted(self.names) if self.names else None

    @property
    def active(self) -> bool:
        """Whether any step of any plan could ask (a tool registered with approve=True counts)."""
        return self.every or bool(self.names) or self.callback is not None or any(
            getattr(t, "approve", False) for t in self.tools.values())

    def asks(self, step: Step) -> bool:
        if self.every or self.callback is not None or step.id in self.names:
            return True
        if step.tool is None:
            return False
        return step.tool in self.names or bool(getattr(self.tools.get(step.tool), "approve", False))


def check_edit(step: Step, args: Mapping[str, Any], tools: Mapping[str, Any]) -> dict[str, Any]:
    """The new arguments of ``step``, checked against its tool's signature (ValueError names each problem).

    ``$id`` references stay allowed (checked when the step runs, like a plan's own)."""
    if step.tool is None:
        raise ValueError(f"step {step.id!r} is a task for agent {step.agent!r}: it has no arguments to edit "
                         "(approve or skip it)")
    if not isinstance(args, Mapping):
        raise TypeError(f"the new arguments of step {step.id!r} must be a dict, got {type(args).__name__}")
    tool = tools[step.tool]
    problems = tool.validate(args, skip=args_with_refs(args))
    undeclared = sorted({ref for value in args.values() for ref in find_refs(value)} - set(step.needs))
    if undeclared:
        problems.append(f"it refers to {', '.join('$' + r for r in undeclared)}, which step {step.id!r} does not "
                        f"need (its needs are {list(step.needs)})")
    if problems:
        raise ValueError(f"the new arguments of step {step.id!r} do not fit tool {step.tool!r}: "
                         + "; ".join(problems))
    return dict(args)


def checked(decision: Decision, step: Step, tools: Mapping[str, Any]) -> Decision:
    """``decision`` with an edit's args checked against ``step``'s tool (ValueError names each
    problem), marked so the run does not check them again. Other decisions are returned as they are."""
    if decision.action != "edit" or decision.checked:
        return decision
    return replace(decision, args=check_edit(step, decision.args or {}, tools), checked=True)
