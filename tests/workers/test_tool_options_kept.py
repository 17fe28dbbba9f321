"""A function registered with ``@planbook.tool(...)`` and given again as ``tools=[fn]`` keeps its options.

``tools=[send]`` used to wrap the plain function anew, with the defaults: a tool declared
``idempotent=False`` became idempotent, so a resume or a fork ran it again without asking, and
one declared ``approve=True`` ran without waiting."""

from __future__ import annotations

import planbook
from planbook.workers.tools import as_toolbox


def test_a_registered_functions_options_survive_being_given_as_a_list() -> None:
    box = planbook.Toolbox()

    @box.tool(idempotent=False, approve=True, cache=False, version="7", description="Send it.")
    def send(x: int) -> int:
        return x

    again = as_toolbox([send])["send"]
    assert (again.idempotent, again.approve, again.cache, again.version, again.description) == (
        False, True, False, "7", "Send it.")
    renamed = as_toolbox({"mail": send})["mail"]
    assert renamed.name == "mail" and renamed.idempotent is False
    loosened = planbook.Toolbox()
    assert loosened.add(send, idempotent=True).idempotent is True  # an option given again wins


def test_a_fork_given_a_list_stops_before_running_a_non_idempotent_step_again(tmp_path) -> None:  # type: ignore[no-untyped-def]
    sent: list[int] = []

    @planbook.tool(idempotent=False)
    def send_once(x: int) -> int:
        sent.append(x)
        return x

    @planbook.tool
    def one(x: int) -> int:
        return x

    plan = planbook.Plan.model_validate({"id": "p", "steps": [{"id": "a", "tool": "one", "args": {"x": 1}},
                                                              {"id": "m", "tool": "send_once", "args": {"x": "$a"}}]})
    store = tmp_path / "runs.sqlite"
    parent = planbook.run(plan, tools=[one, send_once], store=store)
    try:
        planbook.fork(parent.run_id, at="a", args={"x": 2}, tools=[one, send_once], store=store)
    except planbook.ForkError as exc:
        assert "idempotent=False" in str(exc) and sent == [1]
    else:
        raise AssertionError("the fork ran a non-idempotent step again without asking")


def test_a_wrapper_of_a_registered_function_keeps_the_options_and_runs_its_own_code() -> None:
    import functools

    box = planbook.Toolbox()

    @box.tool(idempotent=False)
    def send(x: int) -> int:
        return x

    @functools.wraps(send)  # copies send's attributes, its registration among them
    def louder(x: int) -> int:
        return send(x) * 10

    again = planbook.Toolbox([louder])["send"]
    assert again.fn is louder and again.idempotent is False and again(x=2) == 20
