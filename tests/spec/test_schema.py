"""The plan-file JSON Schema: generated from the step model, and every example plan in the
repository (examples/, the tutorials' %%plan cells, the README) passes it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from planbook.data.models import StepSpec
from planbook.spec.formats import ALIASES, STEP_FIELDS, is_plan_spec
from planbook.spec.schema import plan_schema

ROOT = Path(__file__).resolve().parents[2]


def validator() -> Any:
    schema = plan_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def notebook_specs() -> list[tuple[str, str]]:
    """(where, spec) of every %%plan cell whose body is a YAML/JSON spec (not a goal in words)."""
    found = []
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for number, cell in enumerate(json.loads(notebook.read_text(encoding="utf-8"))["cells"], start=1):
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and source.startswith("%%plan"):
                body = source.split("\n", 1)[1] if "\n" in source else ""
                if is_plan_spec(body) and _is_mapping_spec(body):
                    found.append((f"{notebook.name} cell {number}", body))
    return found


def _is_mapping_spec(text: str) -> bool:
    """A YAML/JSON spec (the schema's business), not a Markdown list."""
    return isinstance(yaml.safe_load(text), (dict, list))


def readme_specs() -> list[tuple[str, str]]:
    """The README's code blocks that hold a plan spec (a %%plan cell's body, or a YAML file)."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("```") and current is None:
            current = []
        elif line.startswith("```") and current is not None:
            blocks.append(current)
            current = None
        elif current is not None:
            current.append(line)
    specs = []
    for number, lines in enumerate(blocks, start=1):
        body = "\n".join(lines[1:] if lines and lines[0].startswith("%%plan") else lines)
        if re.search(r"^steps:", body, re.MULTILINE) and _is_mapping_spec(body):
            specs.append((f"README.md block {number}", body))
    return specs


EXAMPLES = [(p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")) for p in sorted((ROOT / "examples").glob("*.yaml"))]
ALL = EXAMPLES + notebook_specs() + readme_specs()


def test_there_are_examples_to_check() -> None:
    assert len(EXAMPLES) >= 1 and len(notebook_specs()) >= 5 and len(readme_specs()) >= 2


@pytest.mark.parametrize(("where", "spec"), ALL, ids=[where for where, _ in ALL])
def test_every_example_plan_passes_the_schema(where: str, spec: str) -> None:
    data = yaml.safe_load(spec)
    errors = sorted(validator().iter_errors(data), key=str)
    assert not errors, f"{where}: {errors[0].message} at {list(errors[0].absolute_path)}"


def test_the_step_fields_come_from_the_step_model() -> None:
    step = plan_schema()["$defs"]["Step"]["properties"]
    assert set(step) == set(STEP_FIELDS) | set(ALIASES)
    assert tuple(StepSpec.model_fields) == STEP_FIELDS
    for name, field in StepSpec.model_fields.items():
        assert field.description and field.description in step[name]["description"]


@pytest.mark.parametrize(("data", "ok"), [
    ({"goal": "g", "steps": [{"id": 1, "tool": "t", "needs": 2}, "a bare task", {"tool": "t"}]}, True),
    ([{"id": "a", "tool_name": "t", "need": ["b"], "expected_outcome": "x"}], True),
    ({"$schema": "plan.schema.json", "steps": []}, True),
    ({"steps": [{"id": "a", "tool": "t", "neds": ["b"]}]}, False),  # a typo in a field
    ({"steps": [{"id": "a", "tool": "t", "on_failure": "replna"}]}, False),  # a typo in a policy
    ({"gaol": "x", "steps": []}, False),
    ({"goal": "x"}, False),  # no steps
    ({"steps": [{"id": "a", "args": [1]}]}, False),
])
def test_the_schema_accepts_what_the_reader_accepts_and_flags_typos(data: Any, ok: bool) -> None:
    assert validator().is_valid(data) is ok
