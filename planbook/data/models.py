"""The data everyone shares: steps, plans, diffs, events and run results.

These are pydantic models so that a plan can be validated, serialised (to a store,
a cassette, a model's tool schema) and shown the same way everywhere. Nothing here
executes anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import Enum
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, computed_field, field_serializer, model_validator

from ..outbound import RunSecrets, shown_arg
from ..outbound.checkpoint import mask_text
from . import budgets
from .plaincopy import clone_data
from .refs import find_refs
from .render import render
from .secret import from_json_refs, to_json_refs
from .stepmark import StepMark
from .timeline import Execution, Timeline, build_timeline


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

PolicyName = Literal["abort", "skip", "retry", "replan", "continue"]


class _MaskedRepr:
    """``repr`` is an exit too (a log line, a debugger, a print in a script): a model's repr
    passes the process's checkpoint, whatever the fields hold in memory for the run."""

    def __repr__(self) -> str:
        return mask_text(super().__repr__())


class StepWork(_MaskedRepr, BaseModel):
    """What a step does: the fields a planner writes, a person or a model.

    The one definition of them: spec reading (:mod:`planbook.spec.formats`), the plan-file JSON
    Schema (:mod:`planbook.spec.schema`) and the model's ``submit_plan`` schema derive from it.
    """

    id: str = Field(description="short unique id, e.g. '1'")
    task: str = Field(default="", description="what the step does, in words")
    tool: str | None = Field(default=None, description="name of the tool to call (or leave empty and name an agent)")
    args: dict[str, Any] = Field(default_factory=dict, description="tool arguments; '$ID' is the result of step ID")
    agent: str | None = Field(default=None, description="name of the agent that does the task (no args)")
    needs: list[str] = Field(default_factory=list, description="ids of earlier steps whose results this step uses")
    expect: str = Field(default="", description="what success looks like")

    @field_serializer("args", when_used="json")
    def _args_json(self, args: dict[str, Any]) -> dict[str, Any]:
        """A :class:`~planbook.data.secret.Secret` is written as its reference, never its value."""
        return to_json_refs(args)

    @model_validator(mode="after")
    def _secret_refs(self) -> "StepWork":
        """``{"$secret": "env:NAME"}`` in args (a plan read from YAML, JSON or a store) is a
        :class:`~planbook.data.secret.Secret`, however the step was built."""
        args = self.args
        if args:
            found = from_json_refs(args)
            if found is not args:
                self.args = found
        return self


class StepSpec(StepWork):
    """Everything a plan spec may say about a step: its work and what a failure of it does."""

    on_failure: PolicyName | None = Field(
        default=None,
        description="what a failure of this step does (abort, skip, retry, replan), instead of the run's policy",
    )


