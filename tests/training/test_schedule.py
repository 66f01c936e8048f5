import math

import pytest
import torch

from attnkit.config import TrainConfig
from attnkit.training import build_optimizer, build_scheduler, lr_multiplier


def test_inverse_sqrt_warmup_then_decay():
    f = lambda s: lr_multiplier(s, schedule="inverse_sqrt", warmup=100, max_steps=1000)
    assert f(50) == pytest.approx(0.5)
    assert f(100) == pytest.approx(1.0)
    assert f(400) == pytest.approx(math.sqrt(100 / 400))


@pytest.mark.parametrize("name,end", [("linear", 0.0), ("cosine", 0.0), ("constant", 1.0)])
def test_other_schedules_end(name, end):
    assert lr_multiplier(1000, schedule=name, warmup=10, max_steps=1000) == pytest.approx(end, abs=1e-9)
    assert lr_multiplier(10, schedule=name, warmup=10, max_steps=1000) == pytest.approx(1.0)


def test_scheduler_drives_the_optimizer_and_names_errors():
    cfg = TrainConfig(lr=0.01, warmup=4)
    p = torch.nn.Parameter(torch.zeros(2))
    opt = build_optimizer(cfg, [p])
    sched = build_scheduler(cfg, opt)
    for _ in range(2):
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01 * 2 / 4)
    with pytest.raises(ValueError, match="unknown train.schedule 'noam'"):
        build_scheduler(TrainConfig(schedule="noam"), opt)
    with pytest.raises(ValueError, match="unknown train.optimizer 'sgd'"):
        build_optimizer(TrainConfig(optimizer="sgd"), [p])


def test_time_fraction_drives_decay_when_ahead_of_the_steps():
    f = lambda s, t: lr_multiplier(s, schedule="cosine", warmup=10, max_steps=10_000, time_fraction=t)
    assert f(5, 0.9) == pytest.approx(0.5)  # still warming up: warm-up is in steps
    assert f(100, 0.5) == pytest.approx(0.5)  # half the budget: half-way down the cosine
    assert f(100, 1.2) == pytest.approx(0.0, abs=1e-12)
    assert f(9_000, 0.0) == pytest.approx(lr_multiplier(9_000, schedule="cosine", warmup=10, max_steps=10_000))


def test_time_schedule_follows_the_clock_and_needs_a_budget():
    cfg = TrainConfig(lr=1.0, warmup=0, schedule="linear", max_steps=10**6, max_minutes=1.0, time_schedule=True)
    seconds = [0.0]
    p = torch.nn.Parameter(torch.zeros(1))
    opt = build_optimizer(cfg, [p])
    sched = build_scheduler(cfg, opt, clock=lambda: seconds[0])
    seconds[0] = 45.0
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="time_schedule needs train.max_minutes > 0"):
        build_scheduler(TrainConfig(time_schedule=True), opt, clock=lambda: 0.0)
