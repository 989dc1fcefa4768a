"""Errors the engine raises with a message a user can act on."""

from __future__ import annotations


class PlanError(ValueError):
    """The plan is valid field by field but cannot be computed as a whole.

    Examples: a layout whose ranks do not multiply to the world size, a TP size that
    does not divide the attention heads. The message names the fields to change.
    """