class Step(StepSpec):
    """One unit of work: a tool call (``tool`` + ``args``) or a task for an ``agent``."""

    model_config = ConfigDict(arbitrary_types_allowed=True, validate_assignment=False)

    status: Status = Status.not_started
    result: Any = None
    error: str | None = None
    traceback: str | None = None
    output: str = ""
    notes: str = ""  # prose for people: no state is read back from it (that is ``mark``)
    attempts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    mark: StepMark | None = None  # its state beyond its status (see .stepmark); from_*: a reused result's origin
    from_run: str | None = None
    from_step: str | None = None

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
        _own_fields_set(self)
        super().__setattr__(name, value)

    def __copy__(self) -> "Step":
        return _own_fields_set(super().__copy__())

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> "Step":
        return _own_fields_set(super().__deepcopy__(memo))

    def copy_with(self, update: dict[str, Any]) -> "Step":
        """A shallow copy with ``update`` applied, cheaper in time and memory than ``model_copy``
        (a fork copies the steps it keeps with it too).

        A run copies every step of its plan and snapshots a step after each execution;
        pydantic gives each copy its own set of the field names that were set (728 bytes
        for a step, more than the rest of a snapshot). Copies share one set per
        combination of names instead, and get their own again before they are changed.
        """
        copied = object.__new__(type(self))
        values = self.__dict__.copy()
        values.update(update)
        object.__setattr__(copied, "__dict__", values)
        fields = self.__pydantic_fields_set__
        if type(fields) is _SharedFields and update.keys() <= fields:
            shared: _SharedFields | None = fields
        else:
            key = frozenset(fields).union(update)
            shared = _SHARED_FIELD_SETS.get(key)
            if shared is None:
                shared = _SHARED_FIELD_SETS[key] = _SharedFields(key)
        object.__setattr__(copied, "__pydantic_fields_set__", shared)
        object.__setattr__(copied, "__pydantic_extra__", None)
        object.__setattr__(copied, "__pydantic_private__", None)
        return copied

    def set_state(self, **fields: Any) -> None:
        """Update run-state fields without pydantic's per-assignment machinery.

        The runner sets a dozen fields on every execution with values it owns and has
        already typed; going through ``BaseModel.__setattr__`` for each one was a visible
        share of the per-step overhead (see benchmarks/engine_overhead.py).
        """
        if not _STEP_FIELD_NAMES.issuperset(fields):  # no set is built on the common path
            raise AttributeError(f"Step has no field(s) {sorted(fields.keys() - _STEP_FIELD_NAMES)}")
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
        return self.copy_with({"args": clone_data(self.args), "needs": list(self.needs), **_RUN_STATE_DEFAULTS})

    def snapshot(self) -> "Step":
        """A copy for the history: later changes to this step do not rewrite the past."""
        # args are shared: the runner never mutates them and tools get rebuilt copies (refs.resolve)
        return self.copy_with({"needs": list(self.needs)})

    def describe(self) -> str:
        """One line: what the step does, for diffs and prompts."""
        if self.agent:
            return f"[{self.agent.upper()}] {self.task}".rstrip()
        # a secret-named arg shows as *** (a diff, a prompt, a tooltip: all of them leave the run)
        call = f"{self.tool}({', '.join([f'{k}={shown_arg(k, v, repr)}' for k, v in self.args.items()])})"
        return f"{self.task} → {call}" if self.task else call

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"Step {self.id} {self.status.mark} {self.describe()}")


