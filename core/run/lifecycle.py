"""A training run from start to end: `train(cfg)` opens (or resumes) the run folder, loops over
`core.run.step.train_step`, writes each step's credit map and metrics line, checkpoints, evaluates
at checkpoint steps, and ends the run's status as completed, stopped or failed.

- `open_run`: new-run and resume setup in one place (load the state, create or reopen the folder);
- `save_checkpoint` / `latest_checkpoint`: save_pretrained folders plus optimizer state, written
  to a hidden temp folder then renamed;
- `SignalGuard`: SIGTERM/SIGINT request a stop that the loop honours between phases;
- `ProgressBar`: a one-line bar on terminals.

Each step is seeded from (seed, step), so a resumed run draws what an uninterrupted one would.
Never imports streamlit or plotly.
"""

from __future__ import annotations

import copy
import json
import math
import os
import pickle
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from core import model as model_lib
from core.config import TrainConfig
from core.prompt_sets import load_prompts
from core.run import names as names_lib
from core.run.record import summary_line
from core.run.step import StopRequested, TrainState, evaluate, seed_everything, train_step
from core.run.store import (
    DiskFull,
    RunStore,
    RunStoreError,
    RunWriter,
    disk_full,
    free_bytes,
    is_disk_full,
    run_dir,
)
from core.run.train_log import phase_line
from core.verifiers import VerifierExit
from core.verifiers.shared.base import interrupt_check

# ------------------------------------------------------------------------------------------ state



def store_keys(cfg, reward_names: list[str]) -> dict:
    """What config.json holds besides the TrainConfig fields (core.config.STORE_KEYS): the reward names and how each
    is routed (`core.contrast.verifier_routes`)."""
    from core.choices import routing_source
    from core.contrast import verifier_routes

    return {"reward_names": reward_names, "reward_routes": verifier_routes(reward_names, routing_source(cfg))}

def build_state(cfg: TrainConfig, model_path: str | None = None, optimizer_state: Path | None = None) -> TrainState:
    """Load prompts, policy (from `model_path` when resuming), reference model and optimizer.

    Raises ConfigError for a bad prompt set / weights before anything heavy is loaded.
    """
    items, names = load_prompts(cfg)
    eval_items = load_prompts(cfg, cfg.eval_prompt_set)[0] if cfg.eval_prompt_set else None
    seed_everything(cfg.seed)
    model, tokenizer, _info = model_lib.load_policy(model_path or cfg.model, device=cfg.device)
    device = next(model.parameters()).device
    model.float()  # fp32 master weights; CUDA compute runs under bf16 autocast
    ref_model = None
    if cfg.kl_beta > 0:
        ref_model = copy.deepcopy(model).eval()
        ref_model.requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.999), weight_decay=0.0)
    if optimizer_state is not None and optimizer_state.exists():
        optimizer.load_state_dict(load_optimizer_state(optimizer_state, device))
    weights = torch.tensor([cfg.reward_weight(n) for n in names], dtype=torch.float32)
    return TrainState(cfg, model, tokenizer, optimizer, items, names, weights, device, ref_model, eval_items)


# ------------------------------------------------------------------------------------------ checkpoints


