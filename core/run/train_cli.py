"""`mrtpo train`: start or resume a training run from the command line.

    mrtpo train --model tiny-instruct --method mrtpo --steps 50
    mrtpo train --config my_run.json --lr 1e-5          # flags override the file
    mrtpo train --resume runs/mrtpo-20250101-120000     # continue from its last checkpoint
    mrtpo train --backend trl --nproc 2                 # TRL's GRPOTrainer (MRTPOTrainer), two processes

Invalid values exit with status 2 and one line naming the field (no traceback), before any run
folder is created. Progress bar on stderr (terminals only), one summary line per step on stdout.

`--backend trl` runs `core.integrations.trl_train` (TRL's trainer with MRTPO's token advantages) in this
process, or, with `--nproc N` > 1, starts N processes of `mrtpo train` with `torch.distributed.run
--standalone` (gloo on CPU, NCCL on GPU) and waits for them; process 0 writes the run store. A
SIGTERM/SIGINT here is passed to process 0, which stops every process after the current step.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

from core import resources
from core.config import (
    TRAIN_COMMAND,
    ConfigError,
    TrainConfig,
    add_config_arguments,
    config_from_args,
    resume_argv,
    train_flags,
)
from core.prompt_sets import load_prompts

# Fields a resumed run may change (how long it runs, where and how often it saves, which JS maps replay
# records); the rest define the run and stay as recorded in its config.json.
RESUMABLE_OVERRIDES = ("steps", "device", "checkpoint_every", "keep_checkpoints", "replay_chunk", "replay_pairs",
                       "replay_dtype", "credit_samples", "credit_every")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mrtpo train",
        description="Train a policy with GRPO, GDPO or MRTPO on a prompt set with verifiable rewards; "
        "writes a run folder (config, status, metrics, per-token credit maps, checkpoints) that the app reads.",
    )
    parser.add_argument("--config", metavar="FILE", help="JSON file with TrainConfig fields; flags given override it")
    parser.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR from its last checkpoint (later steps are dropped and redone); "
        f"only {', '.join('--' + f.replace('_', '-') for f in RESUMABLE_OVERRIDES)} may be changed",
    )
    add_config_arguments(parser)
    return parser


def _fail(message: str) -> int:
    print(f"mrtpo train: error: {message}", file=sys.stderr)
    return 2


def runs_dir_problem(path: str | os.PathLike) -> str:
    """Why runs cannot be written under `path` ("" when they can): it, or the nearest folder above it that
    exists, must be a folder this process can create files in. Tried with a temporary file, since permission
    bits do not tell (root, read-only mounts, /proc)."""
    import tempfile

    p = Path(path).expanduser().absolute()
    if p.exists() and not p.is_dir():
        return f"{str(path)!r} is a file, not a folder for runs"
    existing = p
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"{str(path)!r} cannot be created: {str(existing)!r} is a file"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return f"cannot write runs under {str(path)!r}: {exc.strerror or exc} in {str(existing)!r}"
    return ""


def _resume_config(run: Path, flags: dict, lock: bool = True) -> TrainConfig:
    from core.run.store import RunStore, RunStoreError, acquire_writer_lock

    if not (run / "config.json").is_file():
        raise ConfigError(None, f"{str(run)!r} is not a run folder (no config.json)")
    try:
        # One writer per run: taken here, before anything heavy, and held until this process ends.
        if lock:
            acquire_writer_lock(run)
        ckpt = RunStore(run).latest_checkpoint()  # a corrupt trainer_state.json: say so before loading the model
    except RunStoreError as exc:
        raise ConfigError(None, str(exc)) from None
    store = RunStore(run)
    done = store.last_step()
    if ckpt is None:  # resuming would start again at step 0 and drop every recorded step
        lost = f" (resuming would start again at step 0 and drop its {done} recorded steps)" if done else ""
        raise ConfigError(None, f"run {run.name!r} has no complete checkpoint to resume from{lost}; start a new "
                          "run instead")
    fixed = sorted(k for k in flags if k not in RESUMABLE_OVERRIDES)
    if fixed:
        raise ConfigError(
            fixed[0],
            f"cannot change {', '.join(fixed)} when resuming (only {', '.join(RESUMABLE_OVERRIDES)}); "
            "start a new run instead",
        )
    recorded = store.config()
    if not recorded:
        raise ConfigError(None, f"config.json of {run.name!r} is unreadable: {'; '.join(store.warnings)}")
    steps = flags.get("steps", recorded.get("steps"))
    if isinstance(steps, int) and store.status().get("state") == "completed" and steps <= done:
        # as the app's Resume (`mrtpo_viz.launcher.resume_run`): a completed run is extended, never cut
        raise ConfigError("steps", f"the run completed its {done} steps; extend it to more steps than that "
                          f"(--steps {done + 1} or more)")
    if isinstance(steps, int) and steps <= ckpt[0]:
        raise ConfigError("steps", f"{steps} is not past the checkpoint at step {ckpt[0]} the run resumes from; "
                          f"give --steps {ckpt[0] + 1} or more")
    # The run keeps its folder: runs_dir and run_name follow where it lies now (it may have moved).
    return TrainConfig.from_dict(recorded, **flags, runs_dir=str(run.parent), run_name=run.name)


def worker_rank() -> int | None:
    """This process's rank when torch.distributed.run started it (RANK in the environment), else None."""
    rank = os.environ.get("RANK")
    return int(rank) if rank is not None and "WORLD_SIZE" in os.environ else None


