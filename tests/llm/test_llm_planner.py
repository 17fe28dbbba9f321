"""LLMPlanner against the scripted FakeOpenAIServer, through the real openai client.

Every kind of bad model output must end in a clear outcome, with no step of an invalid
plan executed and no secret written anywhere.
"""

from __future__ import annotations

import json

import pytest

import planbook
from planbook import PlanningError, ScriptedAgent, Toolbox
from planbook.llm import LLMPlanner, PlanProposal
from planbook.testing import FakeOpenAIServer, Reply

KEY = "sk-test-planner-0123456789-secret"


@pytest.fixture
def calls():
    return []


@pytest.fixture
def tools(calls):
    box = Toolbox()

    @box.tool
    def search(query: str, limit: int = 3) -> list[str]:
        """Search the paper index and return titles."""
        calls.append(("search", query))
        return [f"{query} paper {i}" for i in range(limit)]

    @box.tool
    def download(title: str) -> str:
        """Download a paper's PDF (the PDF server is down)."""
        calls.append(("download", title))
        raise ConnectionError("the PDF server is unreachable")

    @box.tool
    def abstract(title: str) -> str:
        """Fetch a paper's abstract."""
        calls.append(("abstract", title))
        return f"abstract of {title}"

    return box


def writer() -> ScriptedAgent:
    return ScriptedAgent("writer", default="a summary", description="writes short summaries")


def planner(server: FakeOpenAIServer, **kwargs) -> LLMPlanner:
    kwargs.setdefault("max_attempts", 2)
    return LLMPlanner("test-model", base_url=server.base_url, api_key=KEY, **kwargs)


GOOD = [
    {"id": "1", "task": "find papers", "tool": "search", "args": {"query": "CRISPR", "limit": 2}},
    {"id": "2", "task": "summarise", "agent": "writer", "needs": ["1"]},
]


def assert_no_secret(*things) -> None:
    for thing in things:
        assert KEY not in (thing if isinstance(thing, str) else json.dumps(thing, default=repr))


def llm_calls(result):
    return [e for e in result.events if e.kind == "llm.call"]


def test_a_valid_plan_runs_and_the_prompt_shows_tools_and_agents(server, tools, calls):
    server.add(Reply.plan(GOOD))
    result = planbook.run("summarise CRISPR papers", planner=planner(server), tools=tools, agents=[writer()])
    assert result.status == "completed", result.error
    assert calls == [("search", "CRISPR")]
    request = server.requests[0]
    assert request.tool_names == ["submit_plan"]
    assert request.headers["authorization"] == f"Bearer {KEY}"  # the key reaches the server, and only it
    text = request.text()
    for word in ("Goal: summarise CRISPR papers", "search: Search the paper index", '"limit"', "writer: writes short summaries",
                 "Do not ask for clarification"):
        assert word in text
    params = request.tools[0]["function"]["parameters"]
    assert params == {k: v for k, v in PlanProposal.model_json_schema().items() if k != "title"}
    (event,) = llm_calls(result)
    assert event.data["purpose"] == "plan" and event.data["attempt"] == 1 and event.data["model"] == "test-model"
    assert result.usage.calls == 1 and result.usage.prompt_tokens == event.data["prompt_tokens"] > 0
    assert_no_secret(str(result), [e.model_dump() for e in result.events])


def test_clarification_then_a_valid_plan_succeeds_and_the_retry_is_counted(server, tools, calls):
    server.add(Reply.text("Which papers do you mean? Could you clarify the topic?"), Reply.plan(GOOD))
    result = planbook.run("summarise CRISPR papers", planner=planner(server), tools=tools, agents=[writer()])
    assert result.status == "completed", result.error
    assert [e.data["attempt"] for e in llm_calls(result)] == [1, 2]
    feedback = server.requests[1].messages[-1]
    assert feedback["role"] == "user"
    assert "without calling submit_plan" in feedback["content"] and "Do not ask for clarification" in feedback["content"]
    assert server.requests[1].messages[-2]["content"].startswith("Which papers")  # the model sees its own answer


def bad(steps):
    return Reply.plan(steps)


