"""torchrun data parallelism: 2 CPU processes (gloo) for a few updates end with the
parameters of 1 process training on the union of their batches; rank 0 alone
logs and writes; a run started with 2 processes resumes."""

import json
import os
import subprocess
import sys

import pytest

from attnkit.config import config_from_dict, save_config
from attnkit.loading.model_dir import load_checkpoint
from attnkit.training.trainer import train
from checkpoints import assert_same_weights

pytestmark = pytest.mark.slow  # torchrun: several processes

STEPS = {"max_steps": 6, "eval_every": 3, "log_every": 2, "bleu_every": 0}


def _torchrun(cfg_path, *extra, nproc=2):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        "attnkit",
        "train",
        str(cfg_path),
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_two_processes_equal_one_process_on_the_combined_batches(reversal, toy_config, tmp_path, arch):
    single = tmp_path / "single"
    train(config_from_dict(toy_config(reversal, single, arch, accumulate=2, **STEPS)), quiet=True)

    double = tmp_path / "double"
    cfg_path = tmp_path / "cfg.yaml"
    save_config(config_from_dict(toy_config(reversal, double, arch, accumulate=1, **STEPS)), cfg_path)
    run = _torchrun(cfg_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "2 processes" in run.stderr

    assert_same_weights(double, single, atol=1e-5, key_bias_atol=1e-4)
    # rank 0 alone writes the log, with the whole update's tokens and loss
    log = lambda d: [json.loads(x) for x in (d / "log.jsonl").read_text().splitlines()]
    ours_log, ref_log = log(double), log(single)
    assert [r["kind"] for r in ours_log] == [r["kind"] for r in ref_log]
    for a, b in zip(ours_log, ref_log):
        if a["kind"] == "train":
            assert a["loss"] == pytest.approx(b["loss"], rel=1e-4)


def test_two_process_run_resumes(reversal, toy_config, tmp_path):
    out = tmp_path / "run"
    cfg_path = tmp_path / "cfg.yaml"
    save_config(config_from_dict(toy_config(reversal, out, "transformer", **STEPS)), cfg_path)
    first = _torchrun(cfg_path, "train.max_steps=3")
    assert first.returncode == 0, first.stderr[-3000:]
    assert load_checkpoint(out / "checkpoints" / "last.pt")["progress"]["step"] == 3
    second = _torchrun(cfg_path, "--resume")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed from" in second.stderr
    assert load_checkpoint(out / "checkpoints" / "last.pt")["progress"]["step"] == 6


def test_with_subword_sampling_every_rank_cuts_rank_0s_draw(tmp_path):
    import numpy as np

    from attnkit.data import BucketBatcher
    from attnkit.training.distributed import World, epoch_batches

    rng = np.random.default_rng(0)
    src = [list(rng.integers(4, 50, rng.integers(1, 30))) for _ in range(300)]
    tgt = [list(rng.integers(4, 50, rng.integers(1, 30))) for _ in range(300)]
    events = []

    class Rank(World):
        def barrier(self):
            events.append(("barrier", self.rank))

    def batcher(rank):
        def resample(epoch):  # every call draws differently, as sentencepiece's sampler does
            events.append(("draw", rank))
            return src, [t + [7] * int(rng.integers(0, 3)) for t in tgt]

        b = BucketBatcher(src, tgt, batch_tokens=256, seed=1, resample=resample, max_len=100)
        b.draws = tmp_path
        return b

    ranks = [(batcher(r), Rank(rank=r, size=2)) for r in (0, 1)]
    first, second = (epoch_batches(b, world, 3) for b, world in ranks)  # rank 0 passes the barrier first
    assert events == [("draw", 0), ("barrier", 0), ("barrier", 1)]  # rank 1 reads rank 0's draw
    assert ranks[0][0].tgt == ranks[1][0].tgt and any(len(a) > len(b) for a, b in zip(ranks[0][0].tgt, tgt))
    assert len(first) == len(second) and all(np.array_equal(a, b) for a, b in zip(first, second))
