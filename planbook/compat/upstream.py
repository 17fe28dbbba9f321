"""Where the seed code raises, faithful mode ends the request the same way.

``faithful=True`` is for teaching a seed design's pitfalls, and a crash is one of them: when
the upstream code would raise (AgenticSeek's ``parse_agent_tasks`` on a task without an
``agent``, its run loop on an id it cannot use as a key...), faithful mode performs the same
operation, takes the exception it raises (same type, same message) and raises
:class:`UpstreamCrash` around it. Planners and reviews let it through, so the run fails at
that point, once, with "upstream raises here: ...", instead of asking the model again.
"""

from __future__ import annotations

from ..data.errors import UpstreamCrash

__all__ = ["UpstreamCrash"]

