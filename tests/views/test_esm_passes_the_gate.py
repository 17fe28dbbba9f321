"""The live view's own JavaScript leaves the kernel unchanged through the gate.

Everything the kernel sends passes the secret-shape masking (planbook/outbound/checkpoint.py),
the widget's ES module included. A line of it once read ``const session = manager && …``, which
has the shape of a secret assignment: the page received ``const session = *** && …``, a syntax
error, and showed "Failed to create view". The view's code must read as code after masking."""

from __future__ import annotations

import pytest

from planbook.outbound.redact import Redactor, is_secret_name
from planbook.outbound.shapes import mask_shapes


def test_the_views_module_is_not_masked() -> None:
    pytest.importorskip("anywidget")
    from planbook.views.widget import PlanWidget

    esm = PlanWidget._esm
    assert isinstance(esm, str) and "export default" in esm
    assert mask_shapes(esm, is_secret_name) == esm
    assert Redactor().text(esm) == esm


def test_the_check_finds_a_line_the_gate_would_break() -> None:
    line = "const session = manager && manager.session;\n"
    assert mask_shapes(line, is_secret_name) != line
