"""Moved to :mod:`planbook.outbound.redact` (the gate). Kept only while imports move over."""

from ..outbound.redact import *  # noqa: F401,F403
from ..outbound.redact import (  # noqa: F401
    REDACTED_TEXT, SUSPECT_WORDS, DeferredChecks, Redactor, dump_json, echo_forms, environment_secrets,
    hide_secret_args, is_secret_name, secret_texts, shown_arg, suspicious,
)
