"""When a run ends (`training.run_end.RunEnd`), a run planned to a time budget
(`training.budget`) and the decays it ends with (`training.schedule`): the rates against
NumPy's formulas, plans against the budget arithmetic on a fake clock, a resumed planner
against the uninterrupted one, and the step count and time limit in a real `fit`."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import keras
import numpy as np
import pytest

from keras_transformer.config import DEFAULT_TRAIN_STEPS, PLANNED_DECAY, TrainingConfig
from keras_transformer.training.budget import BudgetPlanner, EndOfRun, Plan, process_start_time
from keras_transformer.training.callbacks import PeriodicCheckpoint
from keras_transformer.training.run_control import RunControl
from keras_transformer.training.run_end import RunEnd
from keras_transformer.training.schedule import TransformerSchedule

D_MODEL, WARMUP = 128, 40


def _numpy_rate(decay, steps, total, anchor=WARMUP, at_anchor=0.0, fraction=0.2):
    """The module docstring's formulas: warm-up to the paper's peak, then the decay shape of
    p = p_anchor + (1 - p_anchor) (step - anchor) / (total - anchor + 1), clipped to [0, 1]."""
    steps = np.asarray(steps, np.float64)
    peak = D_MODEL**-0.5 * WARMUP**-0.5
    rise = np.minimum(steps / WARMUP, 1.0)
    rsqrt = np.minimum(np.sqrt(WARMUP / steps), 1.0)
    p = np.clip(at_anchor + (1 - at_anchor) * (steps - anchor) / (total - anchor + 1), 0, 1)
    shape = {
        "linear": 1 - p,
        "cosine": 0.5 * (1 + np.cos(np.pi * p)),
        "rsqrt_cooldown": rsqrt * np.minimum((1 - p) / fraction, 1.0),
        "rsqrt": rsqrt,
    }[decay]
    return peak * rise * shape


def _rates(schedule, steps):
    return np.array([float(schedule(step - 1)) for step in steps])  # iteration = step - 1


@pytest.mark.parametrize("decay", ["linear", "cosine", "rsqrt_cooldown", "rsqrt"])
def test_decay_shapes_equal_their_formulas(decay):
    schedule = TransformerSchedule(D_MODEL, WARMUP, total_steps=200, decay=decay)
    steps = np.arange(1, 230)
    np.testing.assert_allclose(
        _rates(schedule, steps), _numpy_rate(decay, steps, 200), rtol=2e-5, atol=1e-9
    )
    if decay != "rsqrt":
        assert float(schedule(199)) > 0 and float(schedule(200)) == 0.0  # step 200 is the last


@pytest.mark.parametrize("decay", ["linear", "cosine", "rsqrt_cooldown"])
def test_a_run_shorter_than_its_warmup_only_warms_up(decay):
    total = WARMUP // 2  # 20 steps of a 40-step warm-up (the rate was 0 at every step)
    schedule = TransformerSchedule(D_MODEL, WARMUP, total_steps=total, decay=decay)
    steps = np.arange(1, total + 1)
    warmup_only = D_MODEL**-0.5 * WARMUP**-1.5 * steps  # the paper's step * warmup^-1.5 part
    np.testing.assert_allclose(_rates(schedule, steps), warmup_only, rtol=2e-5)
    assert schedule.progress_at(total) == 0.0


@pytest.mark.parametrize("decay", ["linear", "cosine", "rsqrt_cooldown"])
def test_a_new_plan_goes_on_from_where_the_decay_stands(decay):
    schedule = TransformerSchedule(D_MODEL, WARMUP, total_steps=200, decay=decay)
    before = float(schedule(119))  # step 120 under the first plan
    p_120 = (120 - WARMUP) / (200 - WARMUP + 1)
    schedule.set_total_steps(150, from_step=120)
    assert float(schedule(119)) == pytest.approx(before, rel=1e-6)  # no jump
    assert schedule.plan_anchor() == pytest.approx((120.0, p_120))
    steps = np.arange(120, 160)
    expected = _numpy_rate(decay, steps, 150, anchor=120, at_anchor=p_120)
    np.testing.assert_allclose(_rates(schedule, steps), expected, rtol=2e-5, atol=1e-9)
    assert float(schedule(149)) > 0 and float(schedule(150)) == 0.0


def test_schedule_plan_survives_its_config():
    schedule = TransformerSchedule(D_MODEL, WARMUP, total_steps=90, decay="cosine")
    clone = TransformerSchedule.from_config(schedule.get_config())
    np.testing.assert_allclose(_rates(clone, range(1, 95)), _rates(schedule, range(1, 95)))
    with pytest.raises(ValueError, match="total_steps=None"):
        TransformerSchedule(D_MODEL, WARMUP, decay="linear")
    with pytest.raises(ValueError, match="decay='exp'"):
        TransformerSchedule(D_MODEL, WARMUP, total_steps=9, decay="exp")


class FakeRun:
    """Drives a `RunEnd` with `planner` as `RunControl` would, on a fake clock:
    `step_seconds(step)` per update, `pauses` {step: seconds} after an update (an evaluation).
    `totals`: the run's last step each time it changed."""

    def __init__(self, planner, clock_start, step_seconds, pauses=None, start_step=0,
                 record_rates=True):  # fmt: skip
        self.record_rates = record_rates
        self.now = clock_start
        self.planner = planner
        self.run_end = RunEnd(10**9, planner=planner, clock=lambda: self.now)
        self.step_seconds = step_seconds
        self.pauses = pauses or {}
        self.step = start_step
        self.model = SimpleNamespace(stop_training=False)
        self.rates, self.totals = {}, []

    def run(self, limit=10_000):
        self.run_end.begin(self.step)
        self._note_total()
        while not self.model.stop_training and self.step < limit:
            self.run_end.update_begins(self.step)
            if self.record_rates:
                self.rates[self.step + 1] = float(self.planner.schedule(self.step))
            self.now += self.step_seconds(self.step + 1)
            self.step += 1
            self.run_end.update_ends(self.step)
            self._note_total()
            if self.run_end.stopping:
                self.run_end.stop(self.model, self.step)
            self.now += self.pauses.get(self.step, 0.0)
        return self

    def _note_total(self):
        total = self.run_end.total_steps
        if total is not None and (not self.totals or self.totals[-1] != total):
            self.totals.append(total)