def load_optimizer_state(path: Path, device: torch.device) -> dict:
    """A checkpoint's optimizer state, read with weights_only (tensors and plain containers: no pickled code from
    a planted checkpoint runs). A file that is refused or unreadable raises RunStoreError with one line naming it
    and what to do, so that `mrtpo train --resume` exits 2 with that line instead of a traceback."""
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError:
        raise RunStoreError(f"{path.parent.name}/{path.name} cannot be loaded (it holds more than tensors, which a "
                            "checkpoint never does, so it is not read); resume from an older checkpoint (delete "
                            "this one) or start a new run") from None
    except (RuntimeError, EOFError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RunStoreError(f"{path.parent.name}/{path.name} cannot be loaded ({first[:200]}); resume from an "
                            "older checkpoint (delete this one) or start a new run") from None
    if not isinstance(state, dict):
        raise RunStoreError(f"{path.parent.name}/{path.name} holds no optimizer state; resume from an older checkpoint")
    return state


def checkpoint_bytes(model: torch.nn.Module) -> int:
    """About what one checkpoint takes: 4 P (1 + 2 for AdamW's moments) bytes, P the parameters
    (`core.resources.disk_estimate`'s checkpoint term; the tokenizer's few files left out)."""
    from core.resources import FLOAT_BYTES

    return FLOAT_BYTES * 3 * sum(p.numel() for p in model.parameters())


def save_checkpoint(state: TrainState, writer: RunWriter, step: int) -> Path:
    """Policy + tokenizer (save_pretrained), optimizer state and the step, written to a temp folder then renamed.
    A save that fails removes its temp folder; on a full disk (`is_disk_full`, or less space free once it is removed
    than a checkpoint takes: torch.save reports ENOSPC as a bare iostream error) it raises DiskFull naming the
    checkpoint and the space it needs."""
    tmp = writer.begin_checkpoint(step)
    try:
        tmp.mkdir(parents=True)
        state.model.save_pretrained(tmp)
        state.tokenizer.save_pretrained(tmp)
        torch.save(state.optimizer.state_dict(), tmp / "optimizer.pt")
        (tmp / "trainer_state.json").write_text(json.dumps({"step": step, "seed": state.cfg.seed}) + "\n")
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        needed = checkpoint_bytes(state.model)
        free = free_bytes(tmp.parent)
        if is_disk_full(exc) or (free is not None and free < needed):
            raise disk_full(f"checkpoint {writer.checkpoint_dir(step).name}", needed, tmp.parent) from None
        raise
    return writer.commit_checkpoint(step, state.cfg.keep_checkpoints)


# ------------------------------------------------------------------------------------------ divergence

ENTROPY_AT_MAX = 0.99  # a policy whose entropy is this share of ln V or more samples (nearly) uniformly
ENTROPY_START_BELOW = 0.9  # ... which counts as divergence only for a run that started below this share


class Diverged(RuntimeError):
    """The run's numbers say training broke down (the message says which and at what step)."""


def divergence(metrics: dict[str, Any], vocab_size: int, start_entropy: float | None) -> str:
    """Why a step shows the run diverged ("" when it does not), docs/METHOD.md "Divergence":
    a non-finite `loss/total` or `loss/policy`, or a policy entropy H >= 0.99 ln V (V = vocabulary size: the
    uniform distribution's entropy) in a run whose first step had H < 0.9 ln V (an untrained, near-uniform
    policy is not a divergence).

    >>> divergence({"loss/total": float("nan")}, 100, None)
    'loss/total is nan'
    >>> divergence({"loss/total": 0.1, "policy/entropy": 4.59}, 100, 2.0)  # ln 100 = 4.605
    'policy entropy 4.59 is 99.7% of its maximum ln 100 = 4.61 (the policy samples uniformly; it started at 2.00)'
    >>> divergence({"loss/total": 0.1, "policy/entropy": 4.59}, 100, 4.5)
    ''
    """
    for key in ("loss/total", "loss/policy"):
        v = metrics.get(key)
        if isinstance(v, float) and not math.isfinite(v):
            return f"{key} is {v}"
    h = metrics.get("policy/entropy")
    h_max = math.log(vocab_size) if vocab_size > 1 else 0.0
    if (isinstance(h, float) and math.isfinite(h) and h_max > 0 and start_entropy is not None
            and start_entropy < ENTROPY_START_BELOW * h_max and h >= ENTROPY_AT_MAX * h_max):
        return (f"policy entropy {h:.2f} is {h / h_max:.1%} of its maximum ln {vocab_size} = {h_max:.2f} "
                f"(the policy samples uniformly; it started at {start_entropy:.2f})")
    return ""


def latest_checkpoint(path: Path) -> tuple[int, Path] | None:
    """The newest complete checkpoint of a run folder (one with trainer_state.json), or None
    (`RunStore.latest_checkpoint`: RunStoreError for a corrupt trainer_state.json)."""
    return RunStore(path).latest_checkpoint()


# ------------------------------------------------------------------------------------------ signals and progress


class SignalGuard:
    """SIGTERM/SIGINT/SIGHUP request a stop (checked between phases and between responses while verifying; a
    custom verifier's check that is running is interrupted when `interrupts_checks`: the built-in trainer's, whose
    step turns `core.verifiers.shared.base.CheckInterrupted` into its stop); a second signal of the same kind gets the
    previous handler (a second Ctrl-C stops at once), unless `repeats_stop_now` is False. SIGHUP is what a trl
    worker gets when torchrun ends (`core.run.liveness.end_with_parent`), on top of torchrun's own SIGTERM; torchrun
    may send SIGTERM more than once while it shuts down and SIGKILLs its workers itself after its grace period, so
    its workers take every repeat as the same request (`MRTPOTrainer.train`).

    Installed before the model loads, so an early stop is not lost; `attach(state)` hands the
    request to the loop's state.
    """

    def __init__(self, repeats_stop_now: bool = True, interrupts_checks: bool = False):
        self.repeats_stop_now = repeats_stop_now
        self.interrupts_checks = interrupts_checks  # the built-in trainer's loop handles `CheckInterrupted`
        self.requested = False
        self.state: TrainState | None = None
        self.previous: dict[int, Any] = {}

    def attach(self, state: TrainState) -> None:
        self.state = state
        state.stop_requested = state.stop_requested or self.requested

    def _handle(self, signum, frame):
        self.requested = True
        if self.state is not None:
            self.state.stop_requested = True
        if self.repeats_stop_now:
            signal.signal(signum, self.previous.get(signum, signal.SIG_DFL))
        if self.interrupts_checks:
            interrupt_check()  # a custom verifier's check running now ends here (the step then stops)

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: signals stay with the caller
                pass
        return self

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        return False


class ProgressBar:
    """A one-line progress bar on stderr, drawn only on a terminal (train.log stays clean)."""

    def __init__(self, total: int, stream=None):
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()

    def show(self, done: int, phase: str = "") -> None:
        if not self.enabled:
            return
        frac = done / max(self.total, 1)
        filled = int(30 * frac)
        elapsed = time.monotonic() - self.start
        eta = elapsed / done * (self.total - done) if done else float("nan")
        eta_s = f"{eta:5.0f}s" if math.isfinite(eta) else "    ?"
        self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{self.total} eta {eta_s} {phase:<10}")
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 70 + "\r")
            self.stream.flush()


