"""OpenManus's planning tool and its plan text, over planbook plans.

:class:`PlanningTool` takes the seven commands of OpenManus's ``planning`` function
(``create update list get set_active mark_step delete``) and answers with the same text,
so a prompt or an agent ported from OpenManus finds what it expects (by default its
arguments are checked against the schema; ``faithful=True`` takes them as OpenManus does); :meth:`PlanningTool.to_param` is the function definition the model is shown,
exactly. Underneath, each plan is a planbook :class:`~planbook.Plan` (no parallel
arrays): :meth:`~PlanningTool.read` and :meth:`~PlanningTool.write` move plans in and out.

Step text is kept as written (whitespace, tags, repeated tags) and compared for progress
the same way it is stored. ``PlanningTool(faithful=True)`` behaves as OpenManus's tool in
every way; by default these fixes apply (each is listed in ``planbook/compat/README.md``):

* ``update`` keeps a step's progress when its text is unchanged *wherever it moved*
  (OpenManus keeps it only at the same index, so inserting a step resets everything
  after it: ``PlanningTool(preserve="position")`` alone restores that);
* arguments are checked against the function schema (OpenManus ignores unknown
  arguments and checks no types: ``mark_step(step_index=False)`` marks step 0);
* ``update`` with ``steps=[]`` or steps that are not strings is refused before anything
  changes (OpenManus ignores an empty list, and changes the title before refusing);
* a line break inside a step's text or notes (or the plan's title) is shown as ``⏎``, so
  every step line a reader (or a model) sees is a real step (OpenManus prints it raw,
  which can forge a ``1. [✓] ...`` line);
* an untagged step with no tool is shown as its text (planbook's plan text printed
  ``text (None)``), and notes are shown for every step, completed ones included;
* the text reads back: :func:`parse_plan_text` turns ``get``'s output (or planbook's
  plan text) into a plan with its statuses and notes.

The plan text lives in :mod:`planbook.compat.openmanus_text` (its names are importable
from here too); the flow that uses the tool is in :mod:`planbook.compat.openmanus_flow`.
"""

from __future__ import annotations

import copy
from collections import defaultdict, deque
from typing import Any, Literal

from ..data.models import Plan, Status, Step
from .openmanus_text import format_plan, one_line, parse_plan_text, step_from_text, step_text

# the plan's text (format_plan, parse_plan_text, step_text, ...) is planbook.compat.openmanus_text
__all__ = ["COMMANDS", "DESCRIPTION", "PARAMETERS", "PlanningTool", "STEP_STATUSES", "ToolError"]

COMMANDS = ("create", "update", "list", "get", "set_active", "mark_step", "delete")
#: the statuses ``mark_step`` accepts (planbook's ``failed`` and ``skipped`` are shown, not set by the tool)
STEP_STATUSES = ("not_started", "in_progress", "completed", "blocked")

DESCRIPTION = """
A planning tool that allows the agent to create and manage plans for solving complex tasks.
The tool provides functionality for creating plans, updating plan steps, and tracking progress.
"""

#: The parameters schema of OpenManus's ``planning`` function, word for word.
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {
            "description": "The command to execute. Available commands: create, update, list, get, set_active, mark_step, delete.",
            "enum": ["create", "update", "list", "get", "set_active", "mark_step", "delete"],
            "type": "string",
        },
        "plan_id": {
            "description": "Unique identifier for the plan. Required for create, update, set_active, and delete commands. Optional for get and mark_step (uses active plan if not specified).",
            "type": "string",
        },
        "title": {
            "description": "Title for the plan. Required for create command, optional for update command.",
            "type": "string",
        },
        "steps": {
            "description": "List of plan steps. Required for create command, optional for update command.",
            "type": "array",
            "items": {"type": "string"},
        },
        "step_index": {
            "description": "Index of the step to update (0-based). Required for mark_step command.",
            "type": "integer",
        },
        "step_status": {
            "description": "Status to set for a step. Used with mark_step command.",
            "enum": ["not_started", "in_progress", "completed", "blocked"],
            "type": "string",
        },
        "step_notes": {
            "description": "Additional notes for a step. Optional for mark_step command.",
            "type": "string",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}

#: ``execute()`` called without a command (OpenManus: a ``TypeError``; planbook: a ``ToolError``)
_MISSING: Any = object()


