"""A run planned to a time budget: measure the step time, plan the steps that fit, decay the
learning rate to the planned end, and follow the recorded plan when resumed.

    planner = BudgetPlanner(600, process_start_time(), schedule, plan_path, EndOfRun())
    run_end = RunEnd(cfg.step_limit(), planner=planner)  # `training.run_end`: it drives it

After `plan_after_steps` updates (past the first traces) the planner measures the wall clock
of an update on this machine (evaluations, validation passes and checkpoints between steps
included, as they recur), subtracts what is spent already (the process's start-up included)
and what the end of the run will take (`EndOfRun`: averaging, the test evaluation, the
export), and plans the steps that fit. The learning rate then decays to zero at the planned
step (`TransformerSchedule.set_total_steps`). Every `replan_every` updates it measures again:
if the planned end would now land past the budget, or leave more than `tolerance` of it
unused, it plans anew from where the decay stands (the rate never jumps). A new plan aims
`hysteresis` of the tolerance before the budget's end, so that a measurement a little slower
than the last does not force another plan. It never plans past the budget, and it tells the
run end (`training.run_end.RunEnd`) to stop at once if even the next update would end past it.

Every plan is recorded in `MODEL_DIR/plan.json`, step by step (`Plan`). A resumed run follows
the recorded plan and never plans again: a run killed at any point and rerun with the same
command ends with the weights of an uninterrupted run of that same plan.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import statistics
import time
from dataclasses import dataclass, field

from keras_transformer.checks import check_int, check_number

logger = logging.getLogger("keras_transformer")

OUTLIER = 3.0  # a gap over this many median updates is not an update (a trace, an evaluation)
MIN_LATE_SECONDS = 0.5  # a plan that would end later than this past the budget is made anew
# A plan aims this share of the tolerance band before the budget's end (0: at the end), chosen
# by replaying step times as noisy as a 2-core VM's (tests/test_budget.py,
# `test_a_noisy_machine_replans_less_with_hysteresis`; a real run's plans:
# benchmarks/results/2026-11-25-first-command-avx2-cap.md, `python pipelines/train_wmt.py`).
HYSTERESIS = 0.5


def process_start_time() -> float:
    """When this process started, in `time.time()` seconds (Linux: from /proc; elsewhere the
    first call of this function)."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _first_call()


@functools.cache
def _first_call() -> float:
    return time.time()


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


