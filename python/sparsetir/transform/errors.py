"""Errors raised while lowering."""


class LoweringError(ValueError):
    """A Stage I function that cannot be lowered; the message names the construct."""