# ------------------------------------------------------------------------------------------ the run


def open_run(cfg: TrainConfig, resume: str | os.PathLike | None) -> tuple[TrainState, RunWriter, int]:
    """Load the state and open the run folder: (state, writer, the last completed step).

    New run: picks the name (`cfg.run_name` or an automatic one) and creates the folder. Resume: loads
    the policy and optimizer from the newest checkpoint, records the config (resuming may change steps,
    device, ...) and drops the steps after that checkpoint. Either way the status becomes `running`.
    """
    ckpt = latest_checkpoint(Path(resume)) if resume is not None else None
    start = ckpt[0] if ckpt else 0
    state = build_state(cfg, model_path=str(ckpt[1]) if ckpt else None,
                        optimizer_state=ckpt[1] / "optimizer.pt" if ckpt else None)
    if resume is not None:
        writer = RunWriter.reopen(resume, {**cfg.to_dict(), **store_keys(cfg, state.reward_names)}, start)
    else:
        cfg.run_name = cfg.run_name or names_lib.auto_run_name(
            cfg.method, lambda name: run_dir(cfg.runs_dir, name).exists())
        writer = RunWriter.create(cfg.runs_dir, cfg.run_name, {**cfg.to_dict(), **store_keys(cfg, state.reward_names)})
    writer.set_status(state="running", pid=os.getpid(), step=start, total_steps=cfg.steps, error=None)
    state.step = start
    return state, writer, start


def _disk_full_end(writer: RunWriter, step: int, exc: DiskFull) -> None:
    """End a run whose write did not fit (docs/CONTRACTS.md, "A full disk"): what a write left half-done removed
    (which frees its space), status `failed` with the reason, and that reason as one line on stderr. Recorded steps
    stay; a step whose metrics line was not written is not one."""
    writer.remove_leftovers()
    store = RunStore(writer.path)
    done = store.latest_checkpoint()
    then = (f"free space, then continue it from step {done[0]} with mrtpo train --resume {writer.path}" if done else
            "free space, then start it again (it has no checkpoint to resume from)")
    reason = f"{exc} at step {step}; {then}"
    try:
        writer.set_status(state="failed", step=store.last_step(), error=reason)
    except RunStoreError:  # not even status.json fits: the reader reports the run crashed, the line says why
        writer.close()
    print(f"mrtpo train: error: {reason}", file=sys.stderr, flush=True)


