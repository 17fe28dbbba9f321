"""The text view (kept for imports): it lives in :mod:`planbook.views.text`."""

from .views.text import (  # noqa: F401
    format_diff,
    format_markdown,
    format_plan,
    format_result,
    format_state,
    plan_mimebundle,
    progress_line,
    result_mimebundle,
    state_bundle,
    step_line,
    summary_line,
)
