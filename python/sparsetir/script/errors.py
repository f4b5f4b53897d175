"""Errors raised while reading sparse TVMScript."""


class SparseScriptError(SyntaxError):
    """A sparse kernel that cannot be parsed; the message names the line and the problem."""
