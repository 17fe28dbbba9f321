"""Model calls and prompt tokens: replan on failure (planbook) vs replan after every step.

AgenticSeek's planner asks the model to update the plan after *every* step (answering
NO_UPDATE when all is well); planbook asks only when a step fails. On scripted scenarios
(N linear steps, k of which fail once and are replaced by a workaround), the same
:class:`planbook.LLMPlanner` talks through the real ``openai`` SDK to the scripted
:class:`planbook.testing.FakeOpenAIServer`, whose token usage is a deterministic
estimate (about four characters a token of the request). The "every step" mode is a
driver in this file (the engine has no such mode): after each completed step it asks
the planner exactly what the runner asks on a replan, and checks the model's answer
is "no change" (it does not ask after the last step, which AgenticSeek does: that
favours the every-step mode by one call). Both modes must finish with the same outputs.

Run: python benchmarks/llm_calls.py [--quick]

``--quick``: tiny sizes, one repeat (what the tests run to check the script still works;
its figures mean nothing).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable

from planbook import PlanningContext, Runner, Status, Toolbox
from planbook.llm import LLMPlanner
from planbook.spec.acceptance import accept_steps
from planbook.testing import FakeOpenAIServer, FakeRequest, Reply
from planbook.testing.helpers import model_env_removed

SCENARIOS = [(n, k) for n in (5, 10, 20) for k in (0, 1, 2)]


def scenario_tools(failing: set[str]) -> Toolbox:
    box = Toolbox()

    @box.tool
    def work(name: str, note: str = "") -> str:
        """Do one piece of work and report it."""
        if name in failing:
            raise RuntimeError(f"{name} cannot be done this way")
        return f"{name} done: " + "result text " * 8

    return box


def fake_model(n: int) -> Callable[[FakeRequest], Reply]:
    """The scripted model: a first plan of n steps, a workaround per failure, else no change."""

    def answer(request: FakeRequest) -> Reply:
        prompt = request.messages[1]["content"]
        if "Executed so far" not in prompt:
            return Reply.plan([
                {"id": f"s{i}", "task": f"part {i}", "tool": "work", "args": {"name": f"s{i}"},
                 "needs": [f"s{i - 1}"] if i > 1 else []}
                for i in range(1, n + 1)
            ])
        failed = re.search(r"Last error: step (\S+) failed", prompt)
        if failed is None:
            return Reply.no_change()
        bad = failed.group(1)
        remaining = json.loads(prompt.split("Remaining plan:\n", 1)[1].split("\n", 1)[0])
        fix = {"id": f"{bad}b", "task": f"{bad} another way", "tool": "work", "args": {"name": f"{bad}-alt"}}
        old = next(s for s in remaining if s["id"] == bad)
        fix["needs"] = old.get("needs", [])
        rest = []
        for step in remaining:
            if step["id"] == bad:
                continue
            step = dict(step)
            step["needs"] = [fix["id"] if need == bad else need for need in step.get("needs", [])]
            rest.append(step)
        return Reply.plan([fix] + rest)

    return answer


def ask_after_step(runner: Runner, planner: LLMPlanner) -> None:
    """The AgenticSeek update after a completed step: the runner's replan question, asked anyway."""
    kept = [st for st in runner.plan.steps if st.status in (Status.completed, Status.skipped)]
    planner.set_context(PlanningContext(
        tools=runner.tools, agents=runner.agents, plan=runner.plan.copy_plan(), kept_ids=[st.id for st in kept],
        validate=lambda steps: accept_steps(runner.plan, kept, list(steps), runner.tools, runner.agents)[2],
        emit=lambda kind, **data: runner.emit(kind, **data),
    ))
    proposed = planner(runner.plan.goal, list(runner.state.history), None)
    remaining = [st.signature() + (st.id,) for st in runner.plan.steps if st.status is Status.not_started]
    if [st.signature() + (st.id,) for st in proposed] != remaining:  # the scripted model never changes a good plan
        raise AssertionError("the every-step update changed the plan; this benchmark does not script that")


def run_mode(server: FakeOpenAIServer, n: int, k: int, every_step: bool) -> tuple[int, int, dict]:
    failing = {f"s{i}" for i in range(2, 2 + k * 3, 3)}  # s2, s5: spread out
    server.reset([fake_model(n)] * (4 * n + 10))
    planner = LLMPlanner("bench-model", base_url=server.base_url, api_key="bench-key", max_attempts=1)
    runner = Runner(f"finish {n} parts", planner=planner, tools=scenario_tools(failing),
                    max_steps=n + k + 1, max_replans=k + 1)
    while not runner.finished:
        step = runner.advance()
        pending = any(st.status is Status.not_started for st in runner.plan.steps)
        if every_step and step is not None and step.status is Status.completed and pending:
            ask_after_step(runner, planner)
    result = runner.result()
    if result.status != "completed":
        raise AssertionError(f"N={n} k={k} every_step={every_step}: {result.error}")
    return result.usage.calls, result.usage.prompt_tokens, result.outputs


def main() -> None:
    rows = []
    scenarios = [(3, 0), (3, 1)] if "--quick" in sys.argv[1:] else SCENARIOS
    with model_env_removed(), FakeOpenAIServer(strict=False) as server:
        for n, k in scenarios:
            calls_f, tokens_f, out_f = run_mode(server, n, k, every_step=False)
            calls_e, tokens_e, out_e = run_mode(server, n, k, every_step=True)
            assert out_f == out_e, "both modes must reach the same results"
            rows.append((n, k, calls_f, tokens_f, calls_e, tokens_e))
    head = f"{'N':>3} {'k':>2} | {'on failure: calls':>17} {'prompt tok':>10} | {'every step: calls':>17} {'prompt tok':>10} | {'calls x':>7} {'tokens x':>8}"
    print("Model calls and prompt tokens (scripted fake model; tokens = request chars / 4)")
    print(head)
    print("-" * len(head))
    for n, k, cf, tf, ce, te in rows:
        print(f"{n:>3} {k:>2} | {cf:>17} {tf:>10} | {ce:>17} {te:>10} | {ce / cf:>7.1f} {te / tf:>8.1f}")
    total_f = sum(r[3] for r in rows)
    total_e = sum(r[5] for r in rows)
    print(f"all {len(rows)} scenarios: replanning after every step sends {total_e / total_f:.1f}x the prompt tokens")


if __name__ == "__main__":
    sys.exit(main())
