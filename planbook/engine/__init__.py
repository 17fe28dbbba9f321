"""The engine: the runner's tick and everything it decides with (scheduler, dispatch,
policies, budgets, acceptance, replanning, steering and decisions, interrupts, events,
persistence, options and state). It never imports IPython, ipywidgets or openai."""
