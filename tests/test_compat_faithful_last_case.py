"""The last differences between ``faithful=True`` and the upstream code (issue "Faithful to the
last case"): where upstream raises, the run ends there, once, saying "upstream raises here";
an OpenManus agent gets upstream's step prompt; ``execute()`` returns upstream's texts.

Every expected value is what the upstream code (OpenManus ``52a13f2a57d8``, AgenticSeek
``ae57a2357745``) returned or raised for the same input, run outside this repository with its
imports stubbed; the counts are the questions it asked and the tasks it ran.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from planbook import AgentReply, PlanError, run
from planbook.compat.agenticseek import parse_answer, task_names
from planbook.compat.model import ScriptedModel
from planbook.compat.upstream import UpstreamCrash

#: Python 3.11 added the index type to this message; upstream's text is the interpreter's
STRING_INDICES = "string indices must be integers" + ("" if sys.version_info < (3, 11) else ", not 'str'")


def block(obj: object) -> str:
    return "```json\n" + json.dumps(obj) + "\n```"


def task(agent: object, id: object, text: object, **more: object) -> dict:
    return {"agent": agent, "id": id, "task": text, **more}


# ------------------------------------------------------------ AgenticSeek: reading answers
# (the answer's plan, the exception upstream's parse_agent_tasks raised)
UPSTREAM_PARSE_CRASHES = [
    ({"plan": [task(1, "1", "a")]}, "AttributeError", "'int' object has no attribute 'lower'"),  # row 2
    ({"plan": [{"id": "1", "task": "a"}]}, "KeyError", "'agent'"),  # row 2
    ({"plan": "search, then code"}, "TypeError", STRING_INDICES),  # row 3
    (42, "TypeError", "argument of type 'int' is not iterable"),  # row 3
    ({"plan": None}, "TypeError", "'NoneType' object is not iterable"),  # row 3
    ({"plan": 5}, "TypeError", "'int' object is not iterable"),
    ({"plan": {"a": 1}}, "TypeError", STRING_INDICES),
    (["plan"], "TypeError", "list indices must be integers or slices, not str"),
    ("my plan", "TypeError", STRING_INDICES),
    (None, "TypeError", "argument of type 'NoneType' is not iterable"),
    ({"plan": [None]}, "TypeError", "'NoneType' object is not subscriptable"),
    ({"plan": [[1]]}, "TypeError", "list indices must be integers or slices, not str"),
    ({"plan": [7]}, "TypeError", "'int' object is not subscriptable"),
]


@pytest.mark.parametrize(("plan", "kind", "message"), UPSTREAM_PARSE_CRASHES)
def test_faithful_parse_raises_where_upstream_raises(plan: object, kind: str, message: str) -> None:
    with pytest.raises(UpstreamCrash) as raised:
        parse_answer(block(plan), faithful=True)
    assert (type(raised.value.upstream).__name__, str(raised.value.upstream)) == (kind, message)
    assert str(raised.value).startswith(f"upstream raises here: {kind}: {message}")
    with pytest.raises(PlanError):  # the default refuses it, naming the problem, and asks again
        parse_answer(block(plan))


def test_faithful_parse_stops_at_the_first_refusal_as_upstream() -> None:
    # upstream returned [] (refused, asked again): the unknown agent comes before the crash
    with pytest.raises(PlanError, match="Agent Painter does not exist."):
        parse_answer(block({"plan": [task("Painter", "1", "a"), {"id": "2", "task": "b"}]}), faithful=True)
    with pytest.raises(PlanError, match='no "plan" list'):  # upstream: {"plan": {}} has no task, []
        parse_answer(block({"plan": {}}), faithful=True)


def test_faithful_headlines_break_at_newlines_only() -> None:
    text = "## Task 1: a\u2028## Task 2: b"
    assert task_names(text, faithful=True) == ["## Task 1: a\u2028## Task 2: b"]  # upstream's get_task_names
    assert task_names(text) == ["## Task 1: a", "## Task 2: b"]  # planbook: every line break (README table)


# ------------------------------------------------------------ AgenticSeek: running
class Recorder:
    def __init__(self, name: str) -> None:
        self.name, self.description = name, f"the {name} agent"
        self.prompts: list[str] = []

    def __call__(self, task: str, context: Any) -> AgentReply:
        self.prompts.append(task)
        return AgentReply(answer=f"answer {len(self.prompts)}")


def seek(replies: list[str], *, faithful: bool = True) -> tuple[Any, int, int, Recorder]:
    """The run, the questions asked, the tasks run, and the web agent."""
    agents = {"web": Recorder("web"), "coder": Recorder("coder")}
    model = ScriptedModel(replies)
    result = run("goal", agents=agents, planner=model, strategy="agenticseek", faithful=faithful)
    return result, len(model.requests), sum(len(a.prompts) for a in agents.values()), agents["web"]


# (the answers, upstream's exception, the questions it asked, the tasks it ran)
UPSTREAM_RUN_CRASHES = [
    pytest.param([block({"plan": [{"id": "1", "task": "a"}]})], "KeyError: 'agent'", 1, 0, id="row4-first-answer"),
    pytest.param([block({"plan": [task("web", "1", "a"), task("web", "2", "b")]}),
                  block({"plan": [task("web", "1", "a"), {"id": "2", "task": "b"}]})],
                 "KeyError: 'agent'", 2, 1, id="row5-review-answer"),
    pytest.param([block({"plan": "first search, then code"})], f"TypeError: {STRING_INDICES}", 1, 0, id="row6"),
    pytest.param([block({"plan": [task("web", "1", "a"), task("web", "2", 42)]}), "NO_UPDATE"],
                 "AttributeError: 'int' object has no attribute 'lower'", 2, 1, id="row7-title-42"),
    pytest.param([block({"plan": [task("web", "1", 42), task("web", "2", "b")]})],
                 "AttributeError: 'int' object has no attribute 'lower'", 1, 0, id="row7-first-title-42"),
    pytest.param([block({"plan": [task("web", [1], "a"), task("web", "2", "b")]}), "NO_UPDATE"],
                 "TypeError: unhashable type: 'list'", 1, 1, id="row8-list-id"),
    pytest.param([block({"plan": [task("web", "1", "a", need=None)]})],
                 "TypeError: 'NoneType' object is not iterable", 1, 0, id="need-null-first"),
]


@pytest.mark.parametrize(("replies", "raised", "questions", "tasks"), UPSTREAM_RUN_CRASHES)
def test_a_faithful_run_ends_where_upstream_raises(replies: list[str], raised: str, questions: int, tasks: int) -> None:
    result, asked, ran, _ = seek(replies + ["NO_UPDATE"] * 6)
    assert (result.status, asked, ran) == ("failed", questions, tasks)
    assert f"upstream raises here: {raised}" in result.error


def test_the_default_mode_asks_again_or_runs_on() -> None:
    result, asked, _, _ = seek([block({"plan": [{"id": "1", "task": "a"}]})] * 4, faithful=False)
    assert (result.reason, asked) == ("no_plan", 4)
    result, asked, ran, _ = seek([block({"plan": [task("web", "1", "a"), task("web", "2", 42)]}), "NO_UPDATE", "NO_UPDATE"],
                                 faithful=False)
    assert result.ok and ran == 2


def test_a_task_that_is_not_text_runs_when_headlines_give_the_titles() -> None:
    answer = "## Task 1: a\n## Task 2: b\n" + block({"plan": [task("web", "1", "a"), task("web", "2", 42)]})
    result, asked, ran, web = seek([answer, "NO_UPDATE", "NO_UPDATE"])
    assert (result.status, asked, ran) == ("completed", 3, 2)  # upstream: returned after 3 questions, 2 tasks
    assert web.prompts[1].endswith("Your task is:\n42")