def _planner(tmp_path, budget=100.0, reserve=10.0, **kwargs):
    schedule = TransformerSchedule(D_MODEL, WARMUP, total_steps=10**6, decay="linear")
    end_of_run = SimpleNamespace(seconds=lambda per_step, first: reserve)
    return BudgetPlanner(budget, 0.0, schedule, str(tmp_path / "plan.json"), end_of_run, **kwargs)


def test_plan_fits_the_budget_and_records_itself(tmp_path):
    planner = _planner(tmp_path, plan_after_steps=10, replan_every=10)
    run = FakeRun(planner, clock_start=5.0, step_seconds=lambda s: 0.2).run()
    assert run.run_end.stopped_by == "steps"
    # at the end of update 10: 5 s start-up + 10 * 0.2 s spent, 10 s kept for the end
    expected = 10 + 410  # int((100 - 7 - 10 - 1) / 0.2): it aims half the 2% band early
    assert run.totals[0] == expected == run.step
    plan = Plan.load(str(tmp_path / "plan.json"))
    assert plan.total_steps == expected and plan.segments[0].from_step == 11
    assert plan.segments[0].seconds_per_step == pytest.approx(0.2)
    assert run.now + 10.0 <= 100.0 + 1e-9  # the end of the run fits
    np.testing.assert_allclose(  # the rate decays to zero at the planned end
        [run.rates[s] for s in (20, 200, expected)],
        _numpy_rate("linear", [20, 200, expected], expected),
        rtol=2e-5,
    )


def test_a_slower_machine_gets_a_shorter_plan_within_the_budget(tmp_path):
    planner = _planner(tmp_path, plan_after_steps=10, replan_every=20)
    run = FakeRun(planner, 5.0, step_seconds=lambda s: 0.2 if s <= 100 else 0.4).run()
    first, last = run.totals[0], run.totals[-1]
    assert len(run.totals) >= 2 and last < first and run.step == last
    assert run.now + 10.0 <= 100.0 + 1e-9
    rates = np.array([run.rates[s] for s in range(1, last + 1)])
    assert np.all(np.abs(np.diff(rates[WARMUP:])) < rates.max() / 50)  # no jump when replanned
    assert 0 < rates[-1] < rates.max() / 20


def test_recurring_evaluations_count_in_the_plan(tmp_path):
    pauses = {step: 3.0 for step in range(50, 1000, 50)}  # 3 s every 50 updates: +0.06 s/step
    planner = _planner(tmp_path, budget=200.0, plan_after_steps=10, replan_every=10)
    run = FakeRun(planner, 5.0, step_seconds=lambda s: 0.2, pauses=pauses).run()
    assert run.now + 10.0 <= 200.0 + 1e-9
    assert run.step > 0.9 * (200.0 - 5.0 - 10.0) / 0.26  # and it does not waste the budget
    assert run.run_end.stopped_by == "steps"  # the plan ended it, not the hard stop