_STEP_FIELD_NAMES = frozenset(Step.model_fields)
class _SharedFields(set):
    """A set of field names shared by many step copies: never changed in place."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("this set of field names is shared by several steps; give the step its own first")

    add = update = discard = remove = pop = clear = _refuse
    __ior__ = __iand__ = __isub__ = __ixor__ = _refuse  # type: ignore[assignment]
    difference_update = intersection_update = symmetric_difference_update = _refuse


#: the field-name sets copies share (see Step.copy_with): a handful of distinct sets in practice
_SHARED_FIELD_SETS: dict[frozenset[str], _SharedFields] = {}


def _own_fields_set(step: Step) -> Step:
    """Give ``step`` a set of its own before pydantic adds to it (a copy shares one)."""
    fields = getattr(step, "__pydantic_fields_set__", None)
    if type(fields) is _SharedFields:
        object.__setattr__(step, "__pydantic_fields_set__", set(fields))
    return step
_RUN_STATE_DEFAULTS: dict[str, Any] = {
    "status": Status.not_started, "result": None, "error": None, "traceback": None, "output": "", "notes": "",
    "attempts": 0, "started_at": None, "finished_at": None, "mark": None, "from_run": None, "from_step": None,
}


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


#: reads a plan spec into a :class:`Plan`; :mod:`planbook.spec.formats` registers it when imported
_PLAN_READER: Callable[..., "Plan"] | None = None


def register_plan_reader(reader: Callable[..., "Plan"]) -> None:
    """Make ``reader(text, *, plan_id, goal)`` the one :meth:`Plan.parse` calls (the spec
    layer sits above the models, so it registers itself here rather than being imported)."""
    global _PLAN_READER
    _PLAN_READER = reader


class Plan(_MaskedRepr, BaseModel):
    """An ordered list of steps with a goal, an id and a revision number."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    id: str = "plan"
    goal: str = ""
    title: str = ""
    steps: list[Step] = Field(default_factory=list)
    revision: int = 1
    #: 1-based line of each step (and of its fields: ``(id, "args", "city")``) in the spec it was parsed from
    _lines: dict[Any, int] = PrivateAttr(default_factory=dict)
    #: lines of the second, third, ... step using an already used id (for the duplicate error)
    _duplicate_lines: dict[str, list[int]] = PrivateAttr(default_factory=dict)

    @classmethod
    def parse(cls, text: str, *, id: str | None = None, goal: str | None = None) -> "Plan":
        """Read a plan spec: a YAML/JSON mapping with ``steps`` or a Markdown list (the reader
        lives in :mod:`planbook.spec.formats`, which registers itself here: the models import no reader)."""
        if _PLAN_READER is None:
            raise LookupError("no plan spec reader is registered: import planbook.spec.formats (import planbook does) "
                              "before Plan.parse")
        return _PLAN_READER(text, plan_id=id, goal=goal)

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

    def line_of(self, *key: Any) -> int | None:
        """The line of a step (``"a"``) or of its field or arg (``"a", "args", "city"``) in the spec it was read from."""
        return self._lines.get(key[0] if len(key) == 1 else key)

    def repeat_lines(self, step_id: str) -> list[int]:
        """The lines of the second, third, ... step that used ``step_id`` again in the spec."""
        return self._duplicate_lines.get(step_id, [])

    def keep_lines(self, lines: dict[Any, int], repeats: dict[str, list[int]] | None = None) -> None:
        """Where the steps stood in the spec (a reader in planbook.spec or compat says it)."""
        self._lines, self._duplicate_lines = lines, repeats or {}

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


class PlanDiff(_MaskedRepr, BaseModel):
    """What a replan changed, by step id. ``steps`` describes every id mentioned.

    ``rejected`` holds why the run refused a replacement (it is kept in the history so the
    user sees what the planner proposed; the plan did not change, and no replan is counted).
    """

    from_revision: int
    to_revision: int
    removed: list[str] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)
    revised: list[str] = Field(default_factory=list)
    reason: str | None = None
    steps: dict[str, str] = Field(default_factory=dict)
    rejected: str | None = None

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
    "step.cached",
    "plan.diff",
    "llm.call",
    "run.paused",
    "run.finished",
    "step.waiting",
    "step.decided",
    "run.steered",
    "step.output",
]


class Event(_MaskedRepr, BaseModel):
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

    @classmethod
    def record(cls, kind: EventKind, time: float, step: str | None, revision: int, data: dict[str, Any]) -> "Event":
        """Build an event from values the runner already typed, without validation.

        A run makes two or more events per step; ``model_construct`` spends more time in
        its generic bookkeeping than a no-op step takes.
        """
        event = _new(cls)  # object's own __new__ and __setattr__, bound once: a third of the time
        fields: Any = _EventFields()  # a plain instance: the attributes set next become the event's fields
        fields.kind, fields.time, fields.step, fields.revision, fields.data = kind, time, step, revision, data
        _set(event, "__dict__", fields.__dict__)
        _set(event, "__pydantic_fields_set__", _EVENT_FIELDS)
        _set(event, "__pydantic_extra__", None)
        _set(event, "__pydantic_private__", None)
        return event


#: every event's fields-set: one set for all of them, holding every field name, so adding one
#: (pydantic does, on assignment) changes nothing; a copy (model_copy) gets its own
_EVENT_FIELDS = {"kind", "time", "step", "revision", "data"}
_new, _set = object.__new__, object.__setattr__


