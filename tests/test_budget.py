"""A run planned to a time budget (`training.budget`) and the decays it ends with
(`training.schedule`): the rates against NumPy's formulas, plans against the budget
arithmetic on a fake clock, and a resumed planner against the uninterrupted one."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import keras
import numpy as np
import pytest

from keras_transformer.config import DEFAULT_TRAIN_STEPS, PLANNED_DECAY, TrainingConfig
from keras_transformer.training.budget import (
    BudgetPlanner,
    Plan,
    end_of_run_seconds,
    process_start_time,
)
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
    """Drives a `BudgetPlanner` as `model.fit` would, on a fake clock: `step_seconds(step)`
    per update, `pauses` {step: seconds} after an update (an evaluation)."""

    def __init__(self, planner, clock_start, step_seconds, pauses=None, start_step=0,
                 record_rates=True):  # fmt: skip
        self.record_rates = record_rates
        self.now = clock_start
        self.planner = planner
        self.step_seconds = step_seconds
        self.pauses = pauses or {}
        self.model = SimpleNamespace(
            optimizer=SimpleNamespace(iterations=keras.Variable(start_step, dtype="int64")),
            stop_training=False,
        )
        planner.clock = lambda: self.now
        planner.set_model(self.model)
        self.rates = {}

    def run(self, limit=10_000):
        self.planner.on_train_begin()
        while not self.model.stop_training and self.step < self.stop_at and self.step < limit:
            self.planner.on_train_batch_begin(0)
            iteration = self.step
            if self.record_rates:
                self.rates[iteration + 1] = float(self.planner.schedule(iteration))
            self.now += self.step_seconds(iteration + 1)
            self.model.optimizer.iterations.assign(iteration + 1)
            self.planner.on_train_batch_end(0)
            self.now += self.pauses.get(self.step, 0.0)
        return self

    @property
    def step(self):
        return int(self.model.optimizer.iterations.numpy())

    @property
    def stop_at(self):  # `StopAtStep` at the planned last step
        return self.planner.totals[-1] if self.planner.totals else 10**9


def _planner(tmp_path, budget=100.0, reserve=10.0, **kwargs):
    schedule = TransformerSchedule(D_MODEL, WARMUP, total_steps=10**6, decay="linear")
    totals = []
    planner = BudgetPlanner(
        budget, 0.0, schedule, totals.append, str(tmp_path / "plan.json"),
        lambda per_step, first: reserve, **kwargs,
    )  # fmt: skip
    planner.totals = totals
    return planner


def test_plan_fits_the_budget_and_records_itself(tmp_path):
    planner = _planner(tmp_path, plan_after_steps=10, replan_every=10)
    run = FakeRun(planner, clock_start=5.0, step_seconds=lambda s: 0.2).run()
    # at the end of update 10: 5 s start-up + 10 * 0.2 s spent, 10 s kept for the end
    expected = 10 + 410  # int((100 - 7 - 10 - 1) / 0.2): it aims half the 2% band early
    assert planner.totals[0] == expected == run.step
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
    first, last = planner.totals[0], planner.totals[-1]
    assert len(planner.totals) >= 2 and last < first and run.step == last
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
    assert planner.stopped_by_budget_at_step is None  # the plan ended it, not the hard stop


def test_a_resumed_run_follows_the_recorded_plan(tmp_path):
    def seconds(step):
        return 0.2 if step <= 100 else 0.35

    uninterrupted = FakeRun(_planner(tmp_path / "a"), 5.0, seconds)
    os.makedirs(tmp_path / "a")
    uninterrupted.planner.plan_after_steps, uninterrupted.planner.replan_every = 10, 20
    uninterrupted.run()
    plan = Plan.load(str(tmp_path / "a" / "plan.json"))
    assert len(plan.segments) >= 2  # it planned anew on the slower machine
    # A second process resumes at step 120 (a checkpoint) with the plan on disk, on a much
    # faster machine: it neither plans again nor changes the rates.
    os.makedirs(tmp_path / "b")
    plan.save(str(tmp_path / "b" / "plan.json"))
    resumed = FakeRun(_planner(tmp_path / "b"), 0.0, lambda s: 0.01, start_step=120)
    resumed.run()
    assert resumed.step == plan.total_steps and resumed.planner.totals == [plan.total_steps]
    steps = range(121, plan.total_steps + 1)
    np.testing.assert_allclose(
        [resumed.rates[s] for s in steps], [uninterrupted.rates[s] for s in steps], rtol=1e-6
    )


def test_the_end_of_run_prediction_grows_with_the_work():
    base = end_of_run_seconds(0.2, 8.0)
    assert end_of_run_seconds(0.2, 8.0, test_sentences=1000) > base
    assert end_of_run_seconds(0.4, 8.0, test_sentences=1000) > end_of_run_seconds(
        0.2, 8.0, test_sentences=1000
    )
    assert end_of_run_seconds(0.2, 8.0, export=True) > base


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


def _noisy_run(tmp_path, seed: int, hysteresis: float, monkeypatch):
    """A 10-minute run on a simulated 2-core VM: 0.15 s a step with a slow load drift of
    +-6% and 8% jitter, an evaluation pause every 500 steps; returns (plans, unused seconds,
    hard stop)."""
    from keras_transformer.training import budget

    monkeypatch.setattr(budget, "HYSTERESIS", hysteresis)
    rng = np.random.default_rng(seed)
    n = 6000
    drift = 1 + 0.06 * np.sin(np.arange(n) / rng.uniform(300, 900) + rng.uniform(0, 6))
    times = 0.15 * drift * rng.lognormal(0, 0.08, n)
    planner = _planner(
        tmp_path / f"{seed}-{hysteresis}", budget=600.0, reserve=50.0, plan_after_steps=100,
        replan_every=100,
    )  # fmt: skip
    os.makedirs(tmp_path / f"{seed}-{hysteresis}")
    pauses = {step: 1.5 for step in range(500, n, 500)}
    run = FakeRun(planner, 60.0, lambda s: times[s - 1], pauses, record_rates=False).run()
    return len(planner.totals), 600.0 - (run.now + 50.0), planner.stopped_by_budget_at_step


def test_a_noisy_machine_replans_less_with_hysteresis(tmp_path, monkeypatch):
    # 40 seeds of this simulation: 11.4 plans and 2 hard stops without (HYSTERESIS 0), 6.3
    # plans, no hard stop and 5.4 s unused (0.9%) with 0.5 (0.25: 7.3 plans, 1 hard stop).
    seeds = range(4)
    without = [_noisy_run(tmp_path, s, 0.0, monkeypatch) for s in seeds]
    with_ = [_noisy_run(tmp_path, s, 0.5, monkeypatch) for s in seeds]
    assert sum(p for p, _, _ in with_) < 0.8 * sum(p for p, _, _ in without)
    assert all(stop is None for _, _, stop in with_)  # the plan ends the run, not the hard stop
    assert all(0.0 <= unused <= 0.02 * 600.0 for _, unused, _ in with_)  # within the band
