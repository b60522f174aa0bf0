"""When a training run ends: the one object that answers it, for every kind of run.

    run_end = RunEnd(cfg.step_limit(), time_limit_seconds=570, planner=BudgetPlanner(...))
    control = RunControl(run_end, ...)  # `training.run_control`: calls it after each update

A run ends at its last step: `train_steps`, or the planned one of a run planned to a time
budget (`training.budget.BudgetPlanner`: it measures, plans, records `plan.json` and sets the
schedule's decay total); before a plan exists the bound is `step_limit()`. It also ends
before an update that would end past a time limit (`--train-minutes`), when the planner finds
that even the next update would end past the budget, when the dev evaluation asks for an
early stop, or when another worker of a multi-worker run stopped (the run control agrees on
it). `RunEnd.stop` is the only place a normal end sets `model.stop_training`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from keras_transformer.checks import check_int, check_number
from keras_transformer.training.budget import BudgetPlanner

logger = logging.getLogger("keras_transformer")

# Why a run stopped before its last step (`RunEnd.stopped_by`); "steps": at its last step.
REASONS = ("steps", "budget", "time_limit", "early_stopping", "another_worker")


class RunEnd:
    """Decides the step after which training stops (module docstring).

    Args:
        last_step: the run's last update (`train_steps`, or a planned run's bound before its
            plan).
        time_limit_seconds: stop before an update that would end past this many seconds of
            wall clock since training began (evaluations and checkpoints between steps
            included; the update's own duration, from its begin to its end, is the margin);
            None: no limit.
        planner: the run's `BudgetPlanner` (None: not planned); its plan's last step
            replaces `last_step` once made.
        clock: `time.time`-like (tests pass a fake one).

    Attributes:
        stopped_by: one of `REASONS`, once decided, else None.
        stopped_at_step: the update after which it stopped, else None.
    """

    def __init__(
        self,
        last_step: int,
        time_limit_seconds: float | None = None,
        planner: BudgetPlanner | None = None,
        clock: Callable[[], float] = time.time,
    ):
        check_int("last_step", last_step)
        if time_limit_seconds is not None:
            check_number("time_limit_seconds", time_limit_seconds, above=0)
        self.last_step = last_step
        self.time_limit_seconds = time_limit_seconds
        self.planner = planner
        self.clock = clock
        self.stopped_by = None
        self.stopped_at_step = None
        self._started = None
        self._update_start = None

    @property
    def total_steps(self) -> int | None:
        """The last step as known now: None while a planned run has no plan yet."""
        if self.planner is None:
            return self.last_step
        return self.planner.total_steps

    def begin(self, step: int) -> None:
        """Training begins (or resumes) after update `step`: a resumed planned run follows
        its recorded plan."""
        self._started = self.clock()
        self.stopped_by = self.stopped_at_step = None
        if self.planner is not None:
            self.planner.resume(step)

    def update_begins(self, step: int) -> None:
        """The first micro-batch of update `step + 1` begins."""
        self._update_start = self.clock()
        if self.planner is not None:
            self.planner.update_begins(step, self._update_start)

    def update_ends(self, step: int) -> None:
        """Update `step` ended (read before its checkpoint and evaluation, so their pauses
        count in the next update's gap): plan, and decide whether to stop after it."""
        now = self.clock()
        over_budget = self.planner is not None and self.planner.update_ends(step, now)
        if over_budget:
            self.request("budget", step)
        elif step >= (self.total_steps or self.last_step):
            self.request("steps", step)
        elif self.time_limit_seconds is not None and self._update_start is not None:
            update_seconds = now - self._update_start
            if now - self._started + update_seconds >= self.time_limit_seconds:
                self.request("time_limit", step)
        self._update_start = None

    def request(self, reason: str, step: int) -> None:
        """Stop after update `step` for `reason` (the first reason given stands)."""
        if reason not in REASONS:
            raise ValueError(f"reason must be one of {REASONS}. Received: reason={reason!r}")
        if self.stopped_by is None:
            self.stopped_by, self.stopped_at_step = reason, step

    @property
    def stopping(self) -> bool:
        """Whether this process decided to stop after the current update."""
        return self.stopped_by is not None

    def stop(self, model, step: int) -> None:
        """End `fit` after update `step`: this process's decision, or another worker's (a
        peer's stop, agreed by the run control)."""
        self.request("another_worker", step)
        if self.stopped_by not in ("steps", "another_worker"):
            logger.info("Stopping at step %d: %s", step, _MESSAGES[self.stopped_by])
        elif self.stopped_by == "another_worker":
            logger.info("Stopping at step %d: another worker stopped training", step)
        model.stop_training = True


_MESSAGES = {
    "budget": "the next update would end past the budget",
    "time_limit": "the next update would end past the time limit (--train-minutes)",
    "early_stopping": "no dev BLEU gain (--early-stopping)",
}