# A run keeps two events a step, each a dict of fields and a dict of data: most of what a
# finished run holds. The dicts of a plain class's instances share one table of key names
# (CPython), where a dict literal has a table of its own, so these hand over such a dict:
# a normal dict to everyone who reads or changes it, at about half the memory.
class _EventFields:
    """An event's fields, as the instance dict of this class (see above)."""


class _StartedData:
    """``step.started`` data (see above)."""


class _FinishedData:
    """``step.finished`` data (see above)."""


def started_data(attempt: int, execution: int, worker: str) -> dict[str, Any]:
    """``{"attempt": ..., "execution": ..., "worker": ...}``, in a dict of a shared key table."""
    data = _StartedData()
    data.attempt, data.execution, data.worker = attempt, execution, worker  # type: ignore[attr-defined]
    return data.__dict__


def finished_data(duration: float | None, execution: int, result: str) -> dict[str, Any]:
    """``{"duration": ..., "execution": ..., "result": ...}``, in a dict of a shared key table."""
    data = _FinishedData()
    data.duration, data.execution, data.result = duration, execution, result  # type: ignore[attr-defined]
    return data.__dict__


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
    "stopped",
    "waiting",
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
        usage.add_events(events)
        return usage

    def add_events(self, events: "Iterable[Event]") -> None:
        """Count the model calls among ``events``."""
        for event in events:
            if event.kind == "llm.call":
                self.add(event.data)


class RunResult(_MaskedRepr, BaseModel):
    """How a run ended and everything it did, in order."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    status: RunStatus
    reason: RunReason | None = None
    plan: Plan
    #: each execution's step as it ended; in a finished run the entry of a step's last
    #: execution is that step of ``plan`` itself (one object, not a copy beside it)
    history: list[Step] = Field(default_factory=list)
    revisions: list[PlanDiff] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    outputs: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    #: the traceback behind ``error`` when an exception ended the run (a planner that raised)
    traceback: str | None = None
    executions: int = 0
    replans: int = 0
    max_steps: int = budgets.MAX_STEPS
    max_replans: int = budgets.MAX_REPLANS
    usage: Usage = Field(default_factory=Usage)
    #: when and where each execution that ended ran, in the order they started (the one record
    #: of an execution: :class:`~planbook.data.timeline.Execution`)
    records: list[Execution] = Field(default_factory=list)
    #: the run's id (the one ``planbook.runs()`` lists; a run with no store has one too)
    run_id: str | None = None
    #: a forked run's origin (:class:`~planbook.data.lineage.Lineage` as plain data), None for a run that is no fork
    lineage: dict[str, Any] | None = None

    @property
    def parent(self) -> str | None:
        """The id of the run this one was forked from (None for a run that is no fork)."""
        return None if self.lineage is None else self.lineage.get("parent")

    @computed_field  # type: ignore[prop-decorator]
    @cached_property
    def timeline(self) -> Timeline:
        """Overlaps between executions and the critical path, built when first asked for."""
        return build_timeline(self.records, self.history)

    #: the run's gate (its secrets); a result read back from a store gets one from its plan
    _secrets: "RunSecrets | None" = PrivateAttr(default=None)

    def gated(self, secrets: RunSecrets) -> "RunResult":
        """This result, shown through ``secrets`` (the run's gate) wherever it is displayed."""
        self._secrets = secrets
        return self

    @property
    def secrets(self) -> RunSecrets:
        """What this run knows to be secret: every view of it hides these (see :mod:`planbook.outbound`)."""
        if self._secrets is None:
            self._secrets = RunSecrets.of_plan(self.plan)
        return self._secrets

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def goal(self) -> str:
        return self.plan.goal

    def pane(self, step_id: str) -> Any:
        """Step ``step_id``'s pane to display (call, time, result, printed output, error), through
        the run's gate: any step's, also one the saved record keeps no pane for."""
        return render("step_pane", self, step_id)

    def __str__(self) -> str:
        return render("result_text", self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return render("result_bundle", self)
