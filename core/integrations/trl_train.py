"""`mrtpo train --backend trl`: one process of a TrainConfig run on TRL (`MRTPOTrainer`).

`core.run.train_cli` validates the config, then calls `run(cfg)` in this process (`nproc` 1) or starts
`nproc` processes with `torch.distributed.run` that each call it. The TrainConfig fields map onto TRL's
where they mean the same thing (`trl_args`); the run store is the built-in trainer's (config.json records
the TrainConfig, with `backend: trl`). Imported only when used (needs TRL).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from transformers import PrinterCallback

from core.config import TrainConfig
from core.integrations.trl import MRTPOConfig, MRTPOTrainer, end_process_group, prompt_dataset
from core.integrations.trl.recorder import TRL_TRAINER_STATE
from core.prompt_sets import load_prompts
from core.run.train_log import phase_line

# What the built-in loop does that TRL must be told: a constant learning rate (no schedule), no dropout in the
# update (the built-in keeps the policy in eval mode), token-mean over the whole batch (dapo), the full
# sampling distribution, weights in fp32 with bf16 autocast on CUDA, no HF checkpoints or logging.
FIXED = dict(
    lr_scheduler_type="constant", disable_dropout=True, loss_type="dapo", top_k=0, top_p=1.0,
    gradient_accumulation_steps=1, steps_per_generation=1, save_strategy="no", logging_strategy="no",
    report_to=[], activation_checkpointing=False, weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.999,
    shuffle_dataset=True, disable_tqdm=True,
)


def world_size() -> int:
    """Processes of this run (torch.distributed.run sets WORLD_SIZE; 1 without it)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def grpo_fields(cfg: TrainConfig, output_dir: str, use_cpu: bool, processes: int) -> dict:
    """GRPOConfig fields of a TrainConfig run on `processes` processes: each takes an equal share of the
    prompts_per_step x group_size batch; one generation batch per run-store step, `inner_epochs` optimizer
    steps on it (TRL's num_iterations)."""
    batch = cfg.prompts_per_step * cfg.group_size
    return dict(
        output_dir=output_dir, use_cpu=use_cpu, bf16=not use_cpu, seed=cfg.seed,
        per_device_train_batch_size=batch // processes, num_generations=cfg.group_size,
        max_completion_length=cfg.max_new_tokens, temperature=cfg.temperature,
        max_steps=cfg.steps * cfg.inner_epochs, num_iterations=cfg.inner_epochs, learning_rate=cfg.lr,
        epsilon=cfg.clip_range, beta=cfg.kl_beta, max_grad_norm=cfg.max_grad_norm,
        **FIXED,
    )


def trl_args(cfg: TrainConfig, output_dir: str, use_cpu: bool, processes: int) -> MRTPOConfig:
    """The MRTPOConfig of a TrainConfig run: `grpo_fields` plus the method's fields."""
    return MRTPOConfig(
        **grpo_fields(cfg, output_dir, use_cpu, processes),
        method=cfg.method, routing=cfg.routing, relevance=cfg.relevance, auto_evidence=cfg.auto_evidence,
        sharpen=cfg.sharpen, lam=cfg.lam,
        w_max=cfg.w_max, family_weights=dict(cfg.reward_weights) or None, eps=cfg.eps,
        routing_clip=cfg.routing_clip, routing_shuffle=cfg.routing_shuffle,
        routing_shuffle_seed=cfg.routing_shuffle_seed, entropy_q=cfg.entropy_q,
        reward_scales=dict(cfg.reward_scales) or None,
        reward_contrasts=dict(cfg.reward_contrasts) or None,
        replay_chunk=cfg.replay_chunk, replay_pairs=cfg.replay_pairs, replay_dtype=cfg.replay_dtype, runs_dir=cfg.runs_dir, run_name=cfg.run_name,
        checkpoint_every=cfg.checkpoint_every, keep_checkpoints=cfg.keep_checkpoints,
        credit_samples=cfg.credit_samples, credit_every=cfg.credit_every, eval_samples=cfg.eval_samples,
        eval_prompts=cfg.eval_prompts,
        print_steps=True, save_final_model=False,  # the terminal's step lines; the final model is the run store's
        final_checkpoint=True,  # resume / extend start from it (save_strategy="no": no HF checkpoints)
    )


def use_cpu(cfg: TrainConfig) -> bool:
    """True when the run trains on CPU (device cpu, or auto without CUDA); cuda without a GPU is an error."""
    import torch

    from core import model as model_lib

    if cfg.device == "cpu" or (cfg.device == "auto" and not torch.cuda.is_available()):
        return True
    model_lib.resolve_device("cuda")  # a clear error when cuda was asked for and is absent
    return False


def run(cfg: TrainConfig, resume: Path | None = None) -> Path | None:
    """Train on this process's share; returns the run folder on process 0 (None on the others). `resume`: the run
    folder to continue from its newest checkpoint (weights, optimizer, scheduler, RNG, data order)."""
    from core import model as model_lib
    from core.config import ConfigError
    from core.run.store import RunStore

    checkpoint = RunStore(resume).latest_checkpoint() if resume is not None else None
    if resume is not None and checkpoint is None:
        raise ConfigError("resume", f"run {resume.name!r} has no complete checkpoint to resume from; start a new run")
    if checkpoint is not None and not (checkpoint[1] / TRL_TRAINER_STATE).is_file():
        raise ConfigError("resume", f"{checkpoint[1]} has no {TRL_TRAINER_STATE} (optimizer and scheduler state): "
                                    "it was not written by a resumable trl run; start a new run")

    first = os.environ.get("RANK", "0") == "0"
    if first:
        print(phase_line(f"loading the model ({cfg.model}) and the prompt set"), flush=True)
    items, names = load_prompts(cfg)
    held_out = load_prompts(cfg, cfg.eval_prompt_set)[0] if cfg.eval_prompt_set else None
    on_cpu = use_cpu(cfg)
    model, tokenizer, _ = model_lib.load_policy(cfg.model, device="cpu")  # accelerate places it
    output_dir = tempfile.mkdtemp(prefix="mrtpo-trl-")  # HF's own output folder; the run store is elsewhere
    trainer, finished = None, False
    try:
        args = trl_args(cfg, output_dir, on_cpu, world_size())
        trainer = MRTPOTrainer(
            model, reward_funcs=None, args=args, train_dataset=prompt_dataset(items, tokenizer),
            processing_class=tokenizer, store_config={**cfg.to_dict(), "nproc": world_size()},
            held_out_dataset=prompt_dataset(held_out, tokenizer) if held_out else None,
        )
        if trainer.reward_names != names:
            raise RuntimeError(f"TRL rewards {trainer.reward_names} differ from the prompt set's {names}")
        trainer.remove_callback(PrinterCallback)  # the run prints its own line per step, not HF's log dicts
        if first:
            print(phase_line(f"step {checkpoint[0] + 1 if checkpoint else 1} of {cfg.steps}: sampling {cfg.prompts_per_step * cfg.group_size} responses "
                             f"on {world_size()} process{'es' if world_size() > 1 else ''}"), flush=True)
        trainer.train(resume_from_checkpoint=str(checkpoint[1]) if checkpoint else None)
        finished = True
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
        end_process_group(trainer, finished)
    return trainer.writer.path if trainer.writer is not None else None
