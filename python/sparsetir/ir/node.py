"""What every Stage I node shares: declared with ``@node``, validated, changed with ``replace``.

A Stage I node is a frozen ``tvm_ffi`` dataclass whose ``__post_init__`` refuses fields that do
not fit together. Nodes are never changed in place: ``replace(node, **changes)`` builds a new
one through the constructor, so the validators run again, and a misspelt field name is an
error instead of a silently dropped change (``dataclasses.replace`` and ``copy.replace`` do the
same on these classes).

Example
-------
>>> from sparsetir.ir import dense_fixed, replace
>>> I = dense_fixed("I", 8)
>>> replace(I, name="I2").name
'I2'
>>> replace(I, kind="dense_fixd")
Traceback (most recent call last):
...
sparsetir.errors.SparseTIRValueError: axis I: unknown kind 'dense_fixd'; expected one of dense_fixed, dense_variable, sparse_fixed, sparse_variable
"""

from __future__ import annotations

from tvm_ffi.dataclasses import fields, py_class
from ..errors import SparseTIRTypeError

NODE_TYPES: list = []
"""Every Stage I node class, in declaration order."""


def node(type_key: str):
    """Class decorator: a frozen, structurally compared Stage I node registered under
    ``type_key``, whose ``dataclasses.replace`` is :func:`replace`."""
    def declare(cls):
        cls.__replace__ = replace
        cls = py_class(type_key, structural_eq="tree", frozen=True)(cls)
        NODE_TYPES.append(cls)
        return cls
    return declare


def replace(obj, /, **changes):
    """A copy of the Stage I node ``obj`` with ``changes`` applied, validated as a new node.

    Raises ``TypeError`` for an object that is not a Stage I node or a name that is not one of
    its fields, and whatever the node's validator raises for fields that do not fit together.
    """
    cls = type(obj)
    if cls not in NODE_TYPES:
        raise SparseTIRTypeError(f"replace takes a Stage I node ({', '.join(c.__name__ for c in NODE_TYPES)})"
                        f", got {cls.__name__}")
    names = [f.name for f in fields(cls)]
    unknown = [name for name in changes if name not in names]
    if unknown:
        raise SparseTIRTypeError(f"{cls.__name__} has no field {unknown[0]!r}; its fields are "
                        f"{', '.join(names)}")
    return cls(**{name: changes[name] if name in changes else getattr(obj, name)
                  for name in names})
