"""A run planned to a time budget: measure the step time, plan the steps that fit, decay the
learning rate to the planned end, and follow the recorded plan when resumed.

    planner = BudgetPlanner(budget_seconds=600, started=process_start_time(), ...)
    model.fit(..., callbacks=[..., stop_at_step, planner])

After `plan_after_steps` updates (past the first traces) the planner measures the wall clock
of an update on this machine (evaluations, validation passes and checkpoints between steps
included, as they recur), subtracts what is spent already (the process's start-up included)
and what the end of the run will take (`reserve`: averaging, the test evaluation, the
export), and plans the steps that fit. The learning rate then decays to zero at the planned
step (`TransformerSchedule.set_total_steps`). Every `replan_every` updates it measures again:
if the planned end would now land past the budget, or leave more than `tolerance` of it
unused, it plans anew from where the decay stands (the rate never jumps). A new plan aims
half the tolerance before the budget's end, so that a measurement a little slower than the
last does not force another plan (hysteresis). It never plans past the budget, and it stops
training at once if even the next update would end past it.

Every plan is recorded in `MODEL_DIR/plan.json`, step by step (`Plan`). A resumed run follows
the recorded plan and never plans again: a run killed at any point and rerun with the same
command ends with the weights of an uninterrupted run of that same plan.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import keras

from keras_transformer.checks import check_int, check_number

logger = logging.getLogger("keras_transformer")

OUTLIER = 3.0  # a gap over this many median updates is not an update (a trace, an evaluation)
MIN_LATE_SECONDS = 0.5  # a plan that would end later than this past the budget is made anew
# A plan aims this share of the tolerance band before the budget's end (0: at the end): chosen
# by replaying step times as noisy as a 2-core VM's (tests/test_budget.py; 13 plans in one
# 10-minute run before).
HYSTERESIS = 0.5


def process_start_time() -> float:
    """When this process started, in `time.time()` seconds (Linux: from /proc; elsewhere the
    first call of this function)."""
    global _FIRST_CALL
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        _FIRST_CALL = _FIRST_CALL or time.time()
        return _FIRST_CALL


_FIRST_CALL = None


@dataclass(frozen=True)
class Segment:
    """One plan: from update `from_step` (1-based) on, the rate decays to zero at
    `total_steps`, with the decay's progress `anchor_progress` at `anchor_step`."""

    from_step: int
    total_steps: int
    anchor_step: float
    anchor_progress: float
    elapsed_seconds: float  # since the process started, when planned
    seconds_per_step: float  # measured: wall clock per update, recurring pauses included
    reserve_seconds: float  # the end of the run, predicted


@dataclass
class Plan:
    """The plans of a run, in the order they were made (`plan.json`)."""

    budget_seconds: float
    segments: list[Segment] = field(default_factory=list)

    @property
    def total_steps(self) -> int:
        return self.segments[-1].total_steps

    def segment_for(self, step: int) -> Segment:
        """The segment that sets the rate of update `step` (1-based)."""
        current = self.segments[0]
        for segment in self.segments:
            if segment.from_step <= step:
                current = segment
        return current

    def save(self, path: str) -> None:
        partial = path + ".partial"
        with open(partial, "w") as f:
            json.dump(dataclasses.asdict(self), f, indent=1)
        os.replace(partial, path)

    @classmethod
    def load(cls, path: str) -> Plan | None:
        if not os.path.exists(path):
            return None
        with open(path) as f:
            values = json.load(f)
        segments = [Segment(**s) for s in values.pop("segments")]
        return cls(segments=segments, **values)


