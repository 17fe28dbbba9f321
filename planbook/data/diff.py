"""Plan diffs: every replan is a visible change, never a silent rewrite."""

from __future__ import annotations

from ..outbound.checkpoint import mask_text
from .models import Plan, PlanDiff


def diff_plans(old: Plan, new: Plan, *, reason: str | None = None) -> PlanDiff:
    """Compare by step id: ``removed`` / ``added`` ids, and ``revised`` ids whose
    (tool, args, agent, task) changed. ``steps`` describes each id mentioned (the old
    text for removed steps, the new text otherwise) so a view can strike through or
    highlight without keeping both plans around. Its texts are masked when it is made
    (:func:`planbook.outbound.checkpoint.mask_text`): a diff is kept, shown, dumped and
    sent to the browser, and none of these may carry a secret the process knows.
    """
    old_steps = {s.id: s for s in old.steps}
    new_steps = {s.id: s for s in new.steps}
    removed = [sid for sid in old_steps if sid not in new_steps]
    added = [sid for sid in new_steps if sid not in old_steps]
    revised = [
        sid for sid in new_steps if sid in old_steps and old_steps[sid].signature() != new_steps[sid].signature()
    ]
    described = {sid: mask_text(old_steps[sid].describe()) for sid in removed}
    described.update({sid: mask_text(new_steps[sid].describe()) for sid in added + revised})
    return PlanDiff(
        from_revision=old.revision,
        to_revision=new.revision,
        removed=removed,
        added=added,
        revised=revised,
        reason=mask_text(reason) if reason else reason,
        steps=described,
    )
