"""What does a step's work: tools (typed Python callables), agents (a task in words) and
planners (a goal into steps). They know nothing about the run that calls them."""