BAD_ANSWERS = {
    "clarification": (Reply.text("Could you tell me more about what you need?"), "without calling submit_plan"),
    "malformed_json": (Reply.tool_call("submit_plan", '{"steps": [{"id": "1", "tool": "search"'), "not valid JSON"),
    "truncated": (Reply.tool_call("submit_plan", '{"steps": [', finish_reason="length"), "cut off"),
    "unknown_tool": (bad([{"id": "1", "tool": "serch", "args": {"query": "x"}}]), "unknown tool 'serch'; did you mean 'search'"),
    "unknown_agent": (bad([{"id": "1", "agent": "coder", "task": "code it"}]), "unknown agent 'coder'"),
    "duplicate_ids": (bad([{"id": "1", "tool": "search", "args": {"query": "a"}},
                           {"id": "1", "tool": "search", "args": {"query": "b"}}]), "duplicate step id '1'"),
    "missing_need": (bad([{"id": "1", "agent": "writer", "task": "t", "needs": ["7"]}]), "needs '7', but no step"),
    "cyclic_needs": (bad([{"id": "1", "agent": "writer", "task": "a", "needs": ["2"]},
                          {"id": "2", "agent": "writer", "task": "b", "needs": ["1"]}]), "dependency cycle"),
    "empty_plan": (bad([]), "the plan is empty"),
    "too_many_steps": (bad([{"id": str(i), "tool": "search", "args": {"query": "q"}} for i in range(4)]),
                       "at most 3 are allowed"),
    "wrong_arg_type": (bad([{"id": "1", "tool": "search", "args": {"query": "q", "limit": "many"}}]),
                       "argument 'limit' of tool 'search' expects int"),
    "other_function": (Reply.tool_call("search", {"query": "q"}), "there is no function 'search'"),
    "no_change_first": (Reply.no_change(), "no_change is only for replanning"),
}


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
def test_a_bad_answer_is_fed_back_then_the_run_fails_with_every_attempt(server, tools, calls, case):
    reply, problem = BAD_ANSWERS[case]
    server.add(reply, reply)
    plan_maker = planner(server, max_plan_steps=3)
    with pytest.raises(PlanningError) as caught:
        planbook.make_plan("summarise CRISPR papers", plan_maker, tools=tools, agents=[writer()])
    error = caught.value
    assert calls == []  # nothing of an invalid plan ran
    assert len(error.attempts) == 2 and all(problem in " ".join(a["problems"]) for a in error.attempts)
    assert "gave no valid plan in 2 attempt(s)" in str(error) and problem in str(error)
    feedback = server.requests[1].messages[-1]["content"]
    assert problem in feedback and "Do not ask for clarification" in feedback
    if reply.tool_calls:  # a rejected function call is answered as a tool result, as the API requires
        assert server.requests[1].messages[-1]["role"] == "tool"
    assert_no_secret(str(error), error.attempts)


def test_a_run_turns_the_planning_error_into_a_no_plan_result(server, tools, calls):
    reply = bad([{"id": "1", "tool": "nope"}])
    server.add(reply, reply)
    result = planbook.run("summarise CRISPR papers", planner=planner(server), tools=tools, agents=[writer()])
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert "unknown tool 'nope'" in result.error and calls == [] and result.executions == 0
    assert [e.data["attempt"] for e in llm_calls(result)] == [1, 2]


def test_no_default_plan_when_the_model_never_calls_the_tool(server, tools):
    server.add(*[Reply.text("I am not sure what to do.")] * 4)
    with pytest.raises(PlanningError) as caught:
        planner(server, max_attempts=4)("do something", [], None)
    assert len(caught.value.attempts) == 4 and [a["content"] for a in caught.value.attempts] == ["I am not sure what to do."] * 4


def test_a_fenced_json_plan_in_text_is_accepted_without_tool_calling(server, tools, calls):
    server.add(Reply.text("## Task 1: search\n\n```json\n" + json.dumps({"plan": GOOD}) + "\n```"))
    result = planbook.run("summarise CRISPR papers", planner=planner(server, tool_calling=False), tools=tools,
                          agents=[writer()])
    assert result.status == "completed", result.error
    assert server.requests[0].tools == []  # no tools were offered
    assert "```json" in server.requests[0].text()


@pytest.mark.parametrize("status", [500, 429])
def test_server_errors_twice_then_success_are_retried_by_the_sdk(server, tools, calls, status):
    server.add(Reply.http_error(status), Reply.http_error(status), Reply.plan(GOOD))
    result = planbook.run("summarise CRISPR papers", planner=planner(server), tools=tools, agents=[writer()])
    assert result.status == "completed", result.error
    assert len(server.requests) == 3
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1", "2"]
    assert len(llm_calls(result)) == 1  # one logical call; the SDK's retries are its own
    assert_no_secret(str(result), [e.model_dump() for e in result.events])


def test_a_401_is_one_clear_error_without_a_retry_storm(server, tools, calls):
    server.add(Reply.http_error(401, f"Incorrect API key provided: {KEY}"))
    result = planbook.run("summarise CRISPR papers", planner=planner(server), tools=tools, agents=[writer()])
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert len(server.requests) == 1
    assert "refused the API key (HTTP 401" in result.error and "OPENAI_API_KEY" in result.error
    (event,) = llm_calls(result)
    assert "401" in event.data["error"]
    assert_no_secret(result.error, [e.model_dump() for e in result.events])


