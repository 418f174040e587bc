"""A policy that changes nothing: a chain placeholder and a benchmark baseline."""

from ..base import Policy


class Noop(Policy):
    name = "noop"
