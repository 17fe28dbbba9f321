"""The bundled offline demo: a step fails, the plan is revised (the diff is shown) and
the goal is met. Deterministic and key-free, so ``planbook demo`` shows every core idea
in one run, the same way every time.
"""

from __future__ import annotations

from ..data.models import Plan
from ..workers.planners import ScriptedPlanner
from ..workers.tools import Toolbox

demo_tools = Toolbox()

_FORECASTS = {
    "lisbon": [
        {"day": 1, "sky": "sunny", "high_c": 24},
        {"day": 2, "sky": "rain", "high_c": 18},
        {"day": 3, "sky": "windy", "high_c": 20},
    ]
}


@demo_tools.tool
def get_forecast(city: str, days: int = 3, source: str = "primary") -> list[dict[str, object]]:
    """Fetch a daily weather forecast for a city."""
    if source == "primary":
        raise ConnectionError("forecast service unavailable (primary); try source='backup'")
    if city.lower() not in _FORECASTS:
        raise LookupError(f"no forecast for {city!r}")
    print(f"backup service: {days} days for {city}")
    return _FORECASTS[city.lower()][:days]


@demo_tools.tool
def pick_clothes(forecast: list[dict[str, object]]) -> list[str]:
    """Choose clothes that fit a forecast."""
    items = {"toothbrush", "passport"}
    for day in forecast:
        sky, high = day["sky"], int(day["high_c"])  # type: ignore[call-overload]
        items.add("sunglasses" if sky == "sunny" else "umbrella" if sky == "rain" else "windbreaker")
        items.add("t-shirts" if high >= 22 else "a sweater")
    return sorted(items)


@demo_tools.tool
def write_list(items: list[str], city: str) -> str:
    """Format a packing list."""
    return f"Packing list for {city}: " + ", ".join(items)


DEMO_SPEC = """\
goal: Write a packing list for a 3-day trip to Lisbon
title: Packing for Lisbon
steps:
  - id: forecast
    task: Get the 3-day forecast
    tool: get_forecast
    args: {city: Lisbon, days: 3}
    expect: a list of daily forecasts
  - id: clothes
    task: Pick clothes for the weather
    tool: pick_clothes
    args: {forecast: $forecast}
  - id: list
    task: Write the packing list
    tool: write_list
    args: {items: $clothes, city: Lisbon}
"""

#: When the forecast service is down, use the backup source and rewire the later steps.
demo_planner = ScriptedPlanner(
    {
        None: Plan.parse(DEMO_SPEC).steps,
        "unavailable": """\
steps:
  - id: forecast-backup
    task: Get the 3-day forecast from the backup service
    tool: get_forecast
    args: {city: Lisbon, days: 3, source: backup}
  - id: clothes
    task: Pick clothes for the weather
    tool: pick_clothes
    args: {forecast: $forecast-backup}
  - id: list
    task: Write the packing list
    tool: write_list
    args: {items: $clothes, city: Lisbon}
""",
    }
)


def demo_plan() -> Plan:
    return Plan.parse(DEMO_SPEC, id="packing")