def test_a_timeout_is_a_clear_error(server, tools, calls):
    server.add(Reply.slow(5))
    result = planbook.run("summarise CRISPR papers", planner=planner(server, timeout=0.3, max_retries=0), tools=tools,
                          agents=[writer()])
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert "did not answer within 0.3 s" in result.error and calls == []
    assert_no_secret(result.error, [e.model_dump() for e in result.events])


FAILING = [
    {"id": "1", "task": "find papers", "tool": "search", "args": {"query": "CRISPR", "limit": 2}},
    {"id": "2", "task": "get the PDF", "tool": "download", "args": {"title": "x" * 10}, "needs": ["1"]},
    {"id": "3", "task": "summarise", "agent": "writer", "needs": ["2"]},
]
WORKAROUND = [
    {"id": "2b", "task": "get the abstract instead", "tool": "abstract", "args": {"title": "x" * 10}, "needs": ["1"]},
    {"id": "3", "task": "summarise the abstract", "agent": "writer", "needs": ["2b"]},
]


def test_a_replan_after_a_failing_tool_shows_the_model_what_happened(server, tools, calls):
    server.add(Reply.plan(FAILING), Reply.plan(WORKAROUND))
    result = planbook.run("summarise CRISPR papers", planner=planner(server, result_limit=40), tools=tools,
                          agents=[writer()])
    assert result.status == "completed", result.error
    assert [s.id for s in result.plan.steps] == ["1", "2b", "3"] and result.replans == 1
    assert [c[0] for c in calls] == ["search", "download", "abstract"]
    text = server.requests[1].text()
    assert "Goal: summarise CRISPR papers" in text
    assert "step 1 (completed)" in text and "['CRISPR paper 0', 'CRISPR paper 1']" in text
    assert "step 2 (failed)" in text and "the PDF server is unreachable" in text
    assert "Last error: step 2 failed: ConnectionError" in text
    assert '"id": "3"' in text and "Done steps (kept as they are; do not repeat or rewrite them): 1" in text
    assert [e.data["purpose"] for e in llm_calls(result)] == ["plan", "replan"]


def test_results_in_a_replan_prompt_are_shortened(server, tools):
    server.add(Reply.plan([{"id": "1", "tool": "search", "args": {"query": "q" * 50, "limit": 30}},
                           {"id": "2", "tool": "download", "args": {"title": "t"}}]),
               Reply.plan([{"id": "2b", "tool": "abstract", "args": {"title": "t"}}]))
    result = planbook.run("g", planner=planner(server, result_limit=60), tools=tools)
    assert result.status == "completed", result.error
    line = next(line for line in server.requests[1].text().splitlines() if line.startswith("- step 1"))
    assert line.endswith("…") and "paper 29" not in line


def flaky_box() -> tuple[Toolbox, dict[str, int]]:
    """A toolbox whose ``flaky`` tool times out the first time it runs, then works; and its call count."""
    state = {"n": 0}
    box = Toolbox()

    @box.tool
    def flaky() -> str:
        """Fails the first time."""
        state["n"] += 1
        if state["n"] == 1:
            raise TimeoutError("slow today")
        return "ok"

    return box, state


def test_no_change_keeps_the_remaining_steps(server, tools):
    box, state = flaky_box()

    @box.tool
    def done() -> str:
        """Finish."""
        return "done"

    server.add(Reply.plan([{"id": "a", "tool": "flaky"}, {"id": "b", "tool": "done", "needs": ["a"]}]), Reply.no_change())
    result = planbook.run("g", planner=planner(server), tools=box)
    assert result.status == "completed", result.error
    assert [s.id for s in result.plan.steps] == ["a", "b"] and result.replans == 1 and state["n"] == 2


def test_a_replan_may_not_rewrite_a_done_step_and_repeats_are_dropped(server, tools, calls):
    rewrite = [{"id": "1", "task": "find other papers", "tool": "search", "args": {"query": "other"}}] + WORKAROUND
    repeat = [FAILING[0]] + WORKAROUND  # repeating step 1 unchanged is harmless: it is dropped
    server.add(Reply.plan(FAILING), Reply.plan(rewrite), Reply.plan(repeat))
    result = planbook.run("summarise CRISPR papers", planner=planner(server), tools=tools, agents=[writer()])
    assert result.status == "completed", result.error
    assert "would rewrite step '1'" in server.requests[2].messages[-1]["content"]
    assert [c for c in calls if c[0] == "search"] == [("search", "CRISPR")]  # step 1 ran once, unchanged
    assert result.plan.step("1").args == {"query": "CRISPR", "limit": 2}
    assert [e.data["attempt"] for e in llm_calls(result) if e.data["purpose"] == "replan"] == [1, 2]


