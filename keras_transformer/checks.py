"""The argument checks every module shares, written once: each raises a ValueError (or
TypeError) whose message names the bad value, `"... Received: name=value"`.

Plain Python (no TensorFlow or Keras import), so every module can use it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any


def check_choice(name: str, value: Any, choices: Sequence) -> Any:
    """Return `value` if it is one of `choices`, else raise a ValueError naming it."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}. Received: {name}={value!r}")
    return value


def check_int(name: str, value: Any, minimum: int | None = 1, maximum: int | None = None) -> int:
    """Return `value` if it is an int (not a bool) within `[minimum, maximum]` (None: no
    bound), else raise a ValueError naming it."""
    integer = not isinstance(value, bool) and isinstance(value, int)
    if not integer or not _within(value, minimum, maximum):
        described = _describe("an int", minimum, maximum)
        raise ValueError(f"{name} must be {described}. Received: {name}={value!r}")
    return value


def check_number(
    name: str,
    value: Any,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    below: float | None = None,
) -> float:
    """Return `value` if it is a finite Python number (not a bool, NaN or infinite) within the
    bounds: `minimum` / `maximum` inclusive, `above` / `below` exclusive (None: no bound),
    else raise a ValueError naming it. (Where a setting can be unlimited, None says so.)"""
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    if not number or not math.isfinite(value) or not _within(value, minimum, maximum, above, below):
        described = _describe("a finite number", minimum, maximum, above, below)
        raise ValueError(f"{name} must be {described}. Received: {name}={value!r}")
    return value


def _within(value, minimum=None, maximum=None, above=None, below=None) -> bool:
    return (
        (minimum is None or value >= minimum)
        and (maximum is None or value <= maximum)
        and (above is None or value > above)
        and (below is None or value < below)
    )


def _describe(kind, minimum=None, maximum=None, above=None, below=None) -> str:
    pairs = ((">=", minimum), ("<=", maximum), (">", above), ("<", below))
    bounds = [f"{op} {bound}" for op, bound in pairs if bound is not None]
    return " ".join([kind, " and ".join(bounds)]) if bounds else kind


def env_switch(name: str) -> bool | None:
    """The environment variable `name` as an on/off override: "1" True, "0" False, unset
    None; any other value raises a ValueError that names it."""
    value = os.environ.get(name)
    if value is None:
        return None
    if value not in ("0", "1"):
        raise ValueError(f"{name} must be 0 or 1. Received: {value!r}")
    return value == "1"
