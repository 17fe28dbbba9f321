"""The notebook surface: the ``%%plan`` and ``%run_plan`` magics and the notebook front of a run in
the background (:class:`~planbook.notebook.handle.NotebookHandle`: the engine's handle plus its live
view). Loaded by ``%load_ext planbook`` or by ``planbook.start`` in a kernel, never at import."""
