"""Tools for examples/trip.yaml: plan a weekend trip from a (pretend) train timetable.

Run it from the repository root:

    planbook run examples/trip.yaml --tools examples.trip_tools:tools --planner examples.trip_tools:planner

The first train is sold out; the planner's rule for that error books the next one, and
the run shows the revised plan and its diff.
"""

from __future__ import annotations

import planbook

tools = planbook.Toolbox()

TIMETABLE = {
    ("Lyon", "Paris"): [{"train": "TGV 6602", "leaves": "07:04", "seats": 0}, {"train": "TGV 6606", "leaves": "09:04", "seats": 12}],
}


@tools.tool
def find_trains(origin: str, destination: str) -> list[dict[str, object]]:
    """List the trains between two cities, earliest first."""
    trains = TIMETABLE.get((origin, destination))
    if trains is None:
        raise LookupError(f"no trains from {origin} to {destination}")
    return trains


@tools.tool
def book(trains: list[dict[str, object]], choice: int = 0) -> str:
    """Book a seat on one of the trains (0 = the first)."""
    train = trains[choice]
    if not train["seats"]:
        raise RuntimeError(f"{train['train']} is sold out")
    print(f"booked a seat on {train['train']}")
    return f"{train['train']} at {train['leaves']}"


@tools.tool
def itinerary(booking: str, city: str) -> str:
    """Write the trip in one line."""
    return f"Weekend in {city}: {booking}, back on Sunday evening."


planner = planbook.ScriptedPlanner(
    {
        None: [],  # the plan comes from examples/trip.yaml; this planner only repairs it
        "sold out": """\
steps:
  - {id: book-next, task: Book the next train, tool: book, args: {trains: $trains, choice: 1}}
  - {id: summary, task: Write the itinerary, tool: itinerary, args: {booking: $book-next, city: Paris}}
""",
    }
)
