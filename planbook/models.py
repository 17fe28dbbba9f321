"""The data everyone shares: steps, plans, diffs, events and run results.

These are pydantic models so that a plan can be validated, serialised (to a store,
a cassette, a model's tool schema) and shown the same way everywhere. Nothing here
executes anything.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from ._render import render
from .refs import find_refs


class Status(str, Enum):
    """Where a step is. The marks are the OpenManus plan-text marks."""

    not_started = "not_started"
    in_progress = "in_progress"
    completed = "completed"
    failed = "failed"
    skipped = "skipped"
    blocked = "blocked"

    @property
    def mark(self) -> str:
        return STATUS_MARKS[self]

    def __str__(self) -> str:  # so f-strings print "completed", not "Status.completed"
        return self.value

    @classmethod
    def _missing_(cls, value: object) -> "Status":
        raise ValueError(f"{value!r} is not a step status; use one of {', '.join(s.value for s in cls)}")


STATUS_MARKS: dict[Status, str] = {
    Status.not_started: "[ ]",
    Status.in_progress: "[→]",
    Status.completed: "[✓]",
    Status.failed: "[✗]",
    Status.skipped: "[-]",
    Status.blocked: "[!]",
}

PolicyName = Literal["abort", "skip", "retry", "replan"]


class Step(BaseModel):
    """One unit of work: a tool call (``tool`` + ``args``) or a task for an ``agent``."""

    model_config = ConfigDict(arbitrary_types_allowed=True, validate_assignment=False)

    id: str
    task: str = ""
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    agent: str | None = None
    needs: list[str] = Field(default_factory=list)
    expect: str = ""
    on_failure: PolicyName | None = None

    status: Status = Status.not_started
    result: Any = None
    error: str | None = None
    traceback: str | None = None
    output: str = ""
    notes: str = ""
    attempts: int = 0
    started_at: float | None = None
    finished_at: float | None = None

    @model_validator(mode="after")
    def _refs_are_needs(self) -> "Step":
        """A ``$id`` reference in args is a dependency, however the step was built
        (spec, mapping or ``Step(...)``): the runner waits for it and validation checks it."""
        refs = [r for r in find_refs(self.args) if r not in self.needs]
        if refs:
            self.needs = list(self.needs) + refs
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        # ``step.status = "completed"`` (a notebook user marking a step done) must store the
        # enum: the runner compares with ``is`` and views read ``.mark``
        if name == "status" and not isinstance(value, Status):
            value = Status(value)
        super().__setattr__(name, value)

    def set_state(self, **fields: Any) -> None:
        """Update run-state fields without pydantic's per-assignment machinery.

        The runner sets a dozen fields on every execution with values it owns and has
        already typed; going through ``BaseModel.__setattr__`` for each one was a visible
        share of the per-step overhead (see benchmarks/engine_overhead.py).
        """
        unknown = fields.keys() - _STEP_FIELD_NAMES
        if unknown:
            raise AttributeError(f"Step has no field(s) {sorted(unknown)}")
        self.__dict__.update(fields)

    @property
    def duration(self) -> float | None:
        """Seconds the last attempt took, or None if it has not finished."""
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    @property
    def executor(self) -> str:
        """The tool or agent name, as shown in views."""
        return self.tool if self.tool is not None else (self.agent or "")

    def signature(self) -> tuple[Any, ...]:
        """What a step *does*: two steps with the same id and signature are the same work."""
        return (self.tool, _freeze(self.args), self.agent, self.task)

    def fresh(self) -> "Step":
        """A copy with the run state cleared (what a planner hands over).

        No re-validation (the fields are already valid); args are copied so the copy's
        plan cannot be changed through the original's.
        """
        return self.model_copy(update={"args": _clone(self.args), "needs": list(self.needs), **_RUN_STATE_DEFAULTS})

    def snapshot(self) -> "Step":
        """A copy for the history: later changes to this step do not rewrite the past."""
        # args are shared: the runner never mutates them and tools get rebuilt copies (refs.resolve)
        return self.model_copy(update={"needs": list(self.needs)})

    def describe(self) -> str:
        """One line: what the step does, for diffs and prompts."""
        if self.agent:
            return f"[{self.agent.upper()}] {self.task}".rstrip()
        call = f"{self.tool}({', '.join(f'{k}={v!r}' for k, v in self.args.items())})"
        return f"{self.task} → {call}" if self.task else call

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"Step {self.id} {self.status.mark} {self.describe()}")


_STEP_FIELD_NAMES = frozenset(Step.model_fields)
_RUN_STATE_DEFAULTS: dict[str, Any] = {
    "status": Status.not_started, "result": None, "error": None, "traceback": None, "output": "", "notes": "",
    "attempts": 0, "started_at": None, "finished_at": None,
}


def _clone(value: Any) -> Any:
    """Copy the containers of plain data (dicts, lists, tuples); leave other objects shared."""
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_clone(v) for v in value)
    return value


def _freeze(value: Any) -> Any:
    """A hashable, order-insensitive stand-in for args, so diffs compare content."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


