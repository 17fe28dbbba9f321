"""The live view's bridge and the choice of view (kept for imports): they live in
:mod:`planbook.views.live`; the view model in :mod:`planbook.views.state`."""

from .views.live import (  # noqa: F401
    FLUSH_NOW,
    LIVE_NOTE,
    LIVE_ROWS,
    HtmlView,
    LiveView,
    Throttle,
    choose_view,
    show_live,
    watch,
    widgets_available,
)
from .views.state import ViewState  # noqa: F401
from .views.text import progress_line  # noqa: F401
