import math

import pytest
import torch

from attnkit.config import TrainConfig
from attnkit.training import build_optimizer, build_scheduler, lr_multiplier


def test_inverse_sqrt_warmup_then_decay():
    f = lambda s: lr_multiplier(s, schedule="inverse_sqrt", warmup=100, max_steps=1000)  # noqa: E731
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
