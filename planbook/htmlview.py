"""The static HTML view (kept for imports): it lives in :mod:`planbook.views.html`."""

from .views.html import (  # noqa: F401
    NO_MATH,
    STATUS_COLORS,
    diff_html,
    esc,
    format_duration,
    header_html,
    plan_html,
    progress_bar_html,
    result_html,
    revisions_html,
    state_html,
    steps_table_html,
    verdict_html,
)
from .views.state import frontier  # noqa: F401