StepHook = Callable[[TrainState, dict], None]


def train(
    cfg: TrainConfig,
    *,
    resume: str | os.PathLike | None = None,
    hooks: list[StepHook] | None = None,
    out=None,
) -> Path:
    """Run (or resume) a training run; returns the run folder. Status ends completed, stopped or failed."""
    out = out or sys.stdout
    with SignalGuard(interrupts_checks=True) as guard:
        print(phase_line(f"loading the model ({cfg.model}) and the prompt set"), file=out, flush=True)
        state, writer, start = open_run(cfg, resume)
        guard.attach(state)
        if resume is not None:
            print(f"resuming {writer.path.name} from step {start}", file=out, flush=True)
        else:
            print(f"run {writer.path.name}: {writer.path}", file=out, flush=True)
        batch = cfg.prompts_per_step * cfg.group_size
        print(phase_line(f"step {start + 1} of {cfg.steps}: sampling {batch} responses"), file=out, flush=True)
        _loop(state, writer, start, hooks or [], out)
    return writer.path


def _loop(state: TrainState, writer: RunWriter, start: int, hooks: list[StepHook], out) -> None:
    cfg = state.cfg
    bar = ProgressBar(cfg.steps)
    last_saved = start if start > 0 else -1
    vocab_size = int(state.model.get_output_embeddings().weight.shape[0])
    start_entropy = None
    try:
        for step in range(start + 1, cfg.steps + 1):
            bar.show(step - 1, "step")
            state.check_stop()
            result = train_step(state, step)
            state.step = step
            metrics = result.metrics
            is_ckpt = step == cfg.steps or (cfg.checkpoint_every > 0 and step % cfg.checkpoint_every == 0)
            if is_ckpt:
                metrics.update(evaluate(state))
            # Credit map, then the metrics line (the step is complete), then the checkpoint: a kill
            # between them resumes from an older checkpoint and truncates the later steps.
            if result.credit_step is not None:  # `credit_every`: this step stores its credit map
                writer.write_credit(step, result.credit_step)
            writer.append_metrics(metrics)
            if start_entropy is None and isinstance(metrics.get("policy/entropy"), float):
                start_entropy = metrics["policy/entropy"]
            reason = divergence(metrics, vocab_size, start_entropy)
            if reason:  # the step is recorded; its weights are not saved
                raise Diverged(f"diverged at step {step}: {reason}")
            if is_ckpt:
                save_checkpoint(state, writer, step)
                last_saved = step
            writer.set_status(state="running", step=step)
            bar.clear()
            print(summary_line(metrics, cfg.steps, state.reward_names), file=out, flush=True)
            for hook in hooks:
                hook(state, metrics)
        bar.clear()
        writer.set_status(state="completed", step=state.step, error=None)
    except StopRequested:
        bar.clear()
        if state.step > 0 and last_saved != state.step:
            try:
                save_checkpoint(state, writer, state.step)
            except DiskFull as exc:
                _disk_full_end(writer, state.step, exc)
                return
        writer.set_status(state="stopped", step=state.step, error=None)
        print(f"stopped after step {state.step}", file=out, flush=True)
    except Diverged as exc:
        bar.clear()
        writer.set_status(state="failed", step=state.step, error=str(exc))
        print(f"mrtpo train: {exc}", file=sys.stderr, flush=True)
    except DiskFull as exc:
        bar.clear()
        _disk_full_end(writer, state.step, exc)
    except VerifierExit as exc:  # a custom check called sys.exit: the run fails with one line naming it
        bar.clear()
        writer.set_status(state="failed", step=state.step, error=f"{exc} (at step {state.step + 1})")
        print(f"mrtpo train: error: {exc} (at step {state.step + 1})", file=sys.stderr, flush=True)
    except BaseException as exc:
        bar.clear()
        tail = "".join(traceback.format_exception(exc))[-4000:]
        state_name = "stopped" if isinstance(exc, KeyboardInterrupt) else "failed"
        writer.set_status(state=state_name, step=state.step, error=None if state_name == "stopped" else tail)
        raise
