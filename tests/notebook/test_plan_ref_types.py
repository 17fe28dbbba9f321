"""``%%plan`` refuses a reference whose type cannot fit its argument, in the cell, before a run."""

from __future__ import annotations

from typing import Any

from planbook import CellPlanError, Toolbox


def test_plan_cell_refuses_text_for_a_list_argument(ip: Any) -> None:
    box = Toolbox()

    @box.tool
    def search(q: str) -> str:
        """A text."""
        return q

    @box.tool
    def fetch(urls: list[str]) -> str:
        """Fetch each url."""
        return ",".join(urls)

    ip.user_ns["reftools"] = box
    body = ("steps:\n  - {id: a, tool: search, args: {q: x}}\n  - {id: b, tool: search, args: {q: y}}\n"
            "  - {id: c, tool: search, args: {q: z}}\n  - id: f\n    tool: fetch\n    args:\n"
            '      urls: "${a}${b}${c}"\n')
    result = ip.run_cell(f"%%plan joined --tools reftools\n{body}")
    err = result.error_in_exec
    assert isinstance(err, CellPlanError), err  # before: the plan was stored, and failed after a, b and c ran
    (problem,) = err.problems
    assert (problem.step, problem.code, problem.line) == ("f", "ref_type", 9)  # the cell's line of 'urls:'
    shown = "\n".join(err._render_traceback_())
    assert "expects list[str]" in shown and "write the list [$a, $b, $c]" in shown
    assert '  9 |       urls: "${a}${b}${c}"' in shown
    assert "joined" not in ip.user_ns
