"""The live widget (kept for imports): it lives in :mod:`planbook.views.widget`."""

from .views.widget import PlanView  # noqa: F401