class BudgetPlanner:
    """Plans the run's last step to `budget_seconds` (module docstring). Not a callback:
    `training.run_end.RunEnd` calls it at each update's begin and end with its clock's time.

    Args:
        budget_seconds: the whole run's budget, counted from `started`.
        started: `time.time()` at which the budget began (`process_start_time()`).
        schedule: the optimizer's `TransformerSchedule` (its plan variables are set here).
        plan_path: where the plan is recorded (None: not recorded).
        end_of_run: the work after training (averaging, test evaluation, export).
        plan_after_steps: updates measured before the first plan.
        replan_every: updates between measurements after it.
        tolerance: plan anew when the planned end would leave more than this share of the
            budget unused (a plan that would end past the budget is always made anew).
        hysteresis: the share of the tolerance band a new plan aims before the budget's end.

    Attributes:
        plan: the `Plan` made or followed, None before the first.
        total_steps: the planned last step, None before the first plan.
    """

    def __init__(
        self,
        budget_seconds: float,
        started: float,
        schedule,
        plan_path: str | None,
        end_of_run: EndOfRun,
        plan_after_steps: int = 100,
        replan_every: int = 100,
        tolerance: float = 0.02,
        hysteresis: float = HYSTERESIS,
    ):
        check_number("budget_seconds", budget_seconds, above=0)
        check_int("plan_after_steps", plan_after_steps, minimum=2)
        check_int("replan_every", replan_every)
        check_number("hysteresis", hysteresis, minimum=0, maximum=1)
        self.budget_seconds = budget_seconds
        self.started = started
        self.schedule = schedule
        self.plan_path = plan_path
        self.end_of_run = end_of_run
        self.plan_after_steps = plan_after_steps
        self.replan_every = replan_every
        self.tolerance = tolerance
        self.hysteresis = hysteresis
        self.plan: Plan | None = None
        self.following = False  # a resumed run: the recorded plan, no new one
        self._ends: dict[int, float] = {}  # update -> clock at its end
        self._first_step_seconds = None
        self._begin = None

    @property
    def total_steps(self) -> int | None:
        return self.plan.total_steps if self.plan is not None else None

    # Resume: follow the recorded plan ----------------------------------------------------

    def resume(self, step: int) -> None:
        """At training's begin (from update `step`): follow the recorded plan, if any."""
        recorded = Plan.load(self.plan_path) if self.plan_path else None
        if recorded is None:
            return
        self.plan, self.following = recorded, True
        self._apply(recorded.segment_for(step + 1))
        logger.info(
            "Following the recorded plan: %d steps (%s)", recorded.total_steps, self.plan_path
        )

    def update_begins(self, step: int, now: float) -> None:
        """Update `step + 1` begins at `now`."""
        self._begin = now
        if self.following:  # switch segments exactly where the planning run did
            segment = self.plan.segment_for(step + 1)
            if segment.from_step == step + 1:
                self._apply(segment)

    # Planning ----------------------------------------------------------------------------

    def update_ends(self, step: int, now: float) -> bool:
        """Update `step` ended at `now`: measure, plan (or plan anew). Returns whether even
        the next update would end past the budget (then the run must stop now)."""
        if step in self._ends:
            return False
        if self._first_step_seconds is None and self._begin is not None:
            self._first_step_seconds = now - self._begin
        self._ends[step] = now
        if self.following:
            return False
        if self.plan is None:
            if len(self._ends) >= self.plan_after_steps:
                self._make_plan(step, now, first=True)
        elif step % self.replan_every == 0:
            self._make_plan(step, now, first=False)
        next_end = now - self.started + self._per_step() + self._reserve() if self.plan else 0
        return next_end > self.budget_seconds + 1e-6

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
        reserve = self.end_of_run.seconds(per_step, self._first_step_seconds or per_step)
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
        aim = left - self.hysteresis * self.tolerance * self.budget_seconds
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


# The work after training, as multiples of what the planner measures on the same machine (a
# step, the first update with its trace): fitted to the default command's phases
# (`python pipelines/train_wmt.py`; where its time goes:
# benchmarks/results/2026-11-25-benchmarks-history.md, "Where the whole command's time goes",
# and the reserve's check against a real end: benchmarks/results/2026-11-25-first-command-
# avx2-cap.md). Rerun that command and compare `plan.json`'s `reserve_seconds` with the log's
# times after training to refit them.
TEST_SECONDS_PER_SENTENCE_PER_STEP = 0.104  # beam 4, one test sentence, in steps
EXPORT_FIRST_STEPS = 3.6  # the export's traces and writes, in first updates (trace included)
FIXED_SECONDS = 10.0  # averaging, summary, the last validation pass; a margin


@dataclass(frozen=True)
class EndOfRun:
    """The work after training that a planned run keeps time for: averaging (always), beam
    search over `test_sentences`, the SavedModel export. Known before training starts (the
    Runner counts it); its seconds depend on the machine, measured while training
    (`seconds`)."""

    test_sentences: int = 0
    export: bool = False

    def seconds(self, seconds_per_step: float, first_step_seconds: float) -> float:
        """The predicted seconds of the run's end on a machine where an update takes
        `seconds_per_step` and the first update (its trace included) `first_step_seconds`."""
        test = TEST_SECONDS_PER_SENTENCE_PER_STEP * self.test_sentences * seconds_per_step
        export = EXPORT_FIRST_STEPS * first_step_seconds if self.export else 0.0
        return FIXED_SECONDS + test + export
