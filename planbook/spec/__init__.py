"""Plan formats: reading a plan from text (YAML, JSON, Markdown lists, registered formats),
writing one back, its JSON schema, and the validation every plan passes before it runs."""