def test_a_resumed_run_follows_the_recorded_plan(tmp_path):
    def seconds(step):
        return 0.2 if step <= 100 else 0.35

    os.makedirs(tmp_path / "a")
    planner = _planner(tmp_path / "a", plan_after_steps=10, replan_every=20)
    uninterrupted = FakeRun(planner, 5.0, seconds).run()
    plan = Plan.load(str(tmp_path / "a" / "plan.json"))
    assert len(plan.segments) >= 2  # it planned anew on the slower machine
    # A second process resumes at step 120 (a checkpoint) with the plan on disk, on a much
    # faster machine: it neither plans again nor changes the rates.
    os.makedirs(tmp_path / "b")
    plan.save(str(tmp_path / "b" / "plan.json"))
    resumed = FakeRun(_planner(tmp_path / "b"), 0.0, lambda s: 0.01, start_step=120)
    resumed.run()
    assert resumed.step == plan.total_steps and resumed.totals == [plan.total_steps]
    steps = range(121, plan.total_steps + 1)
    np.testing.assert_allclose(
        [resumed.rates[s] for s in steps], [uninterrupted.rates[s] for s in steps], rtol=1e-6
    )


def test_the_end_of_run_prediction_grows_with_the_work():
    base = EndOfRun().seconds(0.2, 8.0)
    test = EndOfRun(test_sentences=1000)
    assert test.seconds(0.2, 8.0) > base
    assert test.seconds(0.4, 8.0) > test.seconds(0.2, 8.0)
    assert EndOfRun(export=True).seconds(0.2, 8.0) > base


def test_process_start_time_is_before_now():
    started = process_start_time()
    assert time.time() - 3600 * 24 < started <= time.time()


def test_training_config_plans_only_without_train_steps():
    default = TrainingConfig()
    assert default.planned() and default.budget_seconds() == 600.0
    assert default.resolved_decay() == PLANNED_DECAY
    explicit = TrainingConfig.from_flat(train_steps=300)
    assert not explicit.planned() and explicit.step_limit() == 300
    assert explicit.resolved_decay() == "rsqrt"  # today's behaviour
    assert not TrainingConfig.from_flat(model="tiny").planned()
    assert TrainingConfig.from_flat(model="tiny").step_limit() == DEFAULT_TRAIN_STEPS
    assert TrainingConfig.from_flat(model="base", time_budget_minutes=30).budget_seconds() == 1800
    assert not TrainingConfig.from_flat(time_budget_minutes=0).planned()
    with pytest.raises(ValueError, match="time_budget_minutes=-1"):
        TrainingConfig.from_flat(time_budget_minutes=-1)
    with pytest.raises(ValueError, match="strategy='multi_worker'"):
        TrainingConfig.from_flat(strategy="multi_worker", time_budget_minutes=5)
    # Under multi_worker the quick preset keeps today's 2000 steps (one process plans).
    assert TrainingConfig.from_flat(strategy="multi_worker").step_limit() == DEFAULT_TRAIN_STEPS


def _noisy_run(tmp_path, seed: int, hysteresis: float):
    """A 10-minute run on a simulated 2-core VM: 0.15 s a step with a slow load drift of
    +-6% and 8% jitter, an evaluation pause every 500 steps; returns (plans, unused seconds,
    whether the budget's hard stop ended it)."""
    rng = np.random.default_rng(seed)
    n = 6000
    drift = 1 + 0.06 * np.sin(np.arange(n) / rng.uniform(300, 900) + rng.uniform(0, 6))
    times = 0.15 * drift * rng.lognormal(0, 0.08, n)
    planner = _planner(
        tmp_path / f"{seed}-{hysteresis}", budget=600.0, reserve=50.0, plan_after_steps=100,
        replan_every=100, hysteresis=hysteresis,
    )  # fmt: skip
    os.makedirs(tmp_path / f"{seed}-{hysteresis}")
    pauses = {step: 1.5 for step in range(500, n, 500)}
    run = FakeRun(planner, 60.0, lambda s: times[s - 1], pauses, record_rates=False).run()
    hard_stop = run.run_end.stopped_by == "budget"
    return len(planner.plan.segments), 600.0 - (run.now + 50.0), hard_stop


