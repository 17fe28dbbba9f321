"""The model never sees a secret, and a replanned step keeps the secrets it keeps.

A replan's prompt ("remaining plan", "executed so far", the goal, the last error) shows a
``$id`` reference and a :class:`planbook.Secret`'s ``{"$secret": ...}`` as written, and
``***`` for a secret-named literal and for the result of a step that holds a secret. The
runner puts the real value back into a step the model proposes under the same id that keeps
the reference or the ``***``. Every planner is shown the run that way (a Python planner too),
so a replanned task cannot quote a secret it was never shown.

Each test uses secrets of its own: the process's vault keeps what earlier tests learned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Plan, Secret, Step, Toolbox
from planbook.llm import Cassette, LLMPlanner, prompts
from planbook.outbound.redact import echo_forms
from planbook.testing import Reply

KEY = "sk-test-prompt-secrets-424242"


def _leaks(text: str, *secrets: str) -> list[str]:
    """Every form, or 8-character fragment, of ``secrets`` found in ``text``."""
    fragments = {s[i:i + 8] for s in secrets for i in range(len(s) - 7)}
    return sorted({f for s in secrets for f in echo_forms(s) | fragments if f in text})


def _box(token: str, received: list[tuple[str, ...]]) -> Toolbox:
    box = Toolbox()

    @box.tool(cache=False)
    def login(user: str) -> str:
        """Log in; returns a session token."""
        return token

    @box.tool(cache=False)
    def deploy(env: str, password: str, token: str, api_key: str) -> str:
        """Deploy to an environment (staging is down)."""
        if env == "staging":
            raise ConnectionError("staging is down")
        received.append((env, password, token, api_key))
        return "deployed"

    return box


def test_a_replan_prompt_shows_references_and_stars_and_the_runner_puts_the_values_back(
        server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    password, token, key = "Prompt-pw-route21-abcdef", "Prompt-tok-route21-uvwxyz", "Prompt-env-key-route21-999"
    monkeypatch.setenv("ROUTE21_KEY", key)
    received: list[tuple[str, ...]] = []
    first = [
        {"id": "login", "tool": "login", "args": {"user": "ada"}},
        {"id": "deploy", "tool": "deploy", "needs": ["login"], "args": {
            "env": "staging", "password": password, "token": "$login", "api_key": {"$secret": "env:ROUTE21_KEY"}}},
    ]
    # the model keeps the step's id, the reference, the secret's reference and the *** it was shown
    again = [{"id": "deploy", "tool": "deploy", "needs": ["login"], "args": {
        "env": "prod", "password": "***", "token": "$login", "api_key": {"$secret": "env:ROUTE21_KEY"}}}]
    server.add(Reply.plan(first), Reply.plan(again))
    cassette = tmp_path / "cassette.json"
    planner = LLMPlanner("test-model", base_url=server.base_url, api_key=KEY, max_attempts=1,
                         cassette=Cassette(cassette, mode="record"))
    result = planbook.run("deploy the service", planner=planner, tools=_box(token, received), on_failure="replan")
    assert result.status == "completed", result.error
    assert received == [("prod", password, token, key)]  # the real values, put back at the call

    prompt = server.requests[1].text()
    assert '"token": "$login"' in prompt and '"password": "***"' in prompt
    assert '{"$secret": "env:ROUTE21_KEY"}' in prompt
    assert "step login (completed) login(user='ada') → result: ***" in prompt
    seen = prompt + "".join(r.text() for r in server.requests) + cassette.read_text()
    assert not _leaks(seen, password, token, key)
    revisions = "".join(f"{r!s}{r!r}{r.model_dump()!r}" for r in result.revisions)
    assert not _leaks(revisions, password, token, key)


def test_a_python_planner_is_shown_the_run_as_a_model_is() -> None:
    token, password = "Py-tok-route22-qwerty12", "Py-pw-route22-asdfgh34"
    seen: list[str] = []
    received: list[tuple[str, ...]] = []

    def planner(goal: str, history: list[Step], last_error: str | None) -> list[Step]:
        if not history:
            return [Step(id="login", tool="login", args={"user": "ada"}),
                    Step(id="deploy", tool="deploy", args={"env": "staging", "password": password, "token": "$login",
                                                           "api_key": "k-route22-abcdefgh"})]
        seen.append(repr([(s.id, s.args, s.result) for s in history]) + goal + (last_error or ""))
        done = next(s for s in history if s.id == "login")
        # a careless planner quotes what it was shown of the token in a task, and keeps the step it saw
        failed = next(s for s in history if s.id == "deploy")
        return [Step(id="deploy", task=f"deploy again with {done.result}", tool="deploy",
                     args=dict(failed.args, env="prod"))]

    result = planbook.run(f"deploy with {password}", planner=planner, tools=_box(token, received),
                          on_failure="replan")
    assert result.status == "completed", result.error
    assert received == [("prod", password, token, "k-route22-abcdefgh")]
    assert seen and "'password': '***'" in seen[0] and "'api_key': '***'" in seen[0] and "'$login'" in seen[0]
    assert not _leaks(seen[0], token, password, "k-route22-abcdefgh")
    revisions = "".join(f"{r!s}{r!r}{r.model_dump()!r}" for r in result.revisions)
    assert "deploy again with ***" in revisions and not _leaks(revisions, token, password)


def test_a_kept_text_whose_stars_no_longer_match_is_refused_with_a_reason() -> None:
    def planner(goal: str, history: list[Step], last_error: str | None) -> list[Step]:
        if not history:
            return [Step(id="get", tool="get", args={"url": "https://bob:Url-pw-route23-zz@db.example/a"})]
        return [Step(id="get", tool="get", args={"url": "https://***@***/b"})]

    box = Toolbox()

    @box.tool(cache=False)
    def get(url: str) -> str:
        raise ConnectionError("no route")

    result = planbook.run("get it", planner=planner, tools=box, on_failure="replan")
    assert result.status == "failed"
    rejected = [r.rejected for r in result.revisions if r.rejected]
    assert rejected and "step 'get': argument 'url' hid 1 part(s) as *** and the edit shows 2" in rejected[-1]
    assert "Url-pw-route23-zz" not in repr(result.revisions)


def test_the_prompt_functions_mask_what_they_are_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planner called on its own (no run to mask its history) shows no secret either."""
    from planbook.outbound import remember

    remember(["Known-result-route24-xyz"])
    step = Step(id="d", tool="deploy", task="deploy", args={
        "password": "Literal-route24-pw", "token": "$login", "api_key": Secret.env("ROUTE24_KEY"),
        "headers": {"Authorization": "Bearer Hdr-route24-abcdef", "Accept": "json"}})
    done = Step(id="login", tool="login", args={"user": "ada"})
    done.set_state(status="completed", result="Known-result-route24-xyz")
    text = prompts.replan_request("g", {}, {}, history=[done], last_error="failed: Known-result-route24-xyz",
                                  plan=Plan(steps=[done, step]), kept_ids=["login"], max_steps=5)
    remaining = json.loads(text.split("Remaining plan:\n", 1)[1].split("\n\n", 1)[0])
    assert remaining[0]["args"] == {"password": "***", "token": "$login", "api_key": {"$secret": "env:ROUTE24_KEY"},
                                    "headers": {"Authorization": "***", "Accept": "json"}}
    assert not _leaks(text, "Known-result-route24-xyz", "Literal-route24-pw", "Hdr-route24-abcdef")
