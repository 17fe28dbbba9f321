"""Re-record ``04-llm-planner.json`` from the scripted fake server, then re-execute the notebook.

The cassette of chapter 4 is *not* from a real model: the answers below are written by
hand (a first plan with a typo in a tool name, the corrected plan, a workaround after a
failing tool, an agent that counts words and finishes, and a model that only asks
questions). They are served by ``planbook.testing.FakeOpenAIServer`` through the real
``openai`` SDK while the notebook runs with ``PLANBOOK_CASSETTE_MODE=record`` (recording is
always asked for: a cassette that exists is otherwise replayed); then the notebook runs
again, replaying the new cassette, and is saved with its outputs.

Run from the repository root: python notebooks/cassettes/record_04.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from planbook.testing import MODEL_ENV, FakeOpenAIServer, Reply

HERE = Path(__file__).resolve().parent
NOTEBOOK = HERE.parent / "04-llm-planner.ipynb"
CASSETTE = HERE / "04-llm-planner.json"

SUMMARY = (
    "Base editors change single DNA letters without cutting both strands of the helix. "
    "Prime editors write short insertions and deletions guided by an extended guide RNA. "
    "Both avoid most of the unwanted edits that double-strand breaks cause."
)


def plan_steps(search_tool: str) -> list[dict]:
    return [
        {"id": "1", "task": "Find two recent gene-editing papers", "tool": search_tool,
         "args": {"topic": "CRISPR gene editing", "limit": 2}, "expect": "two titles"},
        {"id": "2", "task": "Download the papers", "tool": "download_pdfs", "args": {"titles": "$1"}, "needs": ["1"]},
        {"id": "3", "task": "Summarise the papers in three sentences", "agent": "writer", "needs": ["2"],
         "expect": "three sentences"},
    ]


SCRIPT = [
    Reply.plan(plan_steps("search_paper")),  # a typo: the planner feeds the problem back
    Reply.plan(plan_steps("search_papers")),
    Reply.plan([  # the replan after download_pdfs failed
        {"id": "2b", "task": "Fetch the abstracts instead of the PDFs", "tool": "fetch_abstracts",
         "args": {"titles": "$1"}, "needs": ["1"]},
        {"id": "3", "task": "Summarise the papers in three sentences from their abstracts", "agent": "writer",
         "needs": ["2b"], "expect": "three sentences"},
    ]),
    Reply.tool_call("count_words", {"text": SUMMARY}),  # the writer agent checks its draft
    Reply.finish(SUMMARY),
    Reply.text("Happy to help! Where would you like to go, and for how long?"),
    Reply.text("Could you tell me your budget first?"),
]


def execute(env: dict[str, str]) -> None:
    jupyter = Path(sys.executable).with_name("jupyter")
    subprocess.run([str(jupyter), "nbconvert", "--to", "notebook", "--execute", "--inplace",
                    "--ExecutePreprocessor.record_timing=False", "--ExecutePreprocessor.store_widget_state=False",
                    str(NOTEBOOK)],
                   check=True, env=env)


def main() -> None:
    clean = {k: v for k, v in os.environ.items() if k not in MODEL_ENV}  # no real model, account or mode
    with FakeOpenAIServer(SCRIPT) as server:
        execute({**clean, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "recording-placeholder-key",
                 "PLANBOOK_CASSETTE_MODE": "record"})
        if server.remaining:
            raise SystemExit(f"the notebook used {len(SCRIPT) - server.remaining} of {len(SCRIPT)} scripted answers")
    execute(clean)  # replay: the saved outputs are the offline ones
    print(f"recorded {CASSETTE.name} and re-executed {NOTEBOOK.name} from it")


if __name__ == "__main__":
    main()