class BudgetPlanner(keras.callbacks.Callback):
    """Plans the run's last step to `budget_seconds` (module docstring).

    Args:
        budget_seconds: the whole run's budget, counted from `started`.
        started: `time.time()` at which the budget began (`process_start_time()`).
        schedule: the optimizer's `TransformerSchedule` (its plan variables are set here).
        set_total: called with the planned last step (to stop there, to log "step N/T").
        plan_path: where the plan is recorded (None: not recorded).
        reserve: `reserve(seconds_per_step, first_step_seconds) -> seconds` for the work
            after training (averaging, test evaluation, export).
        plan_after_steps: updates measured before the first plan.
        replan_every: updates between measurements after it.
        tolerance: plan anew when the planned end would leave more than this share of the
            budget unused (a plan that would end past the budget is always made anew).
        clock: `time.time`-like (tests pass a fake one).
    """

    def __init__(
        self,
        budget_seconds: float,
        started: float,
        schedule,
        set_total: Callable[[int], None],
        plan_path: str | None,
        reserve: Callable[[float, float], float],
        plan_after_steps: int = 100,
        replan_every: int = 100,
        tolerance: float = 0.02,
        clock: Callable[[], float] = time.time,
    ):
        super().__init__()
        check_number("budget_seconds", budget_seconds, above=0)
        check_int("plan_after_steps", plan_after_steps, minimum=2)
        check_int("replan_every", replan_every)
        self.budget_seconds = budget_seconds
        self.started = started
        self.schedule = schedule
        self.set_total = set_total
        self.plan_path = plan_path
        self.reserve = reserve
        self.plan_after_steps = plan_after_steps
        self.replan_every = replan_every
        self.tolerance = tolerance
        self.clock = clock
        self.plan: Plan | None = None
        self.following = False  # a resumed run: the recorded plan, no new one
        self.stopped_by_budget_at_step = None
        self._ends: dict[int, float] = {}  # update -> clock at its end
        self._first_step_seconds = None
        self._begin = None

    # Resume: follow the recorded plan ----------------------------------------------------

    def on_train_begin(self, logs=None):
        recorded = Plan.load(self.plan_path) if self.plan_path else None
        if recorded is not None:
            self.plan, self.following = recorded, True
            self._apply(recorded.segment_for(self._step() + 1))
            self.set_total(recorded.total_steps)
            logger.info(
                "Following the recorded plan: %d steps (%s)", recorded.total_steps,
                self.plan_path,
            )  # fmt: skip

    def on_train_batch_begin(self, batch, logs=None):
        self._begin = self.clock()
        if self.following:  # switch segments exactly where the planning run did
            segment = self.plan.segment_for(self._step() + 1)
            if segment.from_step == self._step() + 1:
                self._apply(segment)

    # Planning ----------------------------------------------------------------------------

    def on_train_batch_end(self, batch, logs=None):
        now, step = self.clock(), self._step()
        if step in self._ends:
            return  # a micro-batch of an accumulated update
        if self._first_step_seconds is None and self._begin is not None:
            self._first_step_seconds = now - self._begin
        self._ends[step] = now
        if self.following:
            return
        if self.plan is None:
            if len(self._ends) >= self.plan_after_steps:
                self._make_plan(step, now, first=True)
        elif step % self.replan_every == 0:
            self._make_plan(step, now, first=False)
        next_end = now - self.started + self._per_step() + self._reserve() if self.plan else 0
        if next_end > self.budget_seconds + 1e-6:
            self.stopped_by_budget_at_step = step
            self.model.stop_training = True
            logger.info("Stopping at step %d: the next update would end past the budget", step)

    def seconds_per_step(self) -> float:
        """Wall clock per update: the mean regular gap between update ends over the last
        updates, plus the recurring pauses (evaluations, validation passes: the excess of gaps
        over `OUTLIER` times the median) per update since the first traces."""
        steps = sorted(self._ends)
        gaps = {b: self._ends[b] - self._ends[a] for a, b in zip(steps, steps[1:]) if b == a + 1}
        if not gaps:
            return float("inf")
        recent = [gaps[s] for s in sorted(gaps)[-self.replan_every * 3 :]]
        typical = statistics.median(recent)
        regular = [g for g in recent if g <= OUTLIER * typical]
        # Pauses recur (every N updates): count them over whole cycles, from the first
        # settled update to the last pause, so the estimate does not swing with the phase.
        first = steps[0] + self.plan_after_steps // 2
        paused = [s for s, g in gaps.items() if s > first and g > OUTLIER * typical]
        pauses = sum(gaps[s] - typical for s in paused)
        return sum(regular) / len(regular) + (pauses / (paused[-1] - first) if paused else 0.0)

    def _per_step(self) -> float:
        return self.plan.segments[-1].seconds_per_step

    def _reserve(self) -> float:
        return self.plan.segments[-1].reserve_seconds

    def _make_plan(self, step: int, now: float, first: bool) -> None:
        per_step = self.seconds_per_step()
        reserve = self.reserve(per_step, self._first_step_seconds or per_step)
        left = self.budget_seconds - (now - self.started) - reserve
        if not first:
            current = self.plan.total_steps
            if current <= step:
                return
            fits = step + max(int(left / per_step + 1e-6), 0)  # 1e-6: 82.99999 steps are 83
            late = (current - fits) * per_step  # > 0: the plan would end past the budget
            if -self.tolerance * self.budget_seconds <= late <= MIN_LATE_SECONDS:
                return
        # Aim inside the band, not at its edge: noise of a few percent in the measured step
        # time then moves the end within the band instead of past the budget (hysteresis).
        aim = left - HYSTERESIS * self.tolerance * self.budget_seconds
        total = max(step + max(int(aim / per_step + 1e-6), 0), step + 1)
        from_step = step + 1
        self.schedule.set_total_steps(total, from_step=from_step)
        anchor = self.schedule.plan_anchor()
        segment = Segment(
            from_step=from_step, total_steps=total, anchor_step=anchor[0],
            anchor_progress=anchor[1], elapsed_seconds=round(now - self.started, 2),
            seconds_per_step=round(per_step, 5), reserve_seconds=round(reserve, 1),
        )  # fmt: skip
        if first:
            self.plan = Plan(self.budget_seconds, [segment])
        else:
            self.plan.segments.append(segment)
        self.set_total(total)
        if self.plan_path:
            self.plan.save(self.plan_path)
        logger.info(
            "%s %d steps for the %.0f-minute budget: %.3f s a step measured, %.0f s spent, "
            "%.0f s kept for the end of the run", "Planned" if first else "Planned anew:",
            total, self.budget_seconds / 60, per_step, now - self.started, reserve,
        )  # fmt: skip

    def _apply(self, segment: Segment) -> None:
        self.schedule.restore_plan(
            segment.anchor_step, segment.anchor_progress, segment.total_steps
        )

    def _step(self) -> int:
        return int(self.model.optimizer.iterations.numpy())


