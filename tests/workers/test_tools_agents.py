"""Tools (registration, schemas, argument checks) and agents (FunctionAgent, ScriptedAgent,
as_agents, and the rule that returning is not success)."""

from __future__ import annotations

import warnings
from typing import Annotated, Any, Optional

import pytest
from pydantic import Field

import planbook
from helpers import Lab
from planbook import AgentContext, AgentReply, FunctionAgent, ScriptedAgent, Step, Tool, Toolbox, run
from planbook.workers.agents import as_agents
from planbook.workers.tools import as_toolbox


def search(query: str, limit: int = 5, *, exact: bool = False) -> list[str]:
    """Search the notes for a query.

    The rest of the docstring is not part of the description.
    """
    return [query] * limit


def test_schema_from_signature_and_docstring_first_line() -> None:
    assert Tool(search).schema() == {
        "name": "search",
        "description": "Search the notes for a query.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"title": "Query", "type": "string"},
                "limit": {"default": 5, "title": "Limit", "type": "integer"},
                "exact": {"default": False, "title": "Exact", "type": "boolean"},
            },
            "required": ["query"],
        },
    }


def test_schema_of_an_untyped_undocumented_tool() -> None:
    def raw(x, y=1):
        return x

    tool = Tool(raw)
    assert tool.description == "" and tool.parameters["required"] == ["x"]
    assert tool.validate({"x": object()}) == []


def test_toolbox_registration_forms() -> None:
    box = Toolbox()

    @box.tool
    def one() -> int:
        """One."""
        return 1

    @box.tool(name="two", description="Two, renamed.")
    def whatever() -> int:
        return 2

    assert one() == 1 and whatever() == 2  # the decorator returns the function unchanged
    assert list(box) == ["one", "two"] and len(box) == 2
    assert box["two"].description == "Two, renamed." and box["two"]() == 2
    assert [s["name"] for s in box.schemas()] == ["one", "two"]
    assert repr(box) == "Toolbox(['one', 'two'])"

    @box.tool
    def one() -> int:  # noqa: F811 - re-running a notebook cell replaces the tool
        """One again."""
        return 11

    assert box["one"]() == 11 and len(box) == 2
    box.remove("two")
    assert list(box) == ["one"]


def test_as_toolbox_accepts_mappings_and_lists() -> None:
    box = as_toolbox({"find": search})
    assert list(box) == ["find"] and box["find"].description == "Search the notes for a query."
    assert list(as_toolbox([search])) == ["search"]
    assert as_toolbox(None) is planbook.default_toolbox
    with pytest.raises(TypeError, match="tools must be a Toolbox"):
        as_toolbox("search")


def test_module_level_tool_registers_in_the_default_toolbox() -> None:
    @planbook.tool
    def pb_test_shout(text: str) -> str:
        """Shout."""
        return text.upper()

    try:
        result = run("steps: [{tool: pb_test_shout, args: {text: hi}}]")  # tools=None: the default toolbox
        assert result.outputs == {"1": "HI"}
    finally:
        planbook.default_toolbox.remove("pb_test_shout")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(a, /): pass", "positional-only parameter 'a' cannot be passed by name"),
        ("def f(_secret: int): pass", "parameter '_secret' cannot be a tool argument"),
        ("def f(model_config: int): pass", "parameter 'model_config' cannot be a tool argument"),
    ],
)
def test_parameters_a_tool_cannot_take_are_errors_at_registration(source: str, message: str) -> None:
    namespace: dict = {}
    exec(source, namespace)
    with pytest.raises(ValueError, match=message):
        Tool(namespace["f"])


def test_tool_names_must_be_identifiers() -> None:
    with pytest.raises(ValueError, match="must be a Python identifier"):
        Tool(lambda: 1)
    assert Tool(lambda: 1, name="constant").name == "constant"
    with pytest.raises(TypeError, match="a tool must be callable"):
        Tool(3)  # type: ignore[arg-type]


def test_args_named_like_pydantic_methods_work_without_warnings() -> None:
    def save(json: str, copy: int = 1, schema: str = "s") -> tuple:
        """Save."""
        return json, copy, schema

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        box = Toolbox([save])
    result = run("steps: [{tool: save, args: {json: '{}', copy: '2'}}]", tools=box)
    assert result.outputs == {"1": ("{}", 2, "s")}  # "2" coerced to int by the signature


