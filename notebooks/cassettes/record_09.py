"""Re-record ``09-what-if.json`` from the scripted fake server, then re-execute the notebook.

The cassette of chapter 9 is *not* from a real model: its one answer is written by hand (the
planner, asked to plan again from step ``draft`` of a fork, replaces it with a friendlier note,
a new step ``friendly``, and points ``review`` at it). It is served by
``planbook.testing.FakeOpenAIServer`` through the real ``openai`` SDK while the notebook runs
with ``PLANBOOK_CASSETTE_MODE=record``; then the notebook runs again, replaying the new
cassette, and is saved with its outputs (no widget state, no cell timings).

Run from the repository root: python notebooks/cassettes/record_09.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from planbook.testing import MODEL_ENV, FakeOpenAIServer, Reply

HERE = Path(__file__).resolve().parent
NOTEBOOK = HERE.parent / "09-what-if.ipynb"
CASSETTE = HERE / "09-what-if.json"

SCRIPT = [
    Reply.plan([  # the fork at draft, planned again: a friendlier note as a new step
        {"id": "friendly", "task": "Write the note in a friendly tone", "tool": "write",
         "args": {"bees": "$bees_sum", "wasps": "$wasps_sum", "tone": "friendly"}, "needs": ["bees_sum", "wasps_sum"]},
        {"id": "review", "task": "Review the note", "tool": "review", "args": {"text": "$friendly"},
         "needs": ["friendly"]},
    ]),
]


def execute(env: dict[str, str]) -> None:
    jupyter = Path(sys.executable).with_name("jupyter")
    subprocess.run([str(jupyter), "nbconvert", "--to", "notebook", "--execute", "--inplace",
                    "--ExecutePreprocessor.record_timing=False", "--ExecutePreprocessor.store_widget_state=False",
                    str(NOTEBOOK)],
                   check=True, env=env, cwd=NOTEBOOK.parent)


def tidy() -> None:
    """What nbconvert leaves that the repository does not keep: widget state, cell timings."""
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    nb["metadata"].pop("widgets", None)
    for cell in nb["cells"]:
        cell.get("metadata", {}).pop("execution", None)
    NOTEBOOK.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    clean = {k: v for k, v in os.environ.items() if k not in MODEL_ENV}  # no real model, account or mode
    with FakeOpenAIServer(SCRIPT) as server:
        execute({**clean, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "recording-placeholder-key",
                 "PLANBOOK_CASSETTE_MODE": "record"})
        if server.remaining:
            raise SystemExit(f"the notebook used {len(SCRIPT) - server.remaining} of {len(SCRIPT)} scripted answers")
    execute(clean)  # replay: the saved outputs are the offline ones
    tidy()
    print(f"recorded {CASSETTE.name} and re-executed {NOTEBOOK.name} from it")


if __name__ == "__main__":
    main()