class Plan(BaseModel):
    """An ordered list of steps with a goal, an id and a revision number."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    id: str = "plan"
    goal: str = ""
    title: str = ""
    steps: list[Step] = Field(default_factory=list)
    revision: int = 1
    #: 1-based line of each step in the spec it was parsed from (for error messages).
    _lines: dict[str, int] = PrivateAttr(default_factory=dict)
    #: lines of the second, third, ... step using an already used id (for the duplicate error)
    _duplicate_lines: dict[str, list[int]] = PrivateAttr(default_factory=dict)

    @classmethod
    def parse(cls, text: str, *, id: str | None = None, goal: str | None = None) -> "Plan":
        """Read a plan spec: a YAML/JSON mapping with ``steps`` or a Markdown list."""
        from .spec import parse_plan

        return parse_plan(text, plan_id=id, goal=goal)

    @property
    def display_title(self) -> str:
        return self.title or self.goal or self.id

    def step(self, step_id: str) -> Step:
        """The step with this id (KeyError names the known ids)."""
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(f"no step {step_id!r} in plan {self.id!r}; its steps are {[s.id for s in self.steps]}")

    def counts(self) -> dict[Status, int]:
        counts = {status: 0 for status in Status}
        for s in self.steps:
            counts[s.status] += 1
        return counts

    def line_of(self, step_id: str) -> int | None:
        return self._lines.get(step_id)

    def copy_plan(self, *, fresh: bool = False) -> "Plan":
        """A copy with copies of the steps; results are kept by reference (they may be large).

        ``fresh``: steps that are not completed start clean (a plan that is run again).
        """
        # fresh() copies args: a run's plan must not change when the caller edits theirs
        steps = [s.fresh() if fresh and s.status is not Status.completed else s.snapshot() for s in self.steps]
        clone = self.model_copy(update={"steps": steps})
        clone._lines = dict(self._lines)
        clone._duplicate_lines = {k: list(v) for k, v in self._duplicate_lines.items()}
        return clone

    def __str__(self) -> str:
        return render("plan_text", self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return render("plan_bundle", self)


class PlanDiff(BaseModel):
    """What a replan changed, by step id. ``steps`` describes every id mentioned."""

    from_revision: int
    to_revision: int
    removed: list[str] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)
    revised: list[str] = Field(default_factory=list)
    reason: str | None = None
    steps: dict[str, str] = Field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.removed or self.added or self.revised)

    def __str__(self) -> str:
        return render("diff_text", self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return render("diff_bundle", self)


EventKind = Literal[
    "run.started",
    "plan.created",
    "step.started",
    "step.finished",
    "step.failed",
    "step.retry",
    "step.skipped",
    "step.blocked",
    "plan.diff",
    "llm.call",
    "run.paused",
    "run.finished",
]


class Event(BaseModel):
    """A typed record of something that happened during a run.

    ``data`` holds the kind-specific fields (documented in :mod:`planbook.events`).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kind: EventKind
    time: float
    step: str | None = None
    revision: int = 1
    data: dict[str, Any] = Field(default_factory=dict)

    def __str__(self) -> str:
        where = f" step={self.step}" if self.step else ""
        return f"{self.kind}{where} {self.data}" if self.data else f"{self.kind}{where}"


RunStatus = Literal["running", "paused", "completed", "failed", "interrupted"]
RunReason = Literal[
    "goal_met",
    "steps_skipped",
    "step_budget",
    "replan_budget",
    "no_plan",
    "aborted",
    "interrupted",
    "paused",
]


class Usage(BaseModel):
    """Model calls and tokens spent by a run (filled from ``llm.call`` events)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, data: dict[str, Any]) -> None:
        """Count one ``llm.call`` event's data."""
        self.calls += 1
        self.prompt_tokens += int(data.get("prompt_tokens") or 0)
        self.completion_tokens += int(data.get("completion_tokens") or 0)

    @classmethod
    def from_events(cls, events: "list[Event]") -> "Usage":
        usage = cls()
        for event in events:
            if event.kind == "llm.call":
                usage.add(event.data)
        return usage


class RunResult(BaseModel):
    """How a run ended and everything it did, in order."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    status: RunStatus
    reason: RunReason | None = None
    plan: Plan
    history: list[Step] = Field(default_factory=list)
    revisions: list[PlanDiff] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    outputs: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    #: the traceback behind ``error`` when an exception ended the run (a planner that raised)
    traceback: str | None = None
    executions: int = 0
    replans: int = 0
    max_steps: int = 12
    max_replans: int = 5
    usage: Usage = Field(default_factory=Usage)

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def goal(self) -> str:
        return self.plan.goal

    def __str__(self) -> str:
        return render("result_text", self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return render("result_bundle", self)