def test_a_noisy_machine_replans_less_with_hysteresis(tmp_path):
    # 40 seeds of this simulation: 11.4 plans and 2 hard stops without (HYSTERESIS 0), 6.3
    # plans, no hard stop and 5.4 s unused (0.9%) with 0.5 (0.25: 7.3 plans, 1 hard stop).
    seeds = range(4)
    without = [_noisy_run(tmp_path, s, 0.0) for s in seeds]
    with_ = [_noisy_run(tmp_path, s, 0.5) for s in seeds]
    assert sum(p for p, _, _ in with_) < 0.8 * sum(p for p, _, _ in without)
    assert not any(stop for _, _, stop in with_)  # the plan ends the run, not the hard stop
    assert all(0.0 <= unused <= 0.02 * 600.0 for _, unused, _ in with_)  # within the band


class _Pause:
    """A `RunControl` evaluator that only spends `seconds` of the fake clock `now` after
    update `at`, and asks to stop after update `stop_after` (None: never)."""

    every_steps = 1

    def __init__(self, now, at=0, seconds=0.0, stop_after=None):
        self.now, self.at, self.seconds, self.stop_after = now, at, seconds, stop_after
        self.step = 0

    def start(self):
        pass

    def evaluate(self, model, step):
        self.step = step
        if step == self.at:
            self.now[0] += self.seconds
        return {"step": step}

    def should_stop(self):
        return self.stop_after is not None and self.step >= self.stop_after


def _fit(tmp_path, run_end, evaluator, now) -> int:
    """`fit` of 64 one-example batches under `RunControl(run_end, ...)`, each update lasting
    1 s of the fake clock `now`; returns the updates made."""

    class Step(keras.callbacks.Callback):  # before the run control: the update's second
        def on_train_batch_end(self, batch, logs=None):
            now[0] += 1.0

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    checkpoint = PeriodicCheckpoint(str(tmp_path), every_steps=1000, every_minutes=60, keep=1)
    control = RunControl(run_end, checkpoint, evaluator=evaluator)
    x = np.zeros((64, 2), "float32")
    model.fit(x, x[:, :1], batch_size=1, epochs=1, verbose=0, callbacks=[Step(), control])
    return int(model.optimizer.iterations.numpy())


def _steps_under_time_limit(tmp_path, limit: float, pause_after_step: int, pause: float) -> int:
    now = [0.0]
    run_end = RunEnd(1000, time_limit_seconds=limit, clock=lambda: now[0])
    steps = _fit(tmp_path, run_end, _Pause(now, pause_after_step, pause), now)
    assert run_end.stopped_by == "time_limit" and run_end.stopped_at_step == steps
    return steps


def test_time_limit_stops_before_the_update_that_would_end_past_it(tmp_path):
    # 1 s updates, limit 10 s: update 9 ends at 9 s; a 10th would end at 10 s, the limit.
    assert _steps_under_time_limit(tmp_path, 10.0, pause_after_step=0, pause=0.0) == 9
    # A 3 s evaluation after update 2 counts in the elapsed time, not as update time: update
    # 6 ends at 9 s.
    assert _steps_under_time_limit(tmp_path, 10.0, pause_after_step=2, pause=3.0) == 6
    # Limits 10.5 and 11: a 7th update ends at 10 s, an 8th would end at 11 s; 11.5: 8.
    assert _steps_under_time_limit(tmp_path, 10.5, pause_after_step=2, pause=3.0) == 7
    assert _steps_under_time_limit(tmp_path, 11.0, pause_after_step=2, pause=3.0) == 7
    assert _steps_under_time_limit(tmp_path, 11.5, pause_after_step=2, pause=3.0) == 8


def test_run_end_stops_at_its_last_step_or_when_the_evaluation_asks(tmp_path):
    now = [0.0]
    run_end = RunEnd(5, clock=lambda: now[0])
    assert _fit(tmp_path / "a", run_end, None, now) == 5 and run_end.stopped_by == "steps"
    early = RunEnd(50, time_limit_seconds=1000.0, clock=lambda: now[0])
    assert _fit(tmp_path / "b", early, _Pause(now, stop_after=3), now) == 3
    assert (early.stopped_by, early.stopped_at_step) == ("early_stopping", 3)
    with pytest.raises(ValueError, match="reason='tired'"):
        early.request("tired", 4)
    with pytest.raises(ValueError, match="last_step=0"):
        RunEnd(0)


def test_agreement_tells_each_flag_apart():
    """One all-reduce of both flags (a stop, a signal) per update; each comes back as raised
    by any replica (here one: the plumbing; several workers: tests/test_multi_worker.py)."""
    import tensorflow as tf

    from keras_transformer.training.run_control import Agreement

    agree = Agreement(tf.distribute.get_strategy())
    for flags in ((False, False), (True, False), (False, True), (True, True)):
        assert agree(*flags) == flags
