"""Repository-wide test settings (they apply to tests/ and to the notebooks under nbval).

Tests never call a model over the network: the model settings of whoever runs the
suite are removed before any test or notebook kernel starts, so no test or notebook
reaches a real model or account, and no one's PLANBOOK_CASSETTE_MODE makes a notebook record.
"""

from __future__ import annotations

import os

from planbook.testing.helpers import MODEL_ENV  # every variable that selects a model, an endpoint or a cassette mode

#: the fixtures planbook offers for testing your own planners (``fake_openai``) are used here too.
#: An installed planbook registers them by its pytest11 entry point, named after this module so
#: this line is then a no-op; it stays for a checkout run without installing (PYTHONPATH=.).
pytest_plugins = ["planbook.testing.pytest_plugin"]


def pytest_configure(config: object) -> None:
    for name in MODEL_ENV:
        os.environ.pop(name, None)
    # runs kept by the magics and the CLI (and the notebooks' kernels) go to a store of this
    # test session, never to the developer's .planbook/ or $PLANBOOK_HOME
    import tempfile

    os.environ["PLANBOOK_HOME"] = tempfile.mkdtemp(prefix="planbook-test-home-")
