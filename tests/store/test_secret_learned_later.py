"""A secret a run learns after it began (a step's result that a later step passes as a token)
is masked in everything the store keeps of the run once it is learned: the run's goal and plan
header, written when the run was created, are written again. Before, the goal kept the token whole
in the file, and ``planbook runs`` cut that goal to its column before masking, so the listing
showed the token's first characters (no exit can tell half a secret)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import planbook
from planbook import Toolbox

#: one token per test: a secret the process learned in an earlier test is known from the start
TOKENS = {"store": "tokcanary-QWERTYUI-918273645", "listing": "tokcanary-ZXCVBNMP-564738291"}


def _fragments(text: str, token: str) -> list[str]:
    """Every 8-character piece of ``token`` found in ``text``."""
    return sorted({token[i:i + 8] for i in range(len(token) - 7) if token[i:i + 8] in text})


def _run(store: Path, token: str) -> None:
    box = Toolbox()

    @box.tool
    def login(user: str) -> str:
        """Signs in: returns the session token."""
        return token

    @box.tool
    def fetch(token: str) -> str:
        """Reads with the token."""
        return "ok"

    # the goal names the token before the run knows it is one: a long goal, so the listing cuts it
    spec = (f"goal: fetch the report for {'x' * 10} with {token} today\nsteps:\n"
            "  - {id: login, tool: login, args: {user: bob}}\n"
            "  - {id: fetch, tool: fetch, args: {token: $login}}\n")
    result = planbook.run(spec, tools=box, store=str(store))
    assert result.status == "completed"


def test_the_store_masks_a_goal_naming_a_secret_learned_later(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    _run(store, TOKENS["store"])
    kept = b"".join(p.read_bytes() for p in sorted(tmp_path.iterdir()) if p.name.startswith("runs.sqlite"))
    assert _fragments(kept.decode("utf-8", "replace"), TOKENS["store"]) == []
    assert "***" in planbook.load_run(store=str(store)).plan.goal


def test_the_run_list_shows_no_piece_of_it_in_another_process(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    _run(store, TOKENS["listing"])
    listing = subprocess.run([sys.executable, "-m", "planbook.cli", "runs", "--store", str(store)],
                             capture_output=True, text=True, check=True).stdout
    assert "fetch the report" in listing
    assert _fragments(listing, TOKENS["listing"]) == []


def test_the_run_list_masks_a_goal_whole_before_cutting_it() -> None:
    from planbook.outbound import remember
    from planbook.views.runlist import GOAL_WIDTH, goal_text

    secret = "cutcanary-ASDFGHJK-5647382910"
    remember([secret])
    goal = "y" * (GOAL_WIDTH - 12) + " " + secret

    class Summary:
        pass

    summary = Summary()
    summary.goal = goal  # type: ignore[attr-defined]
    shown = goal_text(summary)  # type: ignore[arg-type]
    assert "***" in shown
    assert not any(secret[i:i + 6] in shown for i in range(len(secret) - 5))