# The work after training, as multiples of what the planner measures on the same machine
# (2-core AMD EPYC, quick preset, 2026-11-25: 0.16 s a step, a first update of 8.3 s with its
# trace; averaging 2 s, the 1288 test sentences with beam 4 in 21.5 s, the export 30 s).
TEST_SECONDS_PER_SENTENCE_PER_STEP = 0.104  # beam 4: 0.0167 s a sentence at 0.16 s a step
EXPORT_FIRST_STEPS = 3.6  # the export's traces and writes, in first updates (trace included)
FIXED_SECONDS = 10.0  # averaging, summary, the last validation pass; a margin
# Scoring the averaged weights on the dev subset (`--deliver auto`), from the same run's dev
# evaluations: greedy 200 sentences in 1.4-1.7 s at 0.15 s a step (0.05 a sentence a step),
# the first with its trace 5.9 s; loading the model and a new trace, about one first update.
DEV_SECONDS_PER_SENTENCE_PER_STEP = 0.05
DEV_CHOICE_FIRST_STEPS = 1.0


def end_of_run_seconds(
    seconds_per_step: float,
    first_step_seconds: float,
    test_sentences: int = 0,
    export: bool = False,
    dev_sentences: int = 0,
) -> float:
    """The predicted seconds of a run's end (averaging the checkpoints, greedy decoding of
    `dev_sentences` to choose the delivered weights, beam search over `test_sentences`, the
    SavedModel export) on a machine where an update takes `seconds_per_step` and the first
    update (its trace included) `first_step_seconds`."""
    test = TEST_SECONDS_PER_SENTENCE_PER_STEP * test_sentences * seconds_per_step
    dev = 0.0
    if dev_sentences:
        dev = DEV_SECONDS_PER_SENTENCE_PER_STEP * dev_sentences * seconds_per_step
        dev += DEV_CHOICE_FIRST_STEPS * first_step_seconds
    return FIXED_SECONDS + test + dev + (EXPORT_FIRST_STEPS * first_step_seconds if export else 0.0)