def launch_argv(cfg: TrainConfig, resume: Path | None = None) -> list[str]:
    """`python -m torch.distributed.run --standalone --nproc_per_node N -m -- core.cli train <the config's flags>`
    (without the `--` the launcher would take `--nproc` for a prefix of its own `--nproc-per-node`); resuming,
    `--resume RUN` and the fields a resume may change instead of the flags."""
    if resume is not None:
        values = cfg.to_dict()
        flags = resume_argv(resume, **{k: values[k] for k in RESUMABLE_OVERRIDES})[len(TRAIN_COMMAND) + 1:]
    else:
        flags = train_flags(cfg)
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(cfg.nproc),
            "-m", "--", "core.cli", "train", *flags]  # "--": our flags are not the launcher's


def cuda_problem(nproc: int) -> str:
    """Why `--device cuda` cannot run `nproc` processes here ("" when it can): torch sees no CUDA device, or fewer
    devices than processes (one GPU per process). Imports torch: only asked when cuda was requested."""
    import torch

    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if found == 0:
        return "device: 'cuda' was requested but torch sees no CUDA device; use auto or cpu"
    if found < nproc:
        return f"nproc: {nproc} processes need {nproc} CUDA devices (one each); torch sees {found}"
    return ""


def settle_crashed(path: Path, status: dict) -> None:
    """Mark a run whose process 0 died without a final status (SIGKILL, the out-of-memory killer) `failed` on disk,
    at its last complete step, with what its log says (`RunStore.status` already reports it `crashed`; status.json
    said `running` for good). Skipped when another process holds the run's writer lock."""
    from core.run.store import RunStore, RunStoreError, RunWriter

    try:
        writer = RunWriter.open(path)
    except RunStoreError:
        return
    writer.set_status(state="failed", step=RunStore(path).last_step(), error=status.get("error"))


