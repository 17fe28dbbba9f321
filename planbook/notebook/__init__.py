"""The notebook surface: the ``%%plan`` and ``%run_plan`` magics and the handle of a run in
the background (:func:`planbook.start`). Loaded by ``%load_ext planbook``, never at import."""
