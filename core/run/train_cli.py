"""`mrtpo train`: start or resume a training run from the command line.

    mrtpo train --model tiny-instruct --method mrtpo --steps 50
    mrtpo train --config my_run.json --lr 1e-5          # flags override the file
    mrtpo train --resume runs/mrtpo-20250101-120000     # continue from its last checkpoint

Invalid values exit with status 2 and one line naming the field (no traceback), before any run
folder is created. Progress bar on stderr (terminals only), one summary line per step on stdout.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from core.config import ConfigError, TrainConfig, add_config_arguments, config_from_args

# Fields a resumed run may change (how long it runs, where and how often it saves, which JS maps replay
# records); the rest define the run and stay as recorded in its config.json.
RESUMABLE_OVERRIDES = ("steps", "device", "checkpoint_every", "replay_chunk", "replay_pairs")


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


def _resume_config(run: Path, flags: dict) -> TrainConfig:
    from core.run.store import RunStore, pid_alive

    if not (run / "config.json").is_file():
        raise ConfigError(None, f"{str(run)!r} is not a run folder (no config.json)")
    store = RunStore(run)
    status = store.status()
    if status.get("state") in ("starting", "running") and pid_alive(status.get("pid")):
        raise ConfigError(None, f"run {run.name!r} is still running (pid {status.get('pid')}); stop it first")
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
    # The run keeps its folder: runs_dir and run_name follow where it lies now (it may have moved).
    return TrainConfig.from_dict(recorded, **flags, runs_dir=str(run.parent), run_name=run.name)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    names = set(TrainConfig.__dataclass_fields__)
    flags = {k: v for k, v in vars(args).items() if k in names}
    try:
        if args.resume:
            if args.config:
                raise ConfigError(None, "--resume uses the run's own config.json; drop --config")
            resume = Path(args.resume)
            cfg = _resume_config(resume, flags)
        else:
            resume = None
            cfg = config_from_args(args, args.config)
            if cfg.run_name:
                from core.run.store import run_dir

                if run_dir(cfg.runs_dir, cfg.run_name).exists():
                    raise ConfigError("run_name", f"run {cfg.run_name!r} already exists in {cfg.runs_dir}; "
                                      "pick another name or continue it with --resume")
        cfg.load_prompts()  # prompt set, custom verifiers, reward weights: fail before anything heavy
    except (ConfigError, ValueError) as exc:
        return _fail(str(exc))

    from core.run.store import phase_line

    print(phase_line("importing torch and transformers"), flush=True)
    from core.model import ModelLoadError
    from core.run import lifecycle  # torch and transformers load only now

    try:
        path = lifecycle.train(cfg, resume=resume)
    except (ConfigError, ModelLoadError) as exc:  # raised before the run folder exists
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


if __name__ == "__main__":
    sys.exit(main())
