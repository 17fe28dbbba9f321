"""The data layer: what every other layer shares and nothing here imports from above.

Plans, steps, events and results (:mod:`.models`), errors, ids, ``$ref`` references, the
timeline, plan diffs, wording and the render registry the views fill in. The gate that
everything leaving a run passes (:mod:`planbook.outbound`) sits beside it in the same layer.
"""
