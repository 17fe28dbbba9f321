"""A fork whose planner is a model replays from a cassette in a new session.

A fork re-planned by a model (``planbook.fork(run, at=STEP, planner=LLMPlanner(...))``) sends the
model a request; a cassette matches a replayed request to a recorded one exactly. The request held
the parent's run id (random, new for every run), so a cassette recorded for a fork never replayed
for the same fork of a fresh run of the same plan: chapter 9 of the course (a new store every time
it runs) could not show a model swap offline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import planbook
from planbook.llm import Cassette
from planbook.testing import FakeOpenAIServer, Reply
from planbook.testing.helpers import model_env_removed

SPEC = """
goal: Two numbers and their sum
steps:
  - {id: a, tool: number, args: {n: 1}}
  - {id: b, tool: number, args: {n: 2}}
  - {id: total, tool: add, args: {x: $a, y: $b}}
"""
ANSWER = [{"id": "b2", "tool": "number", "args": {"n": 20}},
          {"id": "total", "tool": "add", "args": {"x": "$a", "y": "$b2"}, "needs": ["a", "b2"]}]


def _tools() -> planbook.Toolbox:
    tools = planbook.Toolbox()

    @tools.tool
    def number(n: int) -> int:
        "A number."
        return n

    @tools.tool
    def add(x: int, y: int) -> int:
        "Their sum."
        return x + y

    return tools


def _fork(store: Path, cassette: Cassette) -> planbook.RunResult:
    tools = _tools()
    parent = planbook.run(SPEC, tools=tools, store=store)
    planner = planbook.LLMPlanner("gpt-4o", cassette=cassette)
    return planbook.fork(parent, at="b", planner=planner, tools=tools, store=store)


def test_a_fork_replanned_by_a_model_replays_its_cassette_for_a_fresh_parent_run(tmp_path: Path) -> None:
    recorded = tmp_path / "fork.json"
    with model_env_removed(), FakeOpenAIServer([Reply.plan(ANSWER)]) as server:
        os.environ["OPENAI_BASE_URL"] = server.base_url
        os.environ["OPENAI_API_KEY"] = "test-key"
        try:
            first = _fork(tmp_path / "first.sqlite", Cassette(recorded, mode="record"))
        finally:
            del os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
    assert first.outputs["total"] == 21 and first.usage.calls == 1
    with model_env_removed():  # no key, no server: only the cassette can answer
        again = _fork(tmp_path / "second.sqlite", Cassette(recorded, mode="replay"))
    assert again.parent != first.parent  # another parent run, the same fork
    assert again.outputs["total"] == 21 and again.usage == first.usage
    assert first.parent not in recorded.read_text(encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