def launch_processes(cfg: TrainConfig, resume: Path | None = None) -> int:
    """Run `cfg.nproc` processes of this command and wait for them; exit status from the run's final state.

    The run name is fixed here, so every process (and the caller) knows the folder. A SIGTERM/SIGINT goes to
    process 0 (the pid in status.json), which makes every process stop after its current step; a second one
    goes to the launcher, which ends the processes.
    """
    from core.run import names as names_lib
    from core.run.store import RunStore, run_dir

    if cfg.device == "cuda" and (problem := cuda_problem(cfg.nproc)):
        return _fail(problem)  # one line here, not every process's error wrapped in torchrun's traceback
    cfg.run_name = cfg.run_name or names_lib.auto_run_name(cfg.method, lambda n: run_dir(cfg.runs_dir, n).exists())
    path = run_dir(cfg.runs_dir, cfg.run_name)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "PYTHONUNBUFFERED": "1"}
    print(f"run {cfg.run_name}: {cfg.nproc} processes (torch.distributed.run)", flush=True)
    from core.processes import end_with_parent

    if resume is not None:  # process 0 takes the run's writer lock over from here
        from core.run.store import release_writer_lock

        release_writer_lock(resume)
    proc = subprocess.Popen(launch_argv(cfg, resume), env=env, preexec_fn=end_with_parent)  # torchrun ends with this command
    signals = []

    def forward(signum, frame):
        signals.append(signum)
        pid = RunStore(path).status().get("pid") if (path / "status.json").exists() else None
        target = pid if len(signals) == 1 and isinstance(pid, int) and pid != proc.pid else proc.pid
        try:
            os.kill(target, signal.SIGTERM if target != proc.pid else signum)
        except ProcessLookupError:
            pass

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while proc.poll() is None:
            time.sleep(0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    status = RunStore(path).status() if path.exists() else {}
    if status.get("state") == "crashed":  # process 0 died without its final status (killed): write it down
        settle_crashed(path, status)
        status = RunStore(path).status()
    state = status.get("state")
    print(f"run {cfg.run_name}: {state or 'not started'} ({path})", flush=True)
    if state in ("completed", "stopped"):
        return 0
    return 130 if signals else 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    names = set(TrainConfig.__dataclass_fields__)
    flags = {k: v for k, v in vars(args).items() if k in names}
    rank = worker_rank()
    try:
        if args.resume:
            if args.config:
                raise ConfigError(None, "--resume uses the run's own config.json; drop --config")
            resume = Path(args.resume)
            cfg = _resume_config(resume, flags, lock=not rank)  # process 0 of a trl run writes; the others read
        else:
            resume = None
            cfg = config_from_args(args, args.config)
            if cfg.run_name and not rank:  # the other processes run beside process 0, which creates the folder
                from core.run.store import run_dir

                if run_dir(cfg.runs_dir, cfg.run_name).exists():
                    raise ConfigError("run_name", f"run {cfg.run_name!r} already exists in {cfg.runs_dir}; "
                                      "pick another name or continue it with --resume")
        if not rank and (problem := runs_dir_problem(cfg.runs_dir)):
            raise ConfigError("runs_dir", problem)
        if rank is not None and int(os.environ["WORLD_SIZE"]) != cfg.nproc:
            raise ConfigError("nproc", f"started as one of {os.environ['WORLD_SIZE']} processes, but nproc is {cfg.nproc}")
        _, rewards = load_prompts(cfg)  # prompt set, custom verifiers, reward weights: fail before anything heavy
    except (ConfigError, ValueError) as exc:
        return _fail(str(exc))
    if (rank is None and cfg.nproc == 1) or rank == 0:  # the process that writes the run: one process, or process 0
        print(resources.disk_line(cfg, len(rewards)), flush=True)  # beside the memory check load_prompts ran
        if cfg.method == "mrtpo" and cfg.relevance == "auto":
            from core import auto_evidence

            print(auto_evidence.describe(cfg.auto_evidence, rewards), flush=True)

    if cfg.backend == "trl":
        if cfg.nproc > 1 and rank is None:
            return launch_processes(cfg, resume)
        return _train_trl(cfg, rank, resume)

    from core.run.train_log import phase_line

    print(phase_line("importing torch and transformers"), flush=True)
    from core.model import ModelLoadError
    from core.run import lifecycle  # torch and transformers load only now
    from core.run.store import RunStoreError

    try:
        path = lifecycle.train(cfg, resume=resume)
    except (ConfigError, ModelLoadError, RunStoreError) as exc:  # raised before the run folder is written
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("mrtpo train: interrupted", file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        return 1
    from core.run.store import RunStore

    state = RunStore(path).status().get("state")
    print(f"run {path.name}: {state} ({path})", flush=True)
    return 0 if state in ("completed", "stopped") else 1


def _train_trl(cfg: TrainConfig, rank: int | None, resume: Path | None = None) -> int:
    """One process of a trl run; process 0 reports the run's final state. A worker of torchrun stops (SIGHUP: after
    its current step, as Stop does) when torchrun ends, even by SIGKILL, instead of training on alone."""
    if rank is not None:
        from core.processes import end_with_parent

        end_with_parent(signal.SIGHUP)
    from core.run.train_log import phase_line

    if not rank:
        print(phase_line("importing torch, transformers and TRL"), flush=True)
    from core.model import ModelLoadError

    try:
        from core.integrations import trl_train
    except ImportError as exc:
        return _fail(str(exc))
    from core.run.store import RunStoreError

    try:
        path = trl_train.run(cfg, resume)
    except (ConfigError, ModelLoadError, RunStoreError) as exc:  # raised before the run folder is written
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("mrtpo train: interrupted", file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        return 1
    if path is None:  # not process 0
        return 0
    from core.run.store import RunStore

    state = RunStore(path).status().get("state")
    if rank is None:  # a launched process leaves the last word to the launching command
        print(f"run {path.name}: {state} ({path})", flush=True)
    return 0 if state in ("completed", "stopped") else 1


if __name__ == "__main__":
    sys.exit(main())
