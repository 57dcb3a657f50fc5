"""`MRTPOConfig`: TRL's `GRPOConfig` plus MRTPO's method fields, checked like `core.config.TrainConfig`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from trl import GRPOConfig

from core.config import DEFAULT_RELEVANCE, ConfigError, field_error

# ----------------------------------------------------------------------------------------------- config

# MRTPOConfig fields that mean what the TrainConfig field of the same name means (checked the same way).
SHARED_FIELDS = ("method", "routing", "relevance", "auto_evidence", "sharpen", "lam", "w_max", "eps", "replay_chunk", "replay_pairs",
                 "routing_clip", "routing_shuffle", "routing_shuffle_seed", "entropy_q", "replay_dtype", "run_name", "checkpoint_every", "keep_checkpoints", "credit_samples",
                 "credit_every", "eval_samples", "eval_prompts")


def one_pass_error(relevance: str) -> str:
    """Why MRTPOTrainer cannot replay relevance `relevance` ("" when it can): it replays one no-gradient contrastive
    prompt per (row, reward) (`core.algos.routing.one_pass_reason`)."""
    from core.algos.routing import RELEVANCE, one_pass_reason

    reason = one_pass_reason(relevance) if relevance in RELEVANCE else ""
    return (f"{reason}; MRTPOTrainer replays one no-gradient prompt per reward: use a one-pass variant (js, swap, "
            "neutral, opposite, key, ...) or the built-in trainer (mrtpo train)") if reason else ""


def zero_stage(deepspeed: dict | str | None) -> int:
    """The ZeRO stage of TrainingArguments.deepspeed (a dict or the path of its JSON); 0 without DeepSpeed."""
    if not deepspeed:
        return 0
    if isinstance(deepspeed, str):
        try:
            with open(deepspeed, encoding="utf-8") as fh:
                deepspeed = json.load(fh)
        except (OSError, ValueError):
            return 0  # HF reports an unreadable DeepSpeed config itself
    stage = (deepspeed.get("zero_optimization") or {}).get("stage", 0) if isinstance(deepspeed, dict) else 0
    return int(stage) if str(stage).isdigit() else 0


def unsupported_feature(config) -> tuple[str, str] | None:
    """(field, why) for a TRL feature MRTPO refuses (README, "TRL features"), None when there is none: vLLM
    generation and ZeRO-3 could not be tested where MRTPO on TRL was built (neither vLLM nor DeepSpeed is installed
    there), and an untested path must not look supported."""
    if config.use_vllm:
        return ("use_vllm", "MRTPO with vLLM generation (colocate or server) is not supported yet: untested, it "
                            "needs the replay on the training model beside vLLM's sampler; set use_vllm=False")
    if zero_stage(config.deepspeed) == 3:
        return ("deepspeed", "MRTPO under DeepSpeed ZeRO-3 is not supported yet: untested (DeepSpeed is not "
                             "installed where it was built); use DDP")
    return None


AGGREGATIONS = ("normalize_then_sum", "sum_then_normalize")
# The aggregation each method is; mrtpo routes either.
METHOD_AGGREGATION = {"gdpo": "normalize_then_sum", "grpo": "sum_then_normalize"}


def aggregation_field(method: str, value: str | None) -> str:
    """TRL's multi_objective_aggregation for `method`: None -> the method's own (mrtpo: normalize_then_sum); a value
    that contradicts gdpo / grpo raises ConfigError in one line."""
    if value is None:
        return METHOD_AGGREGATION.get(method, "normalize_then_sum")
    if value not in AGGREGATIONS:
        raise ConfigError("multi_objective_aggregation", f"{value!r} is not one of {', '.join(AGGREGATIONS)}")
    own = METHOD_AGGREGATION.get(method)
    if own is not None and value != own:
        raise ConfigError("multi_objective_aggregation", f"method {method!r} is {own}; {value} is method 'mrtpo' "
                                                         "with routing='uniform' (or leave it None)")
    return value


def reward_contrasts_field(value: dict | str | None) -> dict | None:
    """reward_contrasts as {name: core.contrast.Contrast}: a dict or its JSON, each value parsed
    (`core.contrast.parse`); ConfigError naming the reward otherwise."""
    from core.contrast import ContrastError, parse

    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError("reward_contrasts", f"not a JSON object: {exc}") from exc
    if not isinstance(value, dict):
        raise ConfigError("reward_contrasts", f"a dict of reward name -> contrast, got {type(value).__name__}")
    out = {}
    for name, spec in value.items():
        try:
            out[str(name)] = parse(spec)
        except ContrastError as exc:
            raise ConfigError("reward_contrasts", f"{name}: {exc}") from None
    return out


@dataclass
class MRTPOConfig(GRPOConfig):
    """`GRPOConfig` plus MRTPO's method fields (docs/METHOD.md), checked like `core.config.TrainConfig`.

    TRL's own fields keep their meaning (`num_generations` is G, `max_completion_length` the longest
    response, `epsilon` the clip range, `beta` the KL weight, `loss_type` the aggregation). Raises
    `core.config.ConfigError` naming the field.
    """

    method: str = field(default="mrtpo", metadata={"help": "advantage estimator: mrtpo (GDPO routed to tokens), "
                                                            "gdpo or grpo (every token gets the response's advantage)"})
    routing: str = field(default="replay", metadata={"help": "where each reward's credit goes: replay (contrastive "
                                                              "JS), span (verifier spans, an oracle) or uniform (= GDPO)"})
    relevance: str = field(default=DEFAULT_RELEVANCE, metadata={"help": "token relevance for replay routing: js, js_specific, "
                                                          "swap, swap_specific, logp, logp_specific or auto"})
    auto_evidence: str = field(default="", metadata={"help": "relevance auto: whose measurements pick each family's "
                                                            "variant (core/evidence/NAME.json); empty: the model's "
                                                            "own when shipped, else tiny-multi"})
    sharpen: float = field(default=1.0, metadata={"help": "exponent on the normalised relevance u (1: as measured)"})
    lam: float = field(default=1.0, metadata={"help": "routing strength in [0, 1]: w = clip((1 - lam) + lam u, 0, w_max)"})
    w_max: float = field(default=5.0, metadata={"help": "upper clip of a routing weight (>= 1)"})
    routing_clip: str = field(default="clip", metadata={"help": "weight above w_max: clip (lost) or mass (redistributed)"})
    routing_shuffle: str = field(default="off", metadata={"help": "control: on permutes each (sample, reward)'s "
                                                                    "routing weights at random over its tokens"})
    routing_shuffle_seed: int = field(default=0, metadata={"help": "seed of routing_shuffle (step s: seed * 1000003 "
                                                                   "+ s), recorded"})
    entropy_q: float = field(default=0.2, metadata={"help": "routing=entropy (control): fraction of each "
                                                            "response's tokens, highest policy entropy, routed to"})
    reward_scales: dict | str | None = field(
        default=None, metadata={"help": "gdpo only (scale-matched control): factor c_k per reward name on its group "
                                        "advantage after GDPO's batch statistics (a dict or its JSON; 1.0 left out)"})
    family_weights: dict | str | None = field(
        default=None, metadata={"help": "weight per reward name (a verifier family), a dict or its JSON; names left "
                                        "out get 1.0. Sets TRL's reward_weights, so give one or the other"})
    eps: float = field(default=1e-4, metadata={"help": "added to every standard deviation of the normalisations"})
    replay_chunk: int = field(default=16, metadata={"help": "samples per forward pass of the contrastive replay"})
    replay_pairs: str = field(default="nonzero_adv", metadata={"help": "nonzero_adv: replay only the (sample, reward) "
                                                                       "pairs whose group advantage is nonzero (the "
                                                                       "others cannot change an advantage); all"})
    replay_dtype: str = field(default="auto", metadata={"help": "precision of the contrastive passes: auto (the "
                                                                 "run's, accelerate's autocast), float32 or bfloat16"})
    runs_dir: str | None = field(default="runs", metadata={"help": "where process 0 writes the run store the app "
                                                                     "reads (None: no run store)"})
    run_name: str = field(default="", metadata={"help": "run folder name ([A-Za-z0-9._-]); empty: automatic"})
    checkpoint_every: int = field(default=0, metadata={"help": "save the policy into the run store every this many "
                                                                "generation batches (and at the end); 0: only at the end"})
    keep_checkpoints: int = field(default=3, metadata={"help": "keep the newest this many run-store checkpoints, "
                                                                "deleting older ones as new ones are saved; 0 keeps all"})
    credit_samples: int = field(default=256, metadata={"help": "samples per generation batch whose token-level "
                                                               "credit map is stored (0: all); a larger batch keeps "
                                                               "whole groups and both outcomes of each reward"})
    credit_every: int = field(default=1, metadata={"help": "store the token-level credit map of batch 1, every "
                                                           "this-many-th batch after it and the last one"})
    eval_samples: int = field(default=4, metadata={"help": "held-out evaluation (MRTPOTrainer's held_out_dataset): "
                                                           "responses sampled per held-out prompt at the training "
                                                           "temperature, fixed seed"})
    eval_prompts: int = field(default=32, metadata={"help": "held-out evaluation: the first this many prompts of "
                                                            "held_out_dataset, scored at every run-store checkpoint"})
    print_steps: bool = field(default=False, metadata={"help": "print the run store's one-line summary of every "
                                                               "step (and where the run is) on process 0, as mrtpo "
                                                               "train does; off: the numbers go to TRL's logging only"})
    save_final_model: bool = field(default=True, metadata={"help": "save the final policy into output_dir at the end "
                                                                   "of train() (save_model, no hub push), besides the "
                                                                   "run store's checkpoints"})
    multi_objective_aggregation: str | None = field(
        default=None, metadata={"help": "how the rewards combine before routing (docs/METHOD.md, \"TRL's "
                                        "aggregations\"): normalize_then_sum (GDPO, per-reward group z-scores; "
                                        "scale_rewards has no effect, as in TRL) or sum_then_normalize (TRL's GRPO: "
                                        "weighted sum, group mean removed, scaled by scale_rewards); None: by "
                                        "method (mrtpo, gdpo: normalize_then_sum; grpo: sum_then_normalize)"})
    reward_contrasts: dict | str | None = field(
        default=None, metadata={"help": "per reward name, the prompt without what it checks, for replay (a dict or "
                                        "its JSON; core.contrast): verifier, column:NAME, match:REGEX, "
                                        "last_sentence, system, question, uniform, or core.contrast.text(fn) / "
                                        "prompt(fn). Rewards that are workbench verifiers default to verifier; "
                                        "any other reward left out is routed uniformly, said at start"})
    final_checkpoint: bool | None = field(
        default=None, metadata={"help": "save a resumable run-store checkpoint (weights, optimizer, RNG) at the end "
                                        "of train(); None: unless save_strategy is 'no'"})

    def __post_init__(self):
        refused = unsupported_feature(self)  # before GRPOConfig's checks, which import vLLM / DeepSpeed
        if refused:
            raise ConfigError(*refused)
        super().__post_init__()
        if isinstance(self.family_weights, str):
            try:
                self.family_weights = json.loads(self.family_weights)
            except json.JSONDecodeError as exc:
                raise ConfigError("family_weights", f"not a JSON object: {exc}") from exc
        for name in SHARED_FIELDS:
            message = field_error(name, getattr(self, name))
            if message:
                raise ConfigError(name, message)
        if isinstance(self.reward_scales, str):
            try:
                self.reward_scales = json.loads(self.reward_scales)
            except json.JSONDecodeError as exc:
                raise ConfigError("reward_scales", f"not a JSON object: {exc}") from exc
        if self.reward_scales:
            message = field_error("reward_scales", self.reward_scales)
            if message:
                raise ConfigError("reward_scales", message)
            if self.method != "gdpo":
                raise ConfigError("reward_scales", f"scales GDPO's per-reward advantages; set method gdpo, not "
                                                   f"{self.method}, or leave reward_scales empty")
        message = one_pass_error(self.relevance)
        if message:
            raise ConfigError("relevance", message)
        if self.routing_shuffle == "on" and self.method != "mrtpo":
            raise ConfigError("routing_shuffle", f"method {self.method} does not route; set method mrtpo")
        if self.family_weights is not None:
            message = field_error("reward_weights", self.family_weights)
            if message:
                raise ConfigError("family_weights", message)
            if self.reward_weights is not None:
                raise ConfigError("family_weights", "give reward weights once: family_weights (by name) or "
                                                    "reward_weights (a list in reward-function order)")
        self.reward_contrasts = reward_contrasts_field(self.reward_contrasts)
        self.multi_objective_aggregation = aggregation_field(self.method, self.multi_objective_aggregation)
        if self.runs_dir is not None and not str(self.runs_dir):
            raise ConfigError("runs_dir", "give a folder for the run store, or None for no run store")
        if self.loss_type == "vespo" or self.off_policy_mask_threshold is not None:
            raise ConfigError("loss_type", "vespo weights and the off-policy sequence mask read the sign of one "
                                           "advantage per sequence; MRTPO's advantages are per token, so they "
                                           "are not defined here (use dapo, grpo, bnpo, dr_grpo, cispo or sapo)")
        spans = self.steps_per_generation * self.num_iterations
        if spans % self.gradient_accumulation_steps:
            raise ConfigError("steps_per_generation", f"a generation batch spans steps_per_generation x "
                              f"num_iterations = {spans} micro-batches, not a whole number of optimizer steps of "
                              f"{self.gradient_accumulation_steps}; the run store records whole batches")

    def __getstate__(self):
        """Picklable (HF saves the arguments as training_args.bin): a contrast given as a function is kept as its
        description."""
        state = self.__dict__.copy()
        if state.get("reward_contrasts"):
            state["reward_contrasts"] = {k: v.describe() if callable(getattr(v, "arg", None)) else v
                                         for k, v in state["reward_contrasts"].items()}
        return state

    @property
    def saves_final_checkpoint(self) -> bool:
        """Whether train() ends with a resumable run-store checkpoint (`final_checkpoint`; None: unless
        save_strategy is "no")."""
        if self.final_checkpoint is not None:
            return bool(self.final_checkpoint)
        return str(getattr(self.save_strategy, "value", self.save_strategy)) != "no"

    @property
    def steps_per_batch(self) -> int:
        """Optimizer steps per generation batch (a run-store step is one generation batch)."""
        return self.steps_per_generation * self.num_iterations // self.gradient_accumulation_steps
