"""MRTPO on TRL: `MRTPOConfig` / `MRTPOTrainer`, subclasses of TRL's `GRPOConfig` / `GRPOTrainer`.

Imported only when used; needs `trl>=1.16,<1.17` (`core.config.TRL_REQUIREMENT`), whose private methods
`_calculate_rewards` and `_generate_and_score_completions` it extends. Five modules, one topic each:

    dataset.py    dataset rows -> prompts with constraints (`prompt_row`, `prompt_dataset`); our verifiers
                  as TRL reward functions (`verifier_reward(s)`); a user's reward reporting spans (`reward_with_spans`)
    routes.py     how each reward is routed (its contrast from `core.contrast`, spans), checked on every row and
                  said in one line per reward at start (`plan_routes`)
    config.py     `MRTPOConfig`: GRPOConfig plus MRTPO's method fields, checked like TrainConfig
    trainer.py    `MRTPOTrainer`: TRL's hooks, then the built-in trainer's verify and route phases
                  (`core.run.batch`) on this process's rows, and the token advantages
    recorder.py   the run store: what each process's rows leave (`LocalBatch`), merged on process 0 and
                  written as the built-in trainer writes it (`RunRecorder`)
"""

from core.config import TRL_REQUIREMENT, trl_problem

if trl_problem():
    raise ImportError(f"core.integrations.trl: {trl_problem()}")

from core.integrations.trl.config import MRTPOConfig  # noqa: E402
from core.integrations.trl.dataset import (  # noqa: E402
    PromptRow,
    dataset_rows,
    prompt_dataset,
    prompt_row,
    reward_families,
    reward_with_spans,
    user_text,
    verifier_reward,
    verifier_rewards,
)
from core.integrations.trl.trainer import MRTPOTrainer, end_process_group  # noqa: E402

__all__ = ["MRTPOConfig", "MRTPOTrainer", "PromptRow", "TRL_REQUIREMENT", "dataset_rows", "end_process_group",
           "prompt_dataset", "prompt_row", "reward_families", "reward_with_spans", "user_text", "verifier_reward", "verifier_rewards"]
