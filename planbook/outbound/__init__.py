"""The gate: the one way out of a run.

Everything that leaves a run — a store's rows, every view (text, HTML, Markdown, the widget's
state, the static record, the terminal view), OpenTelemetry spans, the CLI's output and its
approval prompt, the MCP server's answers, revision diffs, a run result's error and ``str`` —
passes through this package. Its parts:

- :mod:`.redact`: what is secret (by name, by value, by shape) and how it is hidden;
- :mod:`.text`: text made inert for a terminal, a one-line cell, and Markdown;
- :mod:`.html`: HTML from results, sanitised by a maintained sanitizer (nh3) and kept in its pane.

It sits in the data layer: it imports nothing of the engine, the views or the surfaces.
"""