class ToolError(Exception):
    """A planning command that cannot be carried out; the message says what to pass instead."""


# ------------------------------------------------------------------- the tool
Preserve = Literal["text", "position"]


class PlanningTool:
    """OpenManus's ``planning`` function over planbook plans.

    ``tool.execute(command="create", plan_id="p1", title="...", steps=[...])`` returns
    the text OpenManus returns; a bad call raises :class:`ToolError`. ``faithful=True``
    behaves as OpenManus's tool in every way (lax arguments, ``update``'s edge cases,
    progress kept only at the same index, raw line breaks); by default the fixes in the
    module docstring apply. ``preserve`` chooses how ``update`` keeps progress on its own:
    ``"text"`` (the default) keeps a step whose text is unchanged wherever it moved,
    ``"position"`` only at the same index (OpenManus; implied by ``faithful``).
    """

    name = "planning"
    description = DESCRIPTION

    def __init__(self, *, faithful: bool = False, preserve: Preserve | None = None) -> None:
        if not isinstance(faithful, bool):
            raise TypeError(f"faithful must be True or False, got {faithful!r}")
        if preserve is None:
            preserve = "position" if faithful else "text"
        if preserve not in ("text", "position"):
            raise ValueError(f"preserve must be 'text' or 'position', got {preserve!r}")
        if faithful and preserve != "position":
            raise ValueError("faithful=True keeps progress only at the same index, as OpenManus does: "
                             "drop preserve, or use preserve='text' without faithful")
        self.faithful = faithful
        self.preserve: Preserve = preserve
        self.parameters: dict[str, Any] = copy.deepcopy(PARAMETERS)
        #: the plans by id, in creation order (planbook plans, shared: use read/write for copies)
        self.plans: dict[Any, Plan] = {}
        self.active_plan_id: Any = None
        #: plan id -> step id -> (the text as written, the task and agent read from it)
        self._written: dict[Any, dict[str, tuple[str, str, str | None]]] = {}

    def to_param(self) -> dict[str, Any]:
        """The OpenAI function definition the model is offered."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": copy.deepcopy(self.parameters)},
        }

    # ----------------------------------------------------------- step texts
    def text_of(self, step: Step, plan_id: Any = None) -> str:
        """A step's text as the model wrote it (a step made or edited in planbook: :func:`step_text`)."""
        written = self._written.get(self._active_or(plan_id) if plan_id is None else plan_id, {}).get(step.id)
        if written is not None and written[1:] == (step.task, step.agent):
            return written[0]
        return step_text(step)

    def _from_text(self, plan_id: Any, text: str, step_id: str) -> Step:
        step = step_from_text(text, step_id)
        self._written.setdefault(plan_id, {})[step.id] = (text, step.task, step.agent)
        return step

    def format(self, plan_id: Any = None) -> str:
        """``get``'s text of a plan (the active one by default)."""
        key = self._active_or(plan_id)
        return format_plan(self._plan(key), text_of=lambda s: self.text_of(s, key), raw=self.faithful)

    # ----------------------------------------------------------- plans in and out
    def read(self, plan_id: str | None = None) -> Plan:
        """A copy of a plan (the active one by default)."""
        return self._plan(self._active_or(plan_id)).copy_plan()

    def write(self, plan: Plan, *, plan_id: str | None = None, activate: bool = True) -> str:
        """Store a copy of ``plan`` (replacing a plan with the same id); returns its id."""
        stored = plan.copy_plan()
        if plan_id is not None:
            stored.id = plan_id
        self.plans[stored.id] = stored
        self._written.pop(stored.id, None)
        if activate:
            self.active_plan_id = stored.id
        return stored.id

    def load_text(self, text: str, *, plan_id: str | None = None, activate: bool = True) -> str:
        """Store the plan written in ``text`` (a pasted ``get`` output keeps its statuses); returns its id."""
        return self.write(parse_plan_text(text, plan_id=plan_id), activate=activate)

    # ----------------------------------------------------------------- commands
    def execute(self, command: Any = _MISSING, **args: Any) -> str:
        """Run one command, as the model calls it; returns the command's text."""
        if command is _MISSING and self.faithful:  # OpenManus's command is a required keyword
            raise TypeError("PlanningTool.execute() missing 1 required keyword-only argument: 'command'")
        if command is _MISSING or (command is None and not self.faithful):
            raise ToolError(f"Parameter `command` is required: one of {', '.join(COMMANDS)}")
        if command not in COMMANDS:
            raise ToolError(f"Unrecognized command: {command}. Allowed commands are: {', '.join(COMMANDS)}")
        if not self.faithful:  # OpenManus takes any keyword (**kwargs) and checks no type
            self._check_args(args)
        plan_id = args.get("plan_id")
        if command == "create":
            return self._create(plan_id, args.get("title"), args.get("steps"))
        if command == "update":
            return self._update(plan_id, args.get("title"), args.get("steps"))
        if command == "list":
            return self._list()
        if command == "get":
            return self.format(self._active_or(plan_id))
        if command == "set_active":
            key = self._required(plan_id, "set_active")
            self._plan(key)
            self.active_plan_id = key
            return f"Plan '{key}' is now the active plan.\n\n{self.format(key)}"
        if command == "mark_step":
            return self._mark(self._active_or(plan_id), args.get("step_index"), args.get("step_status"), args.get("step_notes"))
        return self._delete(self._required(plan_id, "delete"))

    __call__ = execute

    def _check_args(self, args: dict[str, Any]) -> None:
        properties = self.parameters["properties"]
        unknown = sorted(set(args) - set(properties))
        if unknown:
            raise ToolError(f"Unknown parameter(s) {', '.join(unknown)}: the planning tool takes "
                            f"{', '.join(properties)} (additionalProperties is false)")
        for name, value in args.items():
            if value is None:
                continue
            kind = properties[name]["type"]
            if kind == "string" and not isinstance(value, str):
                raise ToolError(f"Parameter `{name}` must be a string, got {value!r}")
            if kind == "integer" and (not isinstance(value, int) or isinstance(value, bool)):
                raise ToolError(f"Parameter `{name}` must be an integer, got {value!r}")
            if kind == "array" and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
                raise ToolError(f"Parameter `{name}` must be a list of strings, got {value!r}")

    @staticmethod
    def _required(plan_id: Any, command: str) -> Any:
        if not plan_id:
            raise ToolError(f"Parameter `plan_id` is required for command: {command}")
        return plan_id

    def _active_or(self, plan_id: Any) -> Any:
        if plan_id:
            return plan_id
        if not self.active_plan_id:
            raise ToolError("No active plan. Please specify a plan_id or set an active plan.")
        return self.active_plan_id

    def _plan(self, plan_id: Any) -> Plan:
        if plan_id not in self.plans:
            known = "" if self.faithful else f"; the plans are {', '.join(map(str, self.plans))}" if self.plans \
                else "; there are no plans"
            raise ToolError(f"No plan found with ID: {plan_id}{known}")
        return self.plans[plan_id]

    def _create(self, plan_id: Any, title: Any, steps: Any) -> str:
        plan_id = self._required(plan_id, "create")
        if plan_id in self.plans:
            raise ToolError(f"A plan with ID '{plan_id}' already exists. Use 'update' to modify existing plans.")
        if not title:
            raise ToolError("Parameter `title` is required for command: create")
        if not steps or not isinstance(steps, list) or not all(isinstance(text, str) for text in steps):
            raise ToolError("Parameter `steps` must be a non-empty list of strings for command: create")
        self._written[plan_id] = {}
        plan = Plan(id=str(plan_id), title=str(title),
                    steps=[self._from_text(plan_id, text, str(i)) for i, text in enumerate(steps)])
        self.plans[plan_id] = plan
        self.active_plan_id = plan_id
        return f"Plan created successfully with ID: {plan_id}\n\n{self.format(plan_id)}"

    def _update(self, plan_id: Any, title: Any, steps: Any) -> str:
        plan_id = self._required(plan_id, "update")
        plan = self._plan(plan_id)
        if self.faithful:  # OpenManus: the title first, then steps only when the list is not empty
            if title:
                plan.title = str(title)
            if steps and (not isinstance(steps, list) or not all(isinstance(text, str) for text in steps)):
                raise ToolError("Parameter `steps` must be a list of strings for command: update")
        else:  # planbook: refused before anything changes
            if steps is not None and not steps:
                raise ToolError("Parameter `steps` must be a non-empty list of strings for command: update "
                                "(leave it out to keep the steps)")
            if title:
                plan.title = title
        if steps:
            plan.steps = self._merge(plan_id, plan.steps, steps)
            ids = {s.id for s in plan.steps}
            for step in plan.steps:  # OpenManus's steps have no needs: a kept step loses those that left
                if any(n not in ids for n in step.needs):
                    step.needs = [n for n in step.needs if n in ids]
            written = self._written.get(plan_id, {})
            self._written[plan_id] = {k: v for k, v in written.items() if k in ids}
            plan.revision += 1
        return f"Plan updated successfully: {plan_id}\n\n{self.format(plan_id)}"

    def _merge(self, plan_id: Any, old: list[Step], texts: list[str]) -> list[Step]:
        """The new steps, reusing an old step (status, notes, result) where ``preserve`` says it is the same.

        Texts are compared as they are stored: exactly as written.
        """
        written = [self.text_of(step, plan_id) for step in old]
        kept: list[Step | None] = []
        if self.preserve == "position":
            kept = [old[i] if i < len(old) and written[i] == text else None for i, text in enumerate(texts)]
        else:
            by_text: dict[str, deque[Step]] = defaultdict(deque)
            for step, text in zip(old, written):
                by_text[text].append(step)
            kept = [by_text[text].popleft() if by_text[text] else None for text in texts]
        taken = {s.id for s in kept if s is not None}
        steps = []
        for index, (text, found) in enumerate(zip(texts, kept)):
            if found is None:
                found = self._from_text(plan_id, text, _free_id(taken, index))
                taken.add(found.id)
            steps.append(found)
        return steps

    def _list(self) -> str:
        if not self.plans:
            return "No plans available. Create a plan with the 'create' command."
        output = "Available plans:\n"
        for plan_id, plan in self.plans.items():
            active = " (active)" if plan_id == self.active_plan_id else ""
            done = plan.counts()[Status.completed]
            title = plan.title if self.faithful else one_line(plan.display_title)
            output += f"• {plan_id}{active}: {title} - {done}/{len(plan.steps)} steps completed\n"
        return output

    def _mark(self, plan_id: Any, step_index: Any, step_status: Any, step_notes: Any) -> str:
        plan = self._plan(plan_id)
        if step_index is None:
            raise ToolError("Parameter `step_index` is required for command: mark_step")
        if not plan.steps and not self.faithful:
            raise ToolError(f"Plan '{plan_id}' has no steps to mark; add steps with 'update'")
        if step_index < 0 or step_index >= len(plan.steps):  # faithful: a str index raises TypeError, as upstream
            raise ToolError(f"Invalid step_index: {step_index}. Valid indices range from 0 to {len(plan.steps) - 1}.")
        if step_status and step_status not in STEP_STATUSES:
            raise ToolError(f"Invalid step_status: {step_status}. Valid statuses are: {', '.join(STEP_STATUSES)}")
        # the step is indexed only to change it, as upstream: False is step 0, and 1.0 marks
        # nothing but is "updated" (a float index raises only when there is something to set)
        if step_status:
            plan.steps[step_index].status = Status(step_status)
        if step_notes:
            plan.steps[step_index].notes = str(step_notes)
        return f"Step {step_index} updated in plan '{plan_id}'.\n\n{self.format(plan_id)}"

    def _delete(self, plan_id: Any) -> str:
        self._plan(plan_id)
        del self.plans[plan_id]
        self._written.pop(plan_id, None)
        if self.active_plan_id == plan_id:
            self.active_plan_id = None
        return f"Plan '{plan_id}' has been deleted."

    def index_of(self, step_id: str, plan_id: str | None = None) -> int:
        """The 0-based index (OpenManus's step number) of a step of a plan."""
        plan = self._plan(self._active_or(plan_id))
        for index, step in enumerate(plan.steps):
            if step.id == step_id:
                return index
        raise KeyError(f"no step {step_id!r} in plan {plan.id!r}")

    def __repr__(self) -> str:
        faithful = ", faithful=True" if self.faithful else ""
        return f"PlanningTool(plans={list(self.plans)}, active={self.active_plan_id!r}, preserve={self.preserve!r}{faithful})"


def _free_id(taken: set[str], index: int) -> str:
    """The step's position as its id, or the next number nobody uses."""
    if str(index) not in taken:
        return str(index)
    number = max((int(t) for t in taken if t.isdigit()), default=-1) + 1
    while str(number) in taken:
        number += 1
    return str(number)
