"""The seed designs, runnable on planbook: OpenManus's planning tool and flow, AgenticSeek's planner.

Each design keeps its formats (the ``planning`` function schema, the plan text, the
"headline + ```json plan" answer) and, by default, planbook's fixes of its pitfalls;
``faithful=True`` reproduces a pitfall on purpose, for teaching.

Import the submodules (``planbook.compat.openmanus``, ``planbook.compat.agenticseek``);
nothing here imports ``openai``: a model is reached through :mod:`planbook.llm`, lazily.
"""