def test_coerce_and_kwargs_tools() -> None:
    def anything(n: int, **extra) -> dict:
        return {"n": n, **extra}

    tool = Tool(anything)
    assert tool.validate({"n": "3", "colour": "red"}) == []
    assert tool.coerce({"n": "3", "colour": "red"}) == {"n": 3, "colour": "red"}
    with pytest.raises(ValueError, match=r"bad arguments for tool 'anything': n: .* \(got 'x'\)"):
        tool.coerce({"n": "x"})



def typed(n: int, ratio: float = 1.0, name: str | None = None, flag: bool = False, raw: Any = None,
          maybe: Optional[int] = None, pos: Annotated[int, Field(gt=0)] = 1, items: list[int] | None = None) -> int:
    """Typed arguments of several kinds."""
    return n


def test_coerce_passes_plain_values_as_pydantic_would() -> None:
    """Values that already have their parameter's plain type skip the model; anything else
    (a string for an int, a bool for an int, an int for a float, a missing arg) goes through it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every annotation resolves
        tool = Tool(typed)
    cases: list[dict[str, Any]] = [
        {"n": 3}, {"n": 3, "ratio": 2.5, "name": "x", "flag": True, "raw": [1, "a"], "maybe": None},
        {"n": "3"}, {"n": True}, {"n": 3, "ratio": 2}, {"n": 3, "name": None}, {"n": 3, "items": ["1", 2]},
        {"n": 3, "maybe": "4"}, {"n": 3, "pos": 5},
    ]
    for args in cases:
        fields = tool._fields
        expected = dict(tool.args_model.model_validate(args).__dict__)
        got = tool.coerce(args)
        assert got == {k: expected[k] for k in args if k in fields}, args
        assert all(type(got[k]) is type(expected[k]) for k in got), args
        assert got is not args
    for bad in ({"ratio": 1.0}, {"n": "x"}, {"n": 3, "maybe": "four"}):
        with pytest.raises(ValueError, match="bad arguments for tool 'typed'"):
            tool.coerce(bad)


# ------------------------------------------------------------------ agents
def ctx(**needs) -> AgentContext:
    return AgentContext(goal="g", plan_text="plan", step=Step(id="s", agent="a", task="t"), needs=needs)


def test_function_agent_with_one_and_two_arguments() -> None:
    def shout(task):
        """Shouts the task."""
        return task.upper()

    one = FunctionAgent(shout)
    assert (one.name, one.description) == ("shout", "Shouts the task.")
    assert one("hi", ctx()) == AgentReply(answer="HI", ok=True)

    two = FunctionAgent(lambda task, context: f"{task} with {sorted(context.needs)}", name="two")
    assert two("hi", ctx(a=1, b=2)).answer == "hi with ['a', 'b']"

    explicit = FunctionAgent(lambda task: AgentReply(answer=None, ok=False, notes="no"))
    assert explicit("x", ctx()) == AgentReply(answer=None, ok=False, notes="no")


def test_async_function_agent_runs_and_awaits() -> None:
    async def slow(task, context):
        return f"awaited {task}"

    result = run("1. [slow] think", agents={"slow": slow})
    assert (result.status, result.outputs) == ("completed", {"1": "awaited think"})


def test_scripted_agent_answers_default_and_fail_on() -> None:
    agent = ScriptedAgent(
        "writer",
        answers={r"draft": "a draft", r"count (\d+)": lambda task, c: len(task)},
        default="done",
        fail_on=[r"publish"],
        failure="not allowed",
    )
    assert agent("Draft the intro", ctx()) == AgentReply(answer="a draft")
    assert agent("count 12", ctx()).answer == 8
    assert agent("tidy", ctx()).answer == "done"
    reply = agent("PUBLISH it", ctx())
    assert (reply.ok, reply.answer, reply.notes) == (False, None, "not allowed (task matched 'publish')")
    assert len(agent.calls) == 4 and agent.calls[0].goal == "g"
    assert repr(agent) == "<ScriptedAgent writer>"


def test_scripted_agent_failure_fails_the_step() -> None:
    agent = ScriptedAgent("w", fail_on=["second"])
    result = run("1. [w] first\n2. [w] second\n3. [w] third", agents=[agent])
    assert (result.status, result.reason) == ("failed", "aborted")
    step = result.plan.step("2")
    assert step.status.value == "failed"
    assert step.error == "the agent could not do this task (task matched 'second')"
    assert result.error == "step 2 failed: the agent could not do this task (task matched 'second')"
    assert [c.step.id for c in agent.calls] == ["1", "2"]


def test_returning_is_not_success_an_agent_saying_ok_false_fails() -> None:
    """The OpenManus pitfall: a step is completed only if its executor says it succeeded."""

    class Honest:
        name, description = "honest", "reports failure"

        def __call__(self, task, context):
            return AgentReply(answer="I could not find the file", ok=False)

    result = run("1. [honest] find the file", agents=[Honest()], on_failure="skip")
    step = result.plan.step("1")
    assert step.status.value == "skipped" and step.error == "I could not find the file"
    assert step.result == "I could not find the file" and result.outputs == {}
    assert result.reason == "steps_skipped"


def test_agent_failure_without_words() -> None:
    result = run("1. [mute] x", agents={"mute": lambda task: AgentReply(answer=None, ok=False)})
    assert result.plan.step("1").error == "the agent reported failure"


def test_a_declared_agent_must_return_an_agent_reply() -> None:
    class Sloppy:
        name, description = "sloppy", "returns a bare string"

        def __call__(self, task, context):
            return "looks fine to me"

    result = run("1. [sloppy] x", agents=[Sloppy()])
    assert (result.status, result.reason) == ("failed", "aborted")
    assert result.plan.step("1").error == (
        "agent 'sloppy' returned str, not an AgentReply: it must say whether it succeeded")


def test_as_agents_wraps_raw_callables() -> None:
    def helper(task):
        return {"handled": task}

    agents = as_agents({"helper": helper})
    assert isinstance(agents["helper"], FunctionAgent) and agents["helper"].name == "helper"
    result = run("1. [helper] do it", agents={"helper": helper})
    assert (result.status, result.outputs) == ("completed", {"1": {"handled": "do it"}})
    scripted = ScriptedAgent("s")
    assert as_agents([scripted]) == {"s": scripted}
    assert as_agents(None) == {}


@pytest.mark.parametrize(
    ("agents", "message"),
    [
        ("writer", "agents must be a mapping"),
        ([lambda t: t], "has no string .name"),
        ({"x": 3}, "agent 'x' is not callable"),
    ],
)
def test_as_agents_errors(agents: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        as_agents(agents)  # type: ignore[arg-type]


def test_agent_exception_fails_with_traceback() -> None:
    def broken(task):
        raise ValueError("no idea")

    result = run("1. [broken] x", agents={"broken": broken})
    step = result.plan.step("1")
    assert step.error == "ValueError: no idea"
    assert "Traceback (most recent call last)" in step.traceback and 'raise ValueError("no idea")' in step.traceback


def test_agents_can_emit_events_into_the_run() -> None:
    def counting(task, context):
        context.emit("llm.call", model="fake", purpose="step", prompt_tokens=7, completion_tokens=3)
        return "ok"

    result = run("1. [counting] x\n2. [counting] y", agents={"counting": counting})
    calls = [e for e in result.events if e.kind == "llm.call"]
    assert [(e.step, e.data["model"]) for e in calls] == [("1", "fake"), ("2", "fake")]
    assert (result.usage.calls, result.usage.prompt_tokens, result.usage.completion_tokens) == (2, 14, 6)
    assert result.usage.total_tokens == 20


def test_tools_and_agents_mix_in_one_plan() -> None:
    lab = Lab()
    spec = "steps:\n  - {id: n, tool: add, args: {a: 2, b: 2}}\n  - {id: w, agent: writer, task: report, needs: [n]}\n"
    result = run(spec, tools=lab.tools, agents={"writer": lambda task, c: f"{task}: {c.needs['n']}"})
    assert result.outputs == {"n": 4, "w": "report: 4"}


def test_string_annotations_of_a_tool_defined_in_a_function() -> None:
    """This module uses ``from __future__ import annotations``: every annotation is a string."""
    from pydantic import BaseModel

    class Point(BaseModel):  # local: not findable by name later
        x: int

    def scale(p: Point, factor: int = 1) -> Point:
        """Scale a point."""
        return p

    with pytest.warns(UserWarning, match="tool 'scale': cannot resolve the type 'Point' of argument 'p'"):
        tool = Tool(scale)
    # the other arguments are still checked (before, one bad name lost every type and the
    # first validation raised pydantic's "not fully defined" error)
    assert tool.validate({"p": {"x": 1}, "factor": "2"}) == []
    assert tool.validate({"p": {"x": 1}, "factor": "many"})[0].startswith("argument 'factor' of tool 'scale' expects int")


def test_function_agent_with_an_optional_context_gets_it() -> None:
    from planbook import AgentContext, FunctionAgent, Step

    seen: list[object] = []

    def agent(task: str, context: AgentContext | None = None) -> str:
        seen.append(context)
        return task.upper()

    context = AgentContext(goal="g", plan_text="", step=Step(id="1", task="t", agent="a"))
    assert FunctionAgent(agent)("hello", context).answer == "HELLO"
    assert seen == [context]