def test_a_replan_may_not_grow_the_plan_beyond_max_plan_steps(server, tools, calls):
    grown = [{"id": f"x{i}", "tool": "abstract", "args": {"title": "t"}} for i in range(4)]
    server.add(Reply.plan(FAILING), Reply.plan(grown), Reply.plan(grown))
    result = planbook.run("g", planner=planner(server, max_plan_steps=3), tools=tools, agents=[writer()])
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert "at most 3 are allowed" in result.error
    assert [c[0] for c in calls] == ["search", "download"]


def test_plain_use_without_a_runner_plans_with_the_default_toolbox(server):
    planbook.tool(name="zz_llm_test_tool")(lambda text: text)
    try:
        server.add(Reply.plan([{"id": "1", "tool": "zz_llm_test_tool", "args": {"text": "hi"}}]))
        steps = planner(server)("echo hi", [], None)
        assert [(s.id, s.tool, s.args) for s in steps] == [("1", "zz_llm_test_tool", {"text": "hi"})]
        assert "zz_llm_test_tool" in server.requests[0].text() and "Agents: (none)" in server.requests[0].text()
    finally:
        planbook.default_toolbox.remove("zz_llm_test_tool")


def test_temperature_and_system_prompt_are_sent(server, tools):
    server.add(Reply.plan(GOOD))
    p = planner(server, temperature=0.0, system_prompt="You plan.")
    p.set_context(planbook.PlanningContext(tools=tools, agents={"writer": writer()}, plan=None))
    p("g", [], None)
    body = server.requests[0].body
    assert body["temperature"] == 0.0 and body["messages"][0] == {"role": "system", "content": "You plan."}
    assert p.usage.calls == 1 and p.calls[0]["purpose"] == "plan"


def test_a_server_error_that_persists_names_the_status_and_the_retries(server, tools, calls):
    server.add(*[Reply.http_error(503, "overloaded")] * 3)
    with pytest.raises(PlanningError, match=r"HTTP 503 \(overloaded\) after 2 retries"):
        planner(server)("g", [], None)
    assert len(server.requests) == 3


def fenced(data) -> Reply:
    return Reply.text("Here is the plan.\n\n```json\n" + json.dumps(data) + "\n```")


def test_without_tool_calling_every_prompt_asks_for_a_json_block(server, tools, calls):
    """No prompt may ask a model without functions to call submit_plan."""
    server.add(Reply.text("Which papers do you mean?"), fenced({"steps": FAILING}), fenced({"steps": WORKAROUND}))
    result = planbook.run("summarise CRISPR papers", planner=planner(server, tool_calling=False), tools=tools,
                          agents=[writer()])
    assert result.status == "completed", result.error
    assert [e.data["purpose"] for e in llm_calls(result)] == ["plan", "plan", "replan"]
    for request in server.requests:
        assert request.tools == [] and "submit_plan" not in request.text() and "```json" in request.text()
    feedback = server.requests[1].messages[-1]
    assert feedback["role"] == "user" and "without a ```json block" in feedback["content"]
    assert "answer again with the whole plan in one ```json block" in feedback["content"]
    assert '{"no_change": true, "steps": []}' in server.requests[2].text()


def test_without_tool_calling_no_change_is_read_from_the_json_block(server):
    box, state = flaky_box()

    server.add(fenced({"steps": [{"id": "a", "tool": "flaky"}]}), fenced({"no_change": True, "steps": []}))
    result = planbook.run("g", planner=planner(server, tool_calling=False), tools=box)
    assert result.status == "completed", result.error
    assert result.replans == 1 and state["n"] == 2


@pytest.mark.parametrize("status, words", [
    (404, "the model 'test-model' or the endpoint does not exist at that server"),
    (400, "the server rejected the request"),
])
def test_a_wrong_model_or_url_says_what_to_check(server, tools, status, words):
    server.add(Reply.http_error(status, "The model `test-model` does not exist"))
    result = planbook.run("summarise CRISPR papers", planner=planner(server), tools=tools, agents=[writer()])
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert len(server.requests) == 1  # not retried
    assert f"HTTP {status} (The model `test-model` does not exist)" in result.error and words in result.error
    for check in ("PLANBOOK_MODEL", "model=", "OPENAI_BASE_URL"):
        assert check in result.error
