"""Training loop: batches -> model -> label-smoothed loss -> optimizer, with
validation (loss and greedy BLEU), early stopping, checkpoints and resume.

The loop knows nothing about the model beyond ``forward(src, src_mask, tgt_in)``
and the search interface used for validation, nor about the data: the task
(``tasks.py``: translation or captioning) supplies data, vocabulary, batches,
model and dev scores. Resuming restores the model,
optimizer, schedule, RNG states and the data position (epoch, batch), so a run
killed at any moment and resumed ends with the same parameters as one that
never stopped. Beside it: ``checkpoint`` (the state saved and restored), ``runlog``
(the log, where the run is, stop signals), ``start`` (train.init_from and the
teacher), ``distillation`` (the teacher's words), ``distributed`` (processes and
each rank's batches).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import Tensor

from ..atomic import remove_stale
from ..config import Config, check_config, config_from_dict, resume_changes, save_config
from ..data import Batch, BucketBatcher
from ..data.tokenizer import PAD
from ..loading.model_dir import ModelDir, load_checkpoint, resolve_device
from ..search import greedy_search
from . import distributed
from .checkpoint import restore_state, save_state, save_weights
from .distillation import TABLE, TeacherWords, load_teacher, write_teacher_words
from .flops import device_peak, update_flops
from .loss import LossSums, projected_label_smoothed_loss, rdrop_loss
from .runlog import Progress, RunLog, StopRequest, Window
from .schedule import build_optimizer, build_scheduler
from .start import starting_point, teacher_for
from .tasks import TranslationTask, make_task

if TYPE_CHECKING:
    from torch.nn.parallel import DistributedDataParallel

    from ..data import ImageBatcher


class Trainer:
    def __init__(
        self,
        cfg: Config,
        *,
        resume: bool = False,
        progress_bar: bool | None = None,
        quiet: bool = False,
        resumable: bool = True,
    ) -> None:
        self.md = ModelDir(Path(cfg.out_dir))
        if self.md.path.exists() and not self.md.path.is_dir():
            raise NotADirectoryError(f"out_dir {self.md.path} is a file; a training run writes a directory")
        self.changes: list[tuple[str, Any, Any]] = []  # what a resumed run changes, applied in _prepare
        self.resumable = resumable  # an interrupted run says how to continue it
        if resume:
            if not self.md.has_run():
                raise FileNotFoundError(f"nothing to resume in {self.md.path} (no checkpoints/last.pt)")
            saved = load_checkpoint(self.md.last)
            before = config_from_dict(saved["config"])
            if before.train.init_from or before.train.teacher:
                # the run took another model's vocabulary: the command's own tokenizer keys never applied
                cfg.tokenizer = dataclasses.replace(before.tokenizer, sampling=cfg.tokenizer.sampling)
            self.changes = resume_changes(saved["config"], cfg)
        elif self.md.has_run():
            raise ValueError(
                f"{self.md.path} already holds a training run; continue it with --resume or choose another out_dir"
            )
        check_config(cfg, training=True)
        # checked before anything is written: a bad init_from leaves no out_dir behind
        self.start = starting_point(cfg) if cfg.train.init_from and not resume else None
        self.teacher = teacher_for(cfg, self.start, kept=resume and (self.md.path / TABLE).exists())
        self.teacher_words: TeacherWords | None = None
        self._bar = None
        self.cfg = cfg
        self.resume_state = saved if resume else None
        self.world, self.device = distributed.setup(resolve_device(cfg.train.device))
        self._started: float | None = None  # perf_counter() at which training time began
        self.quiet = quiet or not self.world.main  # one voice: rank 0's
        self.progress_bar = sys.stderr.isatty() if progress_bar is None else progress_bar

    def say(self, msg: str) -> None:
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.write(msg, file=sys.stderr)  # above the live bar, not through it
        else:
            print(msg, file=sys.stderr, flush=True)

    # ----------------------------------------------------------------- setup
    def _prepare(self) -> None:
        cfg = self.cfg
        torch.manual_seed(cfg.train.seed)
        self.task = make_task(cfg)
        if self.world.main:
            self.md.path.mkdir(parents=True, exist_ok=True)
            self.md.checkpoints.mkdir(exist_ok=True)
            for directory in (self.md.path, self.md.checkpoints, self.md.snapshots, self.md.path / "subwords"):
                # left by a run killed mid-write
                remove_stale(directory)
        self._vocabulary()
        self.batcher: BucketBatcher | ImageBatcher
        self.batcher, described = self.task.batcher()
        if (sampled := distributed.sampling(self.batcher)) is not None:
            sampled.draws = self.md.path / "subwords"  # each epoch's sampled segmentation
        self.say(described)
        if cfg.train.teacher:
            self.teacher_words = self._teacher_words()
        self.model = self.task.build_model().to(self.device)
        if self.start is not None:
            self.model.load_state_dict(self.start.weights)
        self.optimizer = build_optimizer(cfg.train, self.model.parameters())
        self.state = Progress()
        self.scheduler = build_scheduler(cfg.train, self.optimizer, clock=self._train_seconds)
        if self.resume_state is not None:
            self._resume(self.resume_state)
        self.ddp = distributed.wrap(self.model, self.world, self.device)  # the model, or DDP around it
        self.trained: Callable[..., Any] = self.ddp  # what the training step calls
        if cfg.train.compile:  # compiled graphs are cached on disk by inductor, so a resumed run starts faster
            self.trained = torch.compile(self.ddp, dynamic=True)
        n_params = sum(p.numel() for p in self.model.parameters())
        where = f", {self.world.size} processes" if self.world.distributed else ""
        self.say(f"model: {cfg.model.arch}, {n_params / 1e6:.2f}M parameters, device {self.device}{where}")
        # MFU's ceiling, measured here: each rank's float32 matmul rate (see training/flops.py)
        # where the batches' sentence lengths and a formula for the model give an update's FLOPs
        counted = isinstance(self.batcher, BucketBatcher) and update_flops(cfg.model, [1], [1], 1) is not None
        self.peak = device_peak(self.device) if counted else None
        if self.peak is not None:
            self.say(f"float32 matmul peak: {self.peak / 1e9:.0f} GFLOP/s per process (the MFU logged is against it)")

    def _vocabulary(self) -> None:
        """The run's vocabulary: train.init_from's or the teacher's (the student learns its
        words), else made from the training data by rank 0; every rank reads it back."""
        cfg, start, teacher = self.cfg, self.start, self.teacher
        if self.resume_state is None and self.world.main:
            if start is not None:
                # its vocabulary, so the config says what the run used; the sampling is this run's
                cfg.tokenizer = dataclasses.replace(start.tokenizer, sampling=cfg.tokenizer.sampling)
                start.vocabulary.save(self.md.path)
                self.say(f"starting from {cfg.train.init_from}: its vocabulary and weights")
            elif teacher is not None:
                cfg.tokenizer = dataclasses.replace(teacher.tokenizer_config, sampling=cfg.tokenizer.sampling)
                teacher.tokenizer.save(self.md.path)
                self.say(f"the vocabulary of the teacher, {cfg.train.teacher}")
            else:
                self.task.make_vocabulary(self.md.path)
            save_config(cfg, self.md.config_path)
        self.world.barrier()  # the other ranks read the vocabulary rank 0 made
        made_here = start is None and teacher is None
        if self.resume_state is not None or not made_here or not self.world.main:
            self.task.load_vocabulary(self.md.path)

    def _resume(self, saved: dict) -> None:
        """The state of the interrupted run put back, with the settings the command changes."""
        self.state = restore_state(saved, self.model, self.optimizer, self.scheduler)
        self._apply_changes()
        if self.world.main:  # snapshots a killed run took after its last checkpoint are taken again
            for step, path in self.md.snapshot_files():
                if step > self.state.step:
                    path.unlink()
        kept = ""
        if (sampled := distributed.sampling(self.batcher)) is not None:
            draw = sampled.kept_draw(self.state.epoch)
            kept = f"; its subword draw read back from {draw}" if draw else "; its subwords drawn anew"
        self.say(
            f"resumed from {self.md.last} at step {self.state.step} "
            f"(epoch {self.state.epoch}, batch {self.state.batch}{kept})"
        )

    def _apply_changes(self) -> None:
        """Settings changed on resume: the optimizer's own (lr, weight decay) are set in its
        restored state; the others take effect through the config. One line each."""
        tc = self.cfg.train
        for key, old, new in self.changes:
            self.say(f"resume: {key} {old} -> {new}")
        keys = {key for key, _, _ in self.changes}
        if "train.lr" in keys:
            self.scheduler.base_lrs = [tc.lr for _ in self.optimizer.param_groups]
            for group, factor in zip(self.optimizer.param_groups, self.scheduler.lr_lambdas):
                group["initial_lr"], group["lr"] = tc.lr, tc.lr * factor(self.scheduler.last_epoch)
        if "train.weight_decay" in keys:
            for group in self.optimizer.param_groups:
                group["weight_decay"] = tc.weight_decay

    # ------------------------------------------------------------ checkpoints
    def _save(self) -> None:
        save_state(self.md.last, self.model, self.optimizer, self.scheduler, self.state, self.cfg.to_dict())
        if (sampled := distributed.sampling(self.batcher)) is not None:  # a resumed run starts in this epoch
            sampled.prune_draws(self.state.epoch)

    # ------------------------------------------------------------- validation
    @torch.inference_mode()
    def validate(self, final: bool = False, *, bleu: bool | None = None) -> dict[str, Any]:
        """Dev loss and perplexity; greedy BLEU at every ``bleu_every``-th validation and the final
        one (``bleu``: with or without it, whatever the schedule says)."""
        model, cfg = self.model, self.cfg
        was_training = model.training
        model.eval()
        loss_sum = nll_sum = 0.0
        tokens = 0
        hyps: list[list[int]] = [[] for _ in range(self.task.dev_size)]
        want_bleu = cfg.train.bleu_every > 0 and (final or len(self.state.history) % cfg.train.bleu_every == 0)
        if bleu is not None:
            want_bleu = bleu
        for batch in self.task.dev_batches():
            batch = batch.to(self.device)
            sums = self._loss(model, batch)
            if want_bleu:
                with self._autocast():
                    out = greedy_search(model, batch.src, batch.src_mask, self.task.search_options)
                    for i, toks in zip(batch.indices, out.best):
                        hyps[i] = toks
            loss_sum += float(sums.loss)
            nll_sum += float(sums.nll)
            tokens += int(sums.tokens)
        result: dict[str, Any] = {"dev_loss": loss_sum / tokens, "dev_ppl": math.exp(min(nll_sum / tokens, 50))}
        if want_bleu:
            result.update(self.task.score(hyps))
        model.train(was_training)
        return result

    def early_snapshot_steps(self) -> set[int]:
        """Steps before the first validation that also take a snapshot (with the dev loss, no BLEU):
        0, and eval_every / 8, / 4, / 2. Attention forms early, so a figure of log-spaced steps
        needs them."""
        if not self.cfg.train.attention_snapshots:
            return set()
        every = self.cfg.train.eval_every
        return {0} | {every // d for d in (8, 4, 2) if every // d >= 1}

    def _snapshot(self, result: dict[str, Any]) -> None:
        """Every attention map of the first ``train.attention_snapshots`` dev sentences, teacher-forced
        on their references so that every step has the same rows, saved as snapshots/step_N.npz
        (read by `attnkit view RUN_DIR` and `attnkit plot RUN_DIR --steps`). Uses no randomness."""
        from ..inspection.capture import capture, model_info, save_records

        n, m = self.cfg.train.attention_snapshots, self.cfg.model
        window = m.local_window
        was_training = self.model.training
        try:
            task = self.task
            assert isinstance(task, TranslationTask)  # check_config: a captioning run takes no snapshots
            dev = task.dev
            records = capture(self.model, task.tok, dev.src[:n], targets=dev.tgt[:n], window=window)
        finally:
            self.model.train(was_training)
        info = {
            **model_info(self.model, self.cfg),
            "step": self.state.step,
            **{k: round(v, 4) for k, v in result.items() if k in ("dev_loss", "dev_bleu")},
        }
        self.md.snapshots.mkdir(exist_ok=True)
        save_records(self.md.snapshots / f"step_{self.state.step}.npz", records, info)

    def _teacher_words(self) -> TeacherWords:
        """The teacher's words at every target position of the training pairs: computed once by
        rank 0 and kept in the run's directory (a resumed run reads them back)."""
        cfg, path = self.cfg, self.md.path / TABLE
        batcher = self.batcher
        task = self.task
        # check_config: a teacher teaches translation only
        assert isinstance(batcher, BucketBatcher) and isinstance(task, TranslationTask)
        if self.world.main and (self.resume_state is None or not path.exists()):  # a new run asks afresh
            teacher = self.teacher or load_teacher(cfg.train.teacher)  # a resumed run stopped before its table
            if not teacher.tokenizer.same_as(task.tok):
                raise ValueError(
                    f"train.teacher={cfg.train.teacher} has another vocabulary or target order "
                    f"(tokenizer.right_to_left) than {self.md.path}"
                )
            write_teacher_words(
                teacher,
                batcher.src,
                batcher.tgt,
                path,
                top=cfg.train.teacher_top,
                batch_tokens=cfg.train.batch_tokens,
                device=self.device,
                say=self.say,
            )
        self.teacher = None  # the models are not needed again
        self.world.barrier()  # the other ranks read the table rank 0 wrote
        words = TeacherWords.load(path)
        if not words.fits(batcher.tgt):
            raise ValueError(f"{path} holds the teacher's words of other pairs than this run's: remove it")
        return words

    def _loss(self, model: Callable[..., Any], batch: Batch, taught: bool = False) -> LossSums:
        """Teacher-forced loss with the output projection fused into it (see training/loss.py).
        ``model`` is the bare model or its DistributedDataParallel wrapper; ``taught``: a batch of
        the training pairs, learned from the teacher's words too when the run has a teacher."""
        assert batch.tgt_out is not None  # training and dev batches have targets
        teacher = None
        if taught and self.teacher_words is not None:
            ids, probs = self.teacher_words.rows(batch.indices)
            teacher = (ids.to(self.device), probs.to(self.device))
        tc = self.cfg.train
        with self._autocast():
            if taught and tc.rdrop > 0:  # the batch twice in one pass: two dropout masks
                twice = [None if x is None else torch.cat([x, x]) for x in (batch.src, batch.src_mask, batch.tgt_in)]
                out = model(*twice, project=False)
                return rdrop_loss(
                    out.hidden,
                    self.model.output_projection.weight,
                    batch.tgt_out,
                    smoothing=tc.label_smoothing,
                    pad_id=PAD,
                    alpha=tc.rdrop,
                )
            out = model(batch.src, batch.src_mask, batch.tgt_in, project=False)
            return projected_label_smoothed_loss(
                out.hidden,
                self.model.output_projection.weight,
                batch.tgt_out,
                smoothing=tc.label_smoothing,
                pad_id=PAD,
                teacher=teacher,
                teacher_weight=tc.teacher_weight,
            )

    def _train_seconds(self) -> float:
        """Seconds since training started (across resumes; validation pauses included, as in
        train.max_minutes), for a time-budgeted schedule."""
        if self._started is None:  # not training yet (the scheduler asks while it is built)
            return self.state.train_seconds
        return time.perf_counter() - self._started

    def _autocast(self) -> torch.autocast:
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.cfg.train.bf16)

    # -------------------------------------------------------------- training
    def train(self) -> dict[str, Any]:
        self._prepare()
        tc, s, world = self.cfg.train, self.state, self.world
        tb = self.md.path / "tensorboard" if tc.tensorboard else None
        resume_at = s.step if self.resume_state is not None else None
        log = RunLog(self.md.log, tb, resume_at=resume_at) if world.main else None
        if self.progress_bar and not self.quiet:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=tc.max_steps, initial=s.step, unit="step", dynamic_ncols=True, smoothing=0.1)
        self.model.train()
        window = Window()
        started = self._started = time.perf_counter() - s.train_seconds
        stop_reason = "max_steps"
        batches = distributed.epoch_batches(self.batcher, world, s.epoch)
        early = self.early_snapshot_steps() if world.main else set()
        if s.step == 0 and 0 in early:
            self._snapshot(self.validate(bleu=False))
        with StopRequest() as stop:
            while s.step < tc.max_steps:
                if len(batches) - s.batch < world.size:  # every rank needs a batch
                    s.epoch, s.batch = s.epoch + 1, 0
                    batches = distributed.epoch_batches(self.batcher, world, s.epoch)
                update = batches[s.batch : s.batch + tc.accumulate * world.size]
                window.add(*self._update(update))
                s.step += 1
                s.batch += len(update)
                if s.step % tc.log_every == 0 or s.step == tc.max_steps:
                    self._log_window(window, log, started)
                if self._bar is not None:
                    self._bar.update(1)
                if s.step in early:
                    paused = time.perf_counter()
                    self._snapshot(self.validate(bleu=False))
                    window.start += time.perf_counter() - paused

                out_of_time = tc.max_minutes > 0 and time.perf_counter() - started > tc.max_minutes * 60
                out_of_time, stop_requested = world.flags_from_main(out_of_time, stop.requested)
                if s.step % tc.eval_every == 0 or s.step == tc.max_steps or out_of_time or stop_requested:
                    s.train_seconds = time.perf_counter() - started
                    if stop_requested:
                        if world.main:
                            self._save()
                        stop_reason = "interrupted"
                        break
                    paused = time.perf_counter()
                    early_stop = (
                        # rank 0 has the log
                        self._evaluate_and_save(cast(RunLog, log), s.step == tc.max_steps or out_of_time)
                        if world.main
                        else False
                    )
                    (early_stop,) = world.flags_from_main(early_stop)
                    if early_stop or out_of_time:
                        stop_reason = "early_stopping" if early_stop else "max_minutes"
                        break
                    window.start += time.perf_counter() - paused  # validation time is not training throughput
        summary = self._finish(stop_reason, log)
        if stop_reason == "interrupted":
            summary["signal"] = stop.signal or signal.SIGTERM  # other ranks learn of it from rank 0
        return summary

    def _update(self, update: list) -> tuple[Tensor | float, Tensor | float, int, float]:
        """One optimizer step over the batches ``update`` (this rank's share of them):
        summed loss and NLL of this rank (on the device), and the target tokens and model FLOPs
        of all ranks."""
        world, tc = self.world, self.cfg.train
        n_tokens = sum(int(self.batcher.tgt_len[i].sum()) for i in update)  # of all ranks: no communication
        flops = self._update_flops(update)
        mine = update[world.rank :: world.size]
        loss_sum: Tensor | float = 0.0
        nll_sum: Tensor | float = 0.0
        for k, idx in enumerate(mine):
            b = self.batcher.collate(idx).to(self.device)
            last = k == len(mine) - 1
            ddp = cast("DistributedDataParallel", self.ddp)  # when distributed
            with contextlib.nullcontext() if last or not world.distributed else ddp.no_sync():
                sums = self._loss(self.trained, b, taught=True)
                # DDP averages gradients over ranks: x world makes the update the sum over all batches / n_tokens
                (sums.loss * (world.size / n_tokens)).backward()
            loss_sum = loss_sum + sums.loss.detach()  # stays on the device: no sync per batch
            nll_sum = nll_sum + sums.nll
        if tc.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), tc.clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss_sum, nll_sum, n_tokens, flops

    def _update_flops(self, update: list) -> float:
        """Model FLOPs of an update (``training.flops``) from its sentences' lengths; 0 where the
        architecture has no formula."""
        if self.peak is None:  # set where the FLOPs can be counted: a BucketBatcher's sentences
            return 0.0
        batcher, idx = cast("BucketBatcher", self.batcher), np.concatenate(update)
        vocab = self.model.output_projection.weight.shape[0]
        passes = 2 if self.cfg.train.rdrop > 0 else 1  # R-Drop runs every batch twice
        return passes * (update_flops(self.cfg.model, batcher.src_len[idx], batcher.tgt_len[idx], vocab) or 0.0)

    def _log_window(self, window: Window, log: RunLog | None, started: float) -> None:
        """Log the steps since the last log line (loss, perplexity, lr, speed) and start a new window."""
        s, tc = self.state, self.cfg.train
        elapsed = time.perf_counter() - window.start
        loss, nll = self.world.sum(window.loss, window.nll)
        rec = dict(
            epoch=s.epoch,
            loss=float(loss) / window.tokens,
            ppl=math.exp(min(float(nll) / window.tokens, 50)),
            lr=self.scheduler.get_last_lr()[0],
            tgt_tokens_per_s=window.tokens / elapsed,
            elapsed_s=time.perf_counter() - started,
        )
        if self.peak is not None:  # model FLOPs per second over the matmul peak of every rank
            rec["mfu"] = window.flops / elapsed / (self.peak * self.world.size)
        if log is not None:
            log.write("train", s.step, **rec)
        if self._bar is not None:
            self._bar.set_postfix(
                loss=f"{rec['loss']:.3f}",
                lr=f"{rec['lr']:.2e}",
                tok_s=f"{rec['tgt_tokens_per_s']:.0f}",
                **({"mfu": f"{rec['mfu']:.0%}"} if "mfu" in rec else {}),
            )
        else:
            self.say(
                f"step {s.step:>6}/{tc.max_steps}  epoch {s.epoch}  loss {rec['loss']:.3f}  "
                f"lr {rec['lr']:.2e}  {rec['tgt_tokens_per_s']:.0f} tgt tok/s"
                + (f"  MFU {rec['mfu']:.0%}" if "mfu" in rec else "")
            )
        window.reset()

    def _finish(self, stop_reason: str, log: RunLog | None) -> dict[str, Any]:
        s, tc, world = self.state, self.cfg.train, self.world
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if log is not None:
            log.write("end", s.step, reason=stop_reason, train_seconds=s.train_seconds)
            log.close()
        if world.distributed:
            # DistributedDataParallel holds the process group; the trainer sits in reference cycles, so
            # without this the group's C++ threads would be torn down at interpreter exit, which
            # aborts the process now and then (gloo) after all work is saved.
            self.ddp = self.trained = self.model
            gc.collect()
        world.close()
        if stop_reason == "interrupted":
            if self.resumable:  # a run that cannot be resumed (the demo's) leaves the message to its caller
                self.say(f"interrupted at step {s.step}; saved {self.md.last}; continue with --resume")
        else:
            best = "none" if s.best is None else f"{s.best:.2f}" if tc.early_stop_metric == "bleu" else f"{s.best:.4f}"
            self.say(f"finished at step {s.step} ({stop_reason}); best dev {tc.early_stop_metric}: {best}")
        return {
            "step": s.step,
            "reason": stop_reason,
            "best": s.best,
            "history": s.history,
            "train_seconds": s.train_seconds,
        }

    def _evaluate_and_save(self, log: RunLog, final: bool) -> bool:
        """Validate, update best/patience, write checkpoints; True when early stopping triggers."""
        s, tc = self.state, self.cfg.train
        result = self.validate(final)
        metric = result.get("dev_bleu") if tc.early_stop_metric == "bleu" else result["dev_loss"]
        improved = False
        if metric is not None:
            better = (lambda a, b: a > b) if tc.early_stop_metric == "bleu" else (lambda a, b: a < b)
            improved = s.best is None or better(metric, s.best)
            if improved:
                s.best, s.bad_evals = metric, 0
            else:
                s.bad_evals += 1
        s.history.append({"step": s.step, **{k: v for k, v in result.items() if k != "bleu_signature"}})
        log.write("valid", s.step, **result)
        bleu_txt = f"  BLEU {result['dev_bleu']:.2f}" if "dev_bleu" in result else ""
        bleu_txt += f"  exact match {result['dev_exact']:.1f}%" if "dev_exact" in result else ""
        self.say(
            f"valid step {s.step}: loss {result['dev_loss']:.3f}  ppl {result['dev_ppl']:.2f}{bleu_txt}{'  *best*' if improved else ''}"
        )
        if tc.attention_snapshots and self.world.main:
            self._snapshot(result)
        save_weights(self.md, self.model, s.step, best=improved, keep_last=tc.keep_last)
        self._save()
        return tc.patience > 0 and s.bad_evals >= tc.patience


def train(
    cfg: Config,
    *,
    resume: bool = False,
    progress_bar: bool | None = None,
    quiet: bool = False,
    resumable: bool = True,
) -> dict[str, Any]:
    """Train the model ``cfg`` describes into ``cfg.out_dir``; returns a summary (with ``signal`` when a
    signal stopped it). ``resumable=False``: the caller discards the run, so an interrupted run says
    nothing of ``--resume``."""
    return Trainer(cfg, resume=resume, progress_bar=progress_bar, quiet=quiet, resumable=resumable).train()
