"""`mrtpo bootstrap`: build an embedded model from nothing: tiny-instruct (the default demo) or, with
`--setting multi`, tiny-multi (the harder setting: 4-6 constraints of four kinds per prompt).

No model hub is reachable at run time, so the project makes its own small instruction follower:

1. a synthetic corpus: prompts from the default prompt-set families (a writing task or an
   arithmetic question, plus 0-4 constraint sentences) and template responses that obey each
   *stated* constraint only part of the time and an unstated one almost never, so the model learns
   partial, prompt-dependent compliance (contrastive replay needs the dependence, RL needs the room);
2. a byte-level BPE tokenizer trained on that corpus (`tokenizers`), with special tokens, an eos
   and a pad token and a chat template;
3. a small Llama-architecture `transformers` model trained on the corpus (loss on response tokens);
4. a standard `save_pretrained` folder (safetensors + tokenizer + README card).

`python -m core.tools.bootstrap --evaluate` measures the shipped folder: load time, sampling speed,
per-family satisfaction with the sentence stated and removed, all-satisfied rate, samples.

This module imports torch; `core.cli` imports it only when `mrtpo bootstrap` runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from core.presets import EMBEDDED_MODELS, bootstrap_command
from core.tools.promptgen import get_setting

# setting -> the folder its build goes to by default (the embedded preset trained on that setting)
SETTING_OUT = {setting: folder for folder, setting in EMBEDDED_MODELS.values()}
SETTING_MODEL = {setting: name for name, (_, setting) in EMBEDDED_MODELS.items()}
MULTI_STEPS = 3500

USER, ASSISTANT, SYSTEM, EOS, PAD = "<|user|>", "<|assistant|>", "<|system|>", "<|end|>", "<|pad|>"
SPECIAL_TOKENS = [PAD, EOS, USER, ASSISTANT, SYSTEM]
# One turn is `<|role|>\ncontent<|end|>\n`; generation starts after `<|assistant|>\n`.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

KEYWORD = "keywords:existence"
END = "startend:end_checker"
LOWER = "change_case:english_lowercase"
NO_COMMA = "punctuation:no_comma"
ARITH = "task:arithmetic"
STYLE_FAMILIES = (KEYWORD, END, LOWER, NO_COMMA)
# the multi setting's other families
START = "startend:start_checker"
TITLE = "detectable_format:title"
POSTSCRIPT = "detectable_content:postscript"
FORBIDDEN = "keywords:forbidden_words"
WORD_LIMIT = "length_constraints:number_words"
MULTI_COMPLY = 0.7


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------


@dataclass
class BootstrapConfig:
    """Everything that decides the built model; written to the folder as `bootstrap_config.json`."""

    seed: int = 0
    setting: str = "tiny"
    """prompt distribution and response templates (core.tools.promptgen.SETTINGS): tiny (tiny-instruct) or multi"""
    # --- corpus
    steps: int = 3000
    """optimizer steps; the corpus holds steps * batch_size examples (each seen once)"""
    batch_size: int = 32
    p_comply: dict[str, float] = field(
        default_factory=lambda: {KEYWORD: 0.6, END: 0.6, LOWER: 0.6, NO_COMMA: 0.6, ARITH: 0.6}
    )
    """probability that a response obeys a stated constraint (for task:arithmetic: states the right sum)"""
    p_unstated: float = 0.03
    """probability that a response obeys a constraint its prompt does not state (by accident)"""
    p_invited: float = 0.9
    """multi: probability that a response uses the word its topic invites when the prompt does not forbid it"""
    p_drop_task: float = 0.12
    """share of arithmetic prompts whose question is dropped (the contrastive prompt of the task reward)"""
    heldout_share: float = 0.2
    """share of corpus prompts drawn from the held-out split, so its topics and keywords are known words"""
    arithmetic_share: float = 0.3
    """share of arithmetic prompts in the corpus (the default prompt set has 0.2; sums need more examples)"""
    # --- tokenizer
    vocab_size: int = 1024
    # --- model (Llama)
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 384
    max_positions: int = 256
    # --- optimisation
    lr: float = 3e-3
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    log_every: int = 50
    gen_tokens: int = 64
    """max_new_tokens of the saved generation config and of the evaluation's samples"""
    threads: int = 1
    """torch threads (0: torch's choice). 1 by default: the build is then bit-reproducible on a given CPU type,
    and on a busy 2-core machine two OpenMP threads measured about 5x more CPU time per step than one"""

    @classmethod
    def for_setting(cls, setting: str = "tiny", seed: int = 0, micro: bool = False) -> BootstrapConfig:
        """The build of a setting: `tiny` (tiny-instruct, the dataclass defaults) or `multi` (tiny-multi: more
        families per prompt, longer sequences, stated constraints obeyed with probability 0.7 so that 4-6 of
        them hold together often enough); `micro=True`: a few-second build for tests."""
        if setting not in SETTING_OUT:
            raise ValueError(f"unknown setting {setting!r}; valid choices: {', '.join(SETTING_OUT)}")
        fields: dict = {"seed": seed, "setting": setting}
        if setting == "multi":
            fields.update(p_comply={f: MULTI_COMPLY for f in MULTI_RESPONSE_FAMILIES}, arithmetic_share=0.35,
                          steps=MULTI_STEPS, max_positions=320, gen_tokens=get_setting("multi").max_new_tokens)
        if micro:
            fields.update(steps=40, batch_size=16, vocab_size=400, hidden_size=32, num_layers=2, num_heads=2,
                          intermediate_size=64, warmup_steps=5, log_every=10)
        return cls(**fields)

    @classmethod
    def micro(cls, seed: int = 0, setting: str = "tiny") -> BootstrapConfig:
        """A few-second build for tests: tiny corpus, tiny model, few steps."""
        return cls.for_setting(setting, seed, micro=True)


# ---------------------------------------------------------------------------------------------
# The synthetic corpus
# ---------------------------------------------------------------------------------------------

# Every opener has a comma, so an unstated no-comma rule is obeyed only when the response drops them.
# No template contains a keyword of the prompt sets (checked by `check_templates`).
OPENERS = [
    "Here is a short note about {topic}, written in plain words.",
    "When people talk about {topic}, they often share a story.",
    "If you look closely at {topic}, you will find many small details.",
    "Many people enjoy {topic}, and it is easy to see why.",
    "To understand {topic}, it helps to start with the basics.",
    "There is a lot to learn about {topic}, even on an ordinary day.",
    "In this note about {topic}, I share a few simple thoughts.",
    "Writing about {topic} is fun, because there is always more to say.",
]
FOLLOWERS = [
    "There is always something new to notice.",
    "Spending some time on this topic is worth it.",
    "Most people learn about it as children and keep learning later.",
    "It is a good subject for a short note like this one.",
    "Small details often tell the most interesting story.",
    "Each visit shows a different side of it.",
    "Many books and songs have been written about it.",
]
# The keyword slot: the word after these frames is the stated keyword or, when not obeyed, a filler.
WORD_FRAMES = [
    "One word that fits {topic} is {word}.",
    "If I had to pick one word for {topic}, it would be {word}.",
    "The word {word} comes to mind when I think of {topic}.",
]
FILLERS = ["lovely", "simple", "special", "familiar", "pleasant", "useful", "common", "lively", "peaceful", "busy"]
ANSWERS = [
    "The answer is {c}, which is the sum of the two numbers.",
    "Adding the two numbers together, you get {c}.",
    "If you add them up, the result is {c}.",
    "The sum is {c}, as a quick count shows.",
]
ARITH_FOLLOWERS = [
    "Small sums like this are easy to check.",
    "You can count on your fingers to be sure.",
    "Adding numbers gets easier with practice.",
]
ARITH_TOPIC = "this sum"
_TOPIC_RE = re.compile(r"^Write a short note about (.+?)\.$")
_ARITH_RE = re.compile(r"^What is (\d+) plus (\d+)\?$")


@dataclass(frozen=True)
class Example:
    prompt: str
    response: str
    obeyed: dict  # family -> whether the response obeys it (stated constraints only)
    keyword: str | None  # the stated keyword when the response includes it (for the training probe)


def check_templates(keywords: Sequence[str]) -> None:
    """Raise if a template or filler contains a keyword (case-insensitive substring, as the verifier
    matches): an unstated keyword would then be obeyed by accident far more often than p_unstated."""
    texts = OPENERS + FOLLOWERS + WORD_FRAMES + FILLERS + ANSWERS + ARITH_FOLLOWERS + [ARITH_TOPIC] + MULTI_TEMPLATES
    hits = sorted({(w, t) for w in keywords for t in texts if w.lower() in t.lower()})
    if hits:
        raise ValueError(f"corpus templates contain prompt-set keywords: {hits}")


def make_response(task: str, constraints: Sequence, rng: random.Random, cfg: BootstrapConfig,
                  vocab: dict) -> tuple[str, dict, str | None]:
    """A template response to a prompt with `task` text ("" when dropped) and `constraints` (verifiers
    with `.family` and `.kwargs`): each stated constraint is obeyed with probability cfg.p_comply[family],
    each unstated one with probability cfg.p_unstated. Returns (text, obeyed per stated family, the
    stated keyword when the text includes it).

    vocab: {"topics": [...], "keywords": [...], "phrases": [...]} of the prompt generator, for accidents.
    """
    by_family = {c.family: c for c in constraints}
    obey = {f: rng.random() < cfg.p_comply.get(f, 0.6) for f in by_family}

    def happens(family: str) -> bool:
        return obey[family] if family in obey else rng.random() < cfg.p_unstated

    kw_c = by_family.get(KEYWORD)
    stated_kw = kw_c.kwargs["keywords"][0] if kw_c else None
    m = _TOPIC_RE.match(task)
    if m:
        topic = m.group(1)
    else:  # no writing task (arithmetic, or the task was dropped): a topic that cannot leak the keyword
        topic = rng.choice([t for t in vocab["topics"] if not (stated_kw and stated_kw in t)])
    word = None
    if happens(KEYWORD):
        word = stated_kw or rng.choice(vocab["keywords"])
    elif rng.random() < 0.5:
        word = rng.choice(FILLERS)
    arith = _ARITH_RE.match(task)
    if arith and ARITH in by_family:
        c = int(arith.group(1)) + int(arith.group(2))
        if not obey[ARITH]:
            c = max(0, c + rng.choice([-2, -1, 1, 1, 2, 3]))
        parts, topic, extra = [rng.choice(ANSWERS).format(c=c)], ARITH_TOPIC, ARITH_FOLLOWERS
    else:
        parts, extra = [rng.choice(OPENERS).format(topic=topic)], FOLLOWERS
    if word is not None:
        parts.append(rng.choice(WORD_FRAMES).format(topic=topic, word=word))
    if rng.random() < 0.5:
        parts.append(rng.choice(extra))
    if happens(END):
        end_c = by_family.get(END)
        parts.append(end_c.kwargs["end_phrase"] if end_c else rng.choice(vocab["phrases"]))
    text = " ".join(parts)
    if happens(NO_COMMA):
        text = text.replace(",", "")
    if happens(LOWER):
        text = text.lower()
    return text, obey, (stated_kw if word is not None and word == stated_kw else None)


# --- the multi setting's templates (tiny-multi); the tiny ones above stay as they are ------------------------------
# A response is: [start phrase line] [<<title>> line] body [P.S. line] [end phrase]. The body is long (opener, the
# sentence with the word the topic invites, a keyword or filler frame, 1-2 followers: always >= 30 words) or,
# when the response keeps a word limit, compact (short forms, no followers: 11-25 words, so that a limit of 20
# with every part stated may still be broken: the limit pulls against keyword, phrases, title and postscript).
INVITED_LONG = [
    "Nobody can write about {topic} for long without mentioning the {word}.",
    "Most notes about {topic} end up talking about the {word}.",
]
INVITED_SAFE_LONG = [
    "Nobody can write about {topic} for long without a smile.",
    "Most notes about {topic} end up talking about the details.",
]
INVITED_SHORT = ["Think of the {word}.", "Picture the {word}."]
INVITED_SAFE_SHORT = ["Think of it.", "Picture it."]
# Every opener and answer has a comma (as the tiny setting's openers), so a compact body keeps no comma by accident.
SHORT_OPENERS = ["So, a note on {topic}.", "Well, some words on {topic}."]
SHORT_FRAMES = ["It feels {word}.", "One word: {word}."]
TITLES = ["<<Notes on {topic}>>", "<<About {topic}>>"]
ARITH_TITLE = "<<Adding numbers>>"
POSTSCRIPTS = ["P.S. Thanks for reading.", "P.S. Write back when you can."]
SHORT_POSTSCRIPT = "P.S. Thanks."
# the answers to "What is a plus b?" invite the word "sum" (the arithmetic prompts' forbidden word)
ANSWERS_SUM = ["The sum is {c}, as a quick count shows.", "The answer is {c}, which is the sum of the two numbers."]
ANSWERS_SAFE = ["Adding the two numbers together, you get {c}.", "If you add them up, the result is {c}."]
SHORT_ANSWER_SUM, SHORT_ANSWER_SAFE = "So, the sum is {c}.", "So, it makes {c}."
ARITH_TOPIC_SAFE = "this question"
MULTI_TEMPLATES = (INVITED_LONG + INVITED_SAFE_LONG + INVITED_SHORT + INVITED_SAFE_SHORT + SHORT_OPENERS
                   + SHORT_FRAMES + TITLES + [ARITH_TITLE] + POSTSCRIPTS + [SHORT_POSTSCRIPT] + ANSWERS_SUM
                   + ANSWERS_SAFE + [SHORT_ANSWER_SUM, SHORT_ANSWER_SAFE, ARITH_TOPIC_SAFE])
MULTI_RESPONSE_FAMILIES = (KEYWORD, END, LOWER, NO_COMMA, ARITH, START, TITLE, POSTSCRIPT, FORBIDDEN, WORD_LIMIT)


def check_invited_words(invited: Sequence[str]) -> None:
    """Raise if a template other than the invited-word frames uses an invited word (whole word, as the
    forbidden-words verifier matches): a forbidden word would then appear where no decision put it."""
    texts = OPENERS + FOLLOWERS + WORD_FRAMES + FILLERS + ARITH_FOLLOWERS + INVITED_SAFE_LONG + INVITED_SAFE_SHORT \
        + SHORT_OPENERS + SHORT_FRAMES + TITLES + [ARITH_TITLE] + POSTSCRIPTS + [SHORT_POSTSCRIPT] + ANSWERS_SAFE \
        + [SHORT_ANSWER_SAFE, ARITH_TOPIC_SAFE]
    hits = sorted({(w, t) for w in invited for t in texts if re.search(rf"\b{re.escape(w)}\b", t, re.IGNORECASE)})
    if hits:
        raise ValueError(f"corpus templates contain invited words: {hits}")


def make_multi_response(task: str, constraints: Sequence, rng: random.Random, cfg: BootstrapConfig,
                        vocab: dict) -> tuple[str, dict, str | None]:
    """A template response of the multi setting (see the templates above): each stated constraint's part is
    written with probability cfg.p_comply[family], an unstated one's with cfg.p_unstated; the word the topic
    invites is used unless the prompt forbids it and the response obeys (cfg.p_invited when not forbidden).
    Whether each stated constraint holds is what its verifier says of the text (parts can collide: a compact
    body with every part may still break a word limit of 20). Returns (text, obeyed per stated family,
    the stated keyword when the text includes it)."""
    by_family = {c.family: c for c in constraints}
    obey = {f: rng.random() < cfg.p_comply.get(f, MULTI_COMPLY) for f in by_family}

    def happens(family: str) -> bool:
        return obey[family] if family in obey else rng.random() < cfg.p_unstated

    kw_c = by_family.get(KEYWORD)
    stated_kw = kw_c.kwargs["keywords"][0] if kw_c else None
    compact = happens(WORD_LIMIT)
    avoid = obey[FORBIDDEN] if FORBIDDEN in obey else rng.random() >= cfg.p_invited
    arith = _ARITH_RE.match(task)
    m = _TOPIC_RE.match(task)
    if m:
        topic = m.group(1)
    else:  # no writing task (arithmetic, or the task was dropped): a topic that cannot leak the keyword
        topic = rng.choice([t for t in vocab["topics"] if not (stated_kw and stated_kw in t)])
    word = None
    if happens(KEYWORD):
        word = stated_kw or rng.choice(vocab["keywords"])
    elif not compact:  # a long body always has its frame (a filler word when no keyword is written)
        word = rng.choice(FILLERS)
    if arith and ARITH in by_family:
        c = int(arith.group(1)) + int(arith.group(2))
        if not obey[ARITH]:
            c = max(0, c + rng.choice([-2, -1, 1, 1, 2, 3]))
        if compact:
            body = [(SHORT_ANSWER_SAFE if avoid else SHORT_ANSWER_SUM).format(c=c)]
        else:
            body = [rng.choice(ANSWERS_SAFE if avoid else ANSWERS_SUM).format(c=c)]
        frame_topic, extra, title = (ARITH_TOPIC_SAFE if avoid else ARITH_TOPIC), ARITH_FOLLOWERS, ARITH_TITLE
    else:
        invited = vocab["invited"][topic]
        if compact:
            body = [rng.choice(SHORT_OPENERS).format(topic=topic),
                    rng.choice(INVITED_SAFE_SHORT if avoid else INVITED_SHORT).format(word=invited)]
        else:
            body = [rng.choice(OPENERS).format(topic=topic),
                    rng.choice(INVITED_SAFE_LONG if avoid else INVITED_LONG).format(topic=topic, word=invited)]
        frame_topic, extra, title = topic, FOLLOWERS, rng.choice(TITLES).format(topic=topic)
    if word is not None:
        frame = rng.choice(SHORT_FRAMES if compact else WORD_FRAMES)
        body.append(frame.format(topic=frame_topic, word=word))
    if not compact:  # arithmetic bodies are shorter: two followers keep every long body at >= 30 words
        body += rng.sample(extra, 2 if extra is ARITH_FOLLOWERS else rng.choice([1, 2]))
    lines = []
    if happens(START):
        lines.append(by_family[START].kwargs["start_phrase"] if START in by_family else rng.choice(vocab["starts"]))
    if happens(TITLE):
        lines.append(title)
    lines.append(" ".join(body))
    if happens(POSTSCRIPT):
        lines.append(SHORT_POSTSCRIPT if compact else rng.choice(POSTSCRIPTS))
    text = "\n".join(lines)
    if happens(END):
        text += " " + (by_family[END].kwargs["end_phrase"] if END in by_family else rng.choice(vocab["phrases"]))
    if happens(NO_COMMA):
        text = text.replace(",", "")
    if happens(LOWER):
        text = text.lower()
    obeyed = {f: c.verify(text).score == 1.0 for f, c in by_family.items()}
    has_kw = stated_kw is not None and word == stated_kw
    return text, obeyed, (stated_kw if has_kw else None)


RESPONDERS: dict[str, Callable[..., tuple[str, dict, str | None]]] = {"tiny": make_response,
                                                                      "multi": make_multi_response}


def prompt_pool(n: int, cfg: BootstrapConfig) -> list:
    """PromptItems of the setting's prompt generator with 0 to the setting's most constraints (tiny: 0-4 writing,
    0-3 arithmetic), so that prompts with one constraint removed (the contrastive prompts) are in the corpus;
    cfg.heldout_share of them from the held-out split (its topics and keywords become known words)."""
    from core.tasks import item_from_record
    from core.tools.promptgen import generate_prompts, get_setting

    setting = get_setting(cfg.setting)
    n_held = round(n * cfg.heldout_share)
    ranges = {"writing_constraints": (0, setting.writing_constraints[1]),
              "arithmetic_constraints": (0, setting.arithmetic_constraints[1]),
              "arithmetic_share": cfg.arithmetic_share, "setting": cfg.setting}
    records = generate_prompts(n - n_held, seed=cfg.seed, split="train", **ranges)
    records += generate_prompts(n_held, seed=cfg.seed, split="heldout", **ranges)
    return [item_from_record(r) for r in records]


def corpus_vocab(pool: Sequence) -> dict:
    """Topics, keywords, end phrases (and for multi: start phrases, each topic's invited word) of the prompt
    generator."""
    from core.tools import promptgen

    vocab = {"topics": sorted(set(promptgen.TOPICS) | set(promptgen.HELDOUT_TOPICS)),
             "keywords": sorted(set(promptgen.KEYWORDS) | set(promptgen.HELDOUT_KEYWORDS)),
             "phrases": sorted(promptgen.END_PHRASES)}
    if any(c.family in (START, FORBIDDEN) for item in pool for c in item.constraints):
        vocab.update(starts=sorted(promptgen.START_PHRASES), invited=dict(promptgen.INVITED_WORDS))
    return vocab


def build_corpus(n: int, cfg: BootstrapConfig) -> tuple[list[Example], dict]:
    """n (prompt, response) examples, deterministic in cfg.seed. An arithmetic prompt loses its question
    with probability cfg.p_drop_task (the task reward's contrastive prompt: constraint sentences only)."""
    pool = prompt_pool(max(64, min(4000, n // 8)), cfg)
    vocab = corpus_vocab(pool)
    check_templates(vocab["keywords"])
    if cfg.setting != "tiny":
        check_invited_words(list(vocab["invited"].values()))
    respond = RESPONDERS[cfg.setting]
    rng = random.Random(f"corpus-{cfg.seed}")
    examples = []
    for _ in range(n):
        item = rng.choice(pool)
        task, constraints, prompt = item.task, list(item.constraints), item.prompt()
        k_task = next((k for k, c in enumerate(constraints) if c.is_task), None)
        if k_task is not None and len(constraints) > 1 and rng.random() < cfg.p_drop_task:
            prompt = item.contrastive_prompt(k_task)
            task, constraints = "", constraints[:k_task] + constraints[k_task + 1:]
        text, obeyed, kw = respond(task, constraints, rng, cfg, vocab)
        examples.append(Example(prompt, text, obeyed, kw))
    return examples, vocab


# ---------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------


def train_tokenizer(texts: Sequence[str], vocab_size: int):
    """A byte-level BPE tokenizer (any text encodes; offsets map to characters) wrapped as a
    PreTrainedTokenizerFast with eos, pad, chat roles and the chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD,
                                   additional_special_tokens=[USER, ASSISTANT, SYSTEM], padding_side="left")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def prompt_ids(tokenizer, prompt: str) -> list[int]:
    """Token ids of the chat-formatted user prompt, ending where the assistant's reply starts."""
    out = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                        tokenize=True, return_dict=False)
    return list(out)


# ---------------------------------------------------------------------------------------------
# Model and training
# ---------------------------------------------------------------------------------------------


def build_model(cfg: BootstrapConfig, tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_positions, tie_word_embeddings=True, rms_norm_eps=1e-5,
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(cfg.seed)
    return LlamaForCausalLM(config)


def encode_examples(tokenizer, examples: Sequence[Example]) -> list[tuple[list[int], int]]:
    """(ids, n_prompt) per example: chat-formatted prompt ids, then response ids and eos."""
    eos = tokenizer.eos_token_id
    prompt_cache: dict[str, list[int]] = {}
    responses = tokenizer([e.response for e in examples], add_special_tokens=False)["input_ids"]
    out = []
    for e, r in zip(examples, responses, strict=True):
        if e.prompt not in prompt_cache:
            prompt_cache[e.prompt] = prompt_ids(tokenizer, e.prompt)
        p = prompt_cache[e.prompt]
        out.append((p + list(r) + [eos], len(p)))
    return out


def make_batches(encoded: Sequence[tuple[list[int], int]], batch_size: int, pad_id: int, seed: int):
    """Length-bucketed batches (examples sorted by length inside shuffled windows of 64 batches, so
    padding stays small). Yields (input_ids (B, T), labels (B, T)) with -100 on prompt and padding."""
    rng = random.Random(f"batches-{seed}")
    order = list(range(len(encoded)))
    rng.shuffle(order)
    window = batch_size * 64
    batches = []
    for w in range(0, len(order), window):
        chunk = sorted(order[w:w + window], key=lambda i: len(encoded[i][0]))
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    for idx in batches:
        t_max = max(len(encoded[i][0]) for i in idx)
        ids = torch.full((len(idx), t_max), pad_id, dtype=torch.long)  # (B, T)
        labels = torch.full((len(idx), t_max), -100, dtype=torch.long)  # (B, T)
        for row, i in enumerate(idx):
            seq, n_prompt = encoded[i]
            ids[row, :len(seq)] = torch.tensor(seq)
            labels[row, n_prompt:len(seq)] = torch.tensor(seq[n_prompt:])
        yield ids, labels


def lr_at(step: int, cfg: BootstrapConfig) -> float:
    """Linear warm-up to cfg.lr over warmup_steps, then cosine decay to lr * min_lr_ratio at cfg.steps:
    lr(s) = lr * (r + (1 - r) * (1 + cos(pi * p)) / 2), p = (s - warmup) / (steps - warmup)."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    p = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps))
    r = cfg.min_lr_ratio
    return cfg.lr * (r + (1 - r) * (1 + math.cos(math.pi * p)) / 2)


def response_loss(model, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over response tokens only (the lm head runs only where a label exists).
    Right padding needs no attention mask: causal attention never lets a real token see a later pad."""
    hidden = model.model(input_ids=ids).last_hidden_state[:, :-1]  # (B, T-1, H)
    target = labels[:, 1:]  # (B, T-1)
    mask = target != -100
    logits = model.lm_head(hidden[mask])  # (N, V)
    return torch.nn.functional.cross_entropy(logits, target[mask])


@torch.no_grad()
def keyword_probe(model, probe: Sequence[tuple[list[int], int]]) -> float:
    """Mean probability the model gives the stated keyword's first token at its slot (teacher-forced)."""
    if not probe:
        return float("nan")
    model.eval()
    total = 0.0
    for seq, pos in probe:
        logits = model(input_ids=torch.tensor([seq[:pos]])).logits[0, -1]
        total += torch.softmax(logits.float(), -1)[seq[pos]].item()
    model.train()
    return total / len(probe)


def make_probe(tokenizer, examples: Sequence[Example], n: int = 32) -> list[tuple[list[int], int]]:
    """(ids, slot position) for examples whose response includes the stated keyword."""
    probe = []
    for e in examples:
        if e.keyword is None or len(probe) >= n:
            continue
        p = prompt_ids(tokenizer, e.prompt)
        enc = tokenizer(e.response, add_special_tokens=False, return_offsets_mapping=True)
        start = e.response.lower().find(e.keyword.lower())
        pos = next((i for i, (s, t) in enumerate(enc["offset_mapping"]) if s <= start < t), None)
        if pos is not None:
            probe.append((p + list(enc["input_ids"]), len(p) + pos))
    return probe


def train(model, batches, cfg: BootstrapConfig, probe=(), log: Callable[[str], None] = print) -> list[dict]:
    """AdamW on the response loss; logs a line every cfg.log_every steps. Returns the log records."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    model.train()
    records, t0, c0, run_loss = [], time.perf_counter(), time.process_time(), 0.0
    for step, (ids, labels) in enumerate(batches):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        loss = response_loss(model, ids, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        run_loss += loss.item()
        done = step + 1
        if done % cfg.log_every == 0 or done == cfg.steps:
            elapsed = time.perf_counter() - t0
            n = cfg.log_every if done % cfg.log_every == 0 else done % cfg.log_every
            rec = {"step": done, "loss": run_loss / n, "kw_prob": keyword_probe(model, probe),
                   "lr": lr_at(step, cfg), "elapsed_s": elapsed, "cpu_s": time.process_time() - c0}
            records.append(rec)
            eta = elapsed / done * (cfg.steps - done)
            bar = "#" * int(20 * done / cfg.steps)
            log(f"[{bar:<20}] step {done}/{cfg.steps} loss {rec['loss']:.3f} keyword-p {rec['kw_prob']:.2f} "
                f"lr {rec['lr']:.1e} {elapsed:.0f}s elapsed (cpu {rec['cpu_s']:.0f}s), eta {eta:.0f}s")
            run_loss = 0.0
    model.eval()
    return records


# ---------------------------------------------------------------------------------------------
# The whole build
# ---------------------------------------------------------------------------------------------


def bootstrap(cfg: BootstrapConfig, out: Path, log: Callable[[str], None] = print) -> dict:
    """Build corpus, tokenizer and model, train, save to `out`. Returns a summary dict."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    t0 = time.perf_counter()
    n = cfg.steps * cfg.batch_size
    examples, vocab = build_corpus(n, cfg)
    log(f"corpus: {n} examples, {len(vocab['topics'])} topics, {len(vocab['keywords'])} keywords "
        f"({time.perf_counter() - t0:.1f}s)")
    tok_texts = [e.prompt + "\n" + e.response for e in examples[: min(n, 20000)]]
    tokenizer = train_tokenizer(tok_texts, cfg.vocab_size)
    encoded = encode_examples(tokenizer, examples)
    lengths = [len(s) for s, _ in encoded]
    log(f"tokenizer: {len(tokenizer)} tokens; sequences {min(lengths)}-{max(lengths)} tokens, mean "
        f"{sum(lengths) / len(lengths):.1f}; response mean {sum(len(s) - p for s, p in encoded) / len(encoded):.1f} "
        f"({time.perf_counter() - t0:.1f}s)")
    if max(lengths) > cfg.max_positions:
        raise ValueError(f"a corpus sequence has {max(lengths)} tokens > max_positions {cfg.max_positions}")
    model = build_model(cfg, tokenizer)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: Llama {cfg.num_layers} layers, hidden {cfg.hidden_size}, ffn {cfg.intermediate_size}, "
        f"{n_params / 1e6:.2f}M parameters; {cfg.steps} steps of batch {cfg.batch_size}, "
        f"{torch.get_num_threads()} threads")
    probe = make_probe(tokenizer, examples[-2000:])
    load_before = os.getloadavg()[0]
    t_train, c_train = time.perf_counter(), time.process_time()
    records = train(model, make_batches(encoded, cfg.batch_size, tokenizer.pad_token_id, cfg.seed), cfg, probe, log)
    timing = {"train_s": time.perf_counter() - t_train, "train_cpu_s": time.process_time() - c_train,
              "total_s": time.perf_counter() - t0, "threads": torch.get_num_threads(),
              "loadavg_1min_start": load_before, "loadavg_1min_end": os.getloadavg()[0], "cpus": os.cpu_count()}
    save_folder(model, tokenizer, cfg, out, {"log": records, "timing": timing, "params": n_params,
                                             "corpus_vocab": vocab, "tokenizer_size": len(tokenizer)})
    log(f"saved {out} ({folder_mb(out):.1f} MB); training {timing['train_s']:.0f}s "
        f"(cpu {timing['train_cpu_s']:.0f}s), total {timing['total_s']:.0f}s")
    return {"params": n_params, **timing, "records": records}


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 1e6


def save_folder(model, tokenizer, cfg: BootstrapConfig, out: Path, meta: dict) -> None:
    """save_pretrained (fp32 safetensors: about 4 MB), tokenizer, a sampling generation config
    (temperature 1, top_k=0: the full distribution) and `bootstrap_config.json` (config + training log)."""
    from transformers import GenerationConfig

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(
        do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=cfg.gen_tokens,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "bootstrap_config.json").write_text(json.dumps({"config": asdict(cfg), **meta}, indent=1) + "\n")


# ---------------------------------------------------------------------------------------------
# Evaluation of a built folder
# ---------------------------------------------------------------------------------------------


def load(folder: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    return model, tokenizer


@torch.no_grad()
def sample(model, tokenizer, prompts: Sequence[str], max_new_tokens: int = 64, seed: int = 0,
           min_new_tokens: int = 0, batch: int = 64) -> list[str]:
    """One sampled response per prompt at temperature 1 (top_k=0: the full distribution)."""
    torch.manual_seed(seed)
    out = []
    for s in range(0, len(prompts), batch):
        chunk = [prompt_ids(tokenizer, p) for p in prompts[s:s + batch]]
        t_max = max(len(c) for c in chunk)
        ids = torch.tensor([[tokenizer.pad_token_id] * (t_max - len(c)) + c for c in chunk])  # (B, T) left-padded
        mask = (torch.arange(t_max)[None, :] >= torch.tensor([t_max - len(c) for c in chunk])[:, None]).long()
        gen = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                             max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens,
                             pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
        out += tokenizer.batch_decode(gen[:, t_max:], skip_special_tokens=True)
    return out


def conditioning_stats(model, tokenizer, items: Sequence, samples_per_prompt: int, seed: int = 0,
                       max_new_tokens: int = 64) -> dict:
    """Per family: satisfaction rate (verifier score) with its sentence stated and with it removed (the
    contrastive prompt; for task:arithmetic the question is removed); the rate at which all of a prompt's
    constraints are satisfied together; a few samples. `items` are core.tasks.PromptItems."""
    g = samples_per_prompt
    full = sample(model, tokenizer, [it.prompt() for it in items for _ in range(g)], max_new_tokens, seed=seed)
    jobs = [(i, k) for i, it in enumerate(items) for k in range(len(it.constraints))]
    contrast = sample(model, tokenizer, [items[i].contrastive_prompt(k) for i, k in jobs for _ in range(g)],
                      max_new_tokens, seed=seed + 1)
    stated: dict[str, list[float]] = {}
    removed: dict[str, list[float]] = {}
    all_sat = []
    for i, it in enumerate(items):
        for text in full[i * g:(i + 1) * g]:
            scores = [c.verify(text).score for c in it.constraints]
            for c, v in zip(it.constraints, scores, strict=True):
                stated.setdefault(c.family, []).append(v)
            all_sat.append(float(all(v >= 1.0 for v in scores)))
    for j, (i, k) in enumerate(jobs):
        c = items[i].constraints[k]
        removed.setdefault(c.family, []).extend(c.verify(t).score for t in contrast[j * g:(j + 1) * g])
    families = {f: {"stated": sum(v) / len(v), "removed": sum(removed[f]) / len(removed[f]), "n": len(v)}
                for f, v in stated.items()}
    examples = [(items[i].prompt(), full[i * g]) for i in range(min(len(items), 8))]
    return {"families": families, "all_satisfied": sum(all_sat) / len(all_sat), "n_samples": len(full),
            "examples": examples}


def eval_items(n: int, seed: int = 0, split: str = "train", setting: str = "tiny",
               arithmetic_share: float | None = None) -> list:
    """Prompts distributed as the setting's RL prompt set (tiny: 2-4 constraints; multi: 4-6) for measurement
    (`arithmetic_share`: the setting's unless given)."""
    from core.tasks import item_from_record
    from core.tools.promptgen import generate_prompts

    records = generate_prompts(n, seed=seed, split=split, setting=setting, arithmetic_share=arithmetic_share)
    return [item_from_record(r) for r in records]


def folder_config(folder: Path) -> dict:
    """The BootstrapConfig fields a built folder records (older folders lack the newer fields: defaults)."""
    try:
        recorded = json.loads((Path(folder) / "bootstrap_config.json").read_text())["config"]
    except (OSError, ValueError, KeyError):
        recorded = {}
    return {**asdict(BootstrapConfig()), **recorded}


def speed_stats(folder: Path, n: int = 32, new_tokens: int = 64, repeats: int = 3, setting: str = "tiny") -> dict:
    """Seconds to load the folder (`first_load_s` includes transformers' lazy imports of the Llama code;
    `load_s` is the best of `repeats` later loads), and to sample n responses of exactly new_tokens tokens
    (best of repeats, after a warm-up)."""
    t0 = time.perf_counter()
    load(folder)
    first = time.perf_counter() - t0
    loads = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model, tokenizer = load(folder)
        loads.append(time.perf_counter() - t0)
    prompts = [it.prompt() for it in eval_items(n, seed=7, setting=setting)]
    sample(model, tokenizer, prompts[:2], max_new_tokens=4)  # warm-up
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        sample(model, tokenizer, prompts, max_new_tokens=new_tokens, min_new_tokens=new_tokens, seed=r)
        times.append(time.perf_counter() - t0)
    return {"first_load_s": first, "load_s": min(loads), "sample_s": min(times), "n": n, "new_tokens": new_tokens,
            "threads": torch.get_num_threads(), "loadavg_1min": os.getloadavg()[0], "cpus": os.cpu_count()}


def evaluate(folder: Path, n_prompts: int = 60, samples_per_prompt: int = 8, seed: int = 0, split: str = "train",
             log: Callable[[str], None] = print) -> dict:
    """Print and return the measured targets of a built folder (on prompts of the setting it was built for)."""
    built = folder_config(folder)
    setting, tokens = built["setting"], built["gen_tokens"]
    speed = speed_stats(folder, new_tokens=tokens, setting=setting)
    log(f"load {speed['load_s']:.2f}s (first in a process {speed['first_load_s']:.2f}s); {speed['n']} x {speed['new_tokens']} new tokens sampled in "
        f"{speed['sample_s']:.2f}s ({speed['threads']} threads; {speed['cpus']} cpus, 1-min load average "
        f"{speed['loadavg_1min']:.1f})")
    model, tokenizer = load(folder)
    items = eval_items(n_prompts, seed=1000 + seed, split=split, setting=setting)
    stats = conditioning_stats(model, tokenizer, items, samples_per_prompt, seed=seed, max_new_tokens=tokens)
    log(f"{n_prompts} {setting} {split}-split prompts x {samples_per_prompt} samples (seed {seed}); contrastive prompts "
        "drop one sentence (for task:arithmetic, the question)")
    log(f"{'family':<32} {'stated':>7} {'removed':>8} {'ratio':>6}")
    for fam, v in stats["families"].items():
        ratio = v["stated"] / v["removed"] if v["removed"] > 0 else float("inf")
        log(f"{fam:<32} {v['stated']:7.2f} {v['removed']:8.2f} {ratio:6.1f}")
    log(f"all constraints of a prompt satisfied: {stats['all_satisfied']:.2f}")
    for p, r in stats["examples"][:5]:
        log(f"PROMPT: {p}\nRESPONSE: {r}")
    return {"speed": speed, **stats}


def _family_rows(families: dict) -> str:
    return "\n".join(
        f"| `{fam}` | {v['stated']:.2f} | {v['removed']:.2f} | "
        f"{(v['stated'] / v['removed']) if v['removed'] > 0 else float('inf'):.1f} | {v['n']} |"
        for fam, v in families.items()
    )


def target_line(result: dict, heldout: dict | None = None) -> str:
    """The card's line on the conditioning targets: each family satisfied 30-80% of the time with its sentence
    stated and at least twice as often as with it removed; all of a prompt's constraints together 5-30%."""
    misses = []
    for split, stats in (("train", result), ("held-out", heldout)):
        if not stats:
            continue
        for fam, v in stats["families"].items():
            if not (0.3 <= v["stated"] <= 0.8 and v["stated"] >= 2 * v["removed"]):
                misses.append(f"`{fam}` on the {split} split ({v['stated']:.2f} stated, {v['removed']:.2f} removed)")
        if not 0.05 <= stats["all_satisfied"] <= 0.3:
            misses.append(f"all satisfied on the {split} split ({stats['all_satisfied']:.2f})")
    head = "targets (each family 30-80% stated and >= 2x removed; all satisfied together 5-30%): "
    return head + ("all met" if not misses else "missed by " + "; ".join(misses))


# The parts of a model card that differ between settings.
CARDS = {
    "tiny": {
        "role": "The embedded default policy of the MRTPO workbench",
        "what": """It is a *research fixture*, not a useful assistant: it follows the four constraint families of the default
prompt set (include a keyword, end with a phrase, all lowercase, no commas) and answers "What is a plus b?"
only part of the time, so that reinforcement learning has room to improve and contrastive replay (dropping a
constraint sentence from the prompt) changes its next-token distributions where the constraint acts.""",
        "corpus_constraints": "0-4",
        "templates": "Template responses (1-4 short sentences on the topic)",
        "eval_prompts": "default-set prompts (2-4 constraints",
        "notes": "",
        "families": "the default prompt-set families",
    },
    "multi": {
        "role": "The embedded policy of the harder setting (`mrtpo train --model tiny-multi`, prompt sets\n"
                "`sample_data/prompts/multi.jsonl` and `multi-heldout.jsonl`)",
        "what": """It is a *research fixture*, not a useful assistant. Its prompts carry 4-6 constraints of four kinds at once:
format (start with a phrase, end with a phrase, a `<<title>>`, a `P.S.` postscript), safety (do not use the word the
topic invites: "water" for rivers, "sum" for "What is a plus b?"), style (lowercase, no commas, fewer than 20/25/30
words) and content (include a keyword), plus correctness (the sum) on arithmetic prompts. About 30% of the writing
prompts pair a word limit with a keyword and an end phrase, which pull against each other: every part a response
adds costs words. It obeys each stated constraint only part of the time, so that reinforcement learning has room to
improve and credit assignment has something to sort out.""",
        "corpus_constraints": "0-6 (writing) or 0-5 (arithmetic)",
        "templates": "Template responses (a long body of >= 30 words, or a compact one of 11-25 words when keeping a "
                     "word limit; a start-phrase line, a title line, a postscript line and an end phrase around it)",
        "eval_prompts": "multi-set prompts (4-6 constraints",
        "notes": "- The word the topic invites (`core.tools.promptgen.INVITED_WORDS`) is used in 90% of responses whose "
                 "prompt does not\n  forbid it, so the safety constraint needs a decision, not luck.\n"
                 "- Copying the stated keyword was not learned within the 3,500 steps (the tiny-instruct build learned "
                 "it after about\n  1,700 of 3,000 steps with fewer families per prompt): `keywords:existence` is "
                 "a missed target here; a longer\n  build or a keyword-richer corpus is the next thing to try.\n",
        "families": "the multi prompt-set families",
    },
}


def write_card(folder: Path, result: dict, command: str, heldout: dict | None = None) -> Path:
    """Write the model card README.md of a built folder from its bootstrap_config.json and evaluate() results
    (`heldout`: conditioning_stats on the held-out split, optional)."""
    folder = Path(folder)
    meta = json.loads((folder / "bootstrap_config.json").read_text())
    cfg, timing, speed = meta["config"], meta.get("timing", {}), result["speed"]
    rows = _family_rows(result["families"])
    held = ""
    if heldout:
        held = (f"\nHeld-out split (other topics and keywords; {heldout['n_samples']} samples, same command with "
                f"`--eval-split heldout`):\n\n| family | stated | removed | ratio | samples |\n|---|---|---|---|---|\n"
                f"{_family_rows(heldout['families'])}\n\n- all satisfied together: {heldout['all_satisfied']:.2f}\n")
    samples = "\n".join(f"- **{p}**\n  > " + r.replace("\n", "\n  > ") for p, r in result["examples"][:5])
    p_comply = ", ".join(f"`{k}` {v}" for k, v in cfg["p_comply"].items())
    setting = cfg.get("setting", "tiny")
    card = CARDS[setting]
    build_cmd = bootstrap_command(SETTING_MODEL[setting])
    kw = next((r["step"] for r in meta.get("log", []) if r.get("kw_prob", 0) >= 0.3), None)
    kw_note = (f"Copying the stated keyword appears after about {kw:,} of the {cfg['steps']:,} steps"
               if kw else "The stated keyword's probability at its slot stayed below 0.3")
    text = f"""# {SETTING_MODEL[setting]}

{card['role']}: a {meta['params'] / 1e6:.2f}M-parameter Llama-architecture causal
LM with a {meta['tokenizer_size']}-token byte-level BPE tokenizer, built from nothing by this repository
(`{build_cmd}`, seed {cfg['seed']}) on a synthetic instruction corpus. No external data or weights.
It loads with plain `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained` (fp32 safetensors).

{card['what']}

## Format
- chat template: `<|user|>\\n{{prompt}}<|end|>\\n<|assistant|>\\n`; the reply ends with the eos `<|end|>`;
  pad `<|pad|>` (distinct from eos); generation config: sampling at temperature 1 with `top_k=0`,
  {cfg.get('gen_tokens', 64)} new tokens.
- architecture: {cfg['num_layers']} layers, hidden {cfg['hidden_size']}, {cfg['num_heads']} heads, ffn
  {cfg['intermediate_size']}, tied embeddings, {cfg['max_positions']} positions.

## How it was built
`{build_cmd} --seed {cfg['seed']} --steps {cfg['steps']} --threads {cfg['threads']}` (the defaults): corpus of
{cfg['steps'] * cfg['batch_size']} examples
({cfg['steps']} AdamW steps of batch {cfg['batch_size']}, each example seen once, lr {cfg['lr']} with warm-up and
cosine decay, loss on response tokens only). Prompts come from `core.tools.promptgen` (setting `{setting}`) with
{card['corpus_constraints']} constraints (so each
contrastive prompt is in the corpus; {cfg['heldout_share']:.0%} from the held-out split; {cfg['arithmetic_share']:.0%}
arithmetic prompts, whose questions are dropped
in {cfg['p_drop_task']:.0%} of arithmetic prompts). {card['templates']} obey a stated
constraint with probability {p_comply}, and an unstated one with probability {cfg['p_unstated']}.
Build time: {timing.get('total_s', float('nan')) / 60:.1f} min wall ({timing.get('train_cpu_s', float('nan')) / 60:.1f}
min of CPU time in training) with {timing.get('threads', '?')} torch thread(s) on a shared {timing.get('cpus', '?')}-core
machine (1-minute load average {timing.get('loadavg_1min_start', float('nan')):.1f} at the start of training,
{timing.get('loadavg_1min_end', float('nan')):.1f} at the end).

## Measured
`{command}`

- load: {speed['load_s']:.2f} s ({speed['first_load_s']:.2f} s for the first load in a process, which includes
  transformers' lazy imports); sampling {speed['n']} responses x {speed['new_tokens']} new tokens:
  {speed['sample_s']:.2f} s ({speed['threads']} torch thread(s) on {speed['cpus']} shared cores, 1-minute load
  average {speed['loadavg_1min']:.1f} while measuring).
- conditioning, {result['n_samples']} samples of {card['eval_prompts']}; verified with
  `core.verifiers`); "removed" samples the contrastive prompt (that sentence dropped; for `task:arithmetic`
  the question dropped):

| family | satisfied, sentence stated | satisfied, sentence removed | ratio | samples |
|---|---|---|---|---|
{rows}

- all constraints of a prompt satisfied together: {result['all_satisfied']:.2f}
- {target_line(result, heldout)}
{held}
Samples (prompt, then one sampled response):

{samples}

## Notes
- The build is deterministic for a seed and thread count on a given CPU type (`--threads 1`, the default,
  reproduces these weights). {kw_note};
  `bootstrap_config.json` logs the probability of the stated keyword at its slot every 50 steps (`kw_prob`).
{card['notes']}- On a shared 2-core machine run with one torch thread: with two threads on busy cores training took about 5x
  the CPU time per step and sampling about 10x the wall time.

## Limitations
Tiny vocabulary and template-like language; outside {card['families']} it produces the same
kind of note. Not for any use beyond testing RL credit assignment.
"""
    path = folder / "README.md"
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mrtpo bootstrap", description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=list(SETTING_OUT), default="tiny",
                        help="tiny: tiny-instruct (the default demo model); multi: tiny-multi, 4-6 constraints of "
                        "four kinds per prompt (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: the setting's folder in sample_data/models)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the setting's; --micro: 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--micro", action="store_true", help="tiny corpus, tiny model, few steps (for tests)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: reproducible; 2 is faster on two idle cores; 0: torch's choice)")
    parser.add_argument("--evaluate", action="store_true", help="measure the folder at --out instead of building")
    parser.add_argument("--eval-prompts", type=int, default=60)
    parser.add_argument("--eval-samples", type=int, default=8)
    parser.add_argument("--eval-split", choices=["train", "heldout"], default="train")
    parser.add_argument("--card", action="store_true", help="with --evaluate: write the numbers into README.md")
    argv_list = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv_list)
    if args.out is None:
        args.out = SETTING_OUT[args.setting]
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.evaluate:
        result = evaluate(args.out, args.eval_prompts, args.eval_samples, seed=args.seed, split=args.eval_split)
        if args.card:
            held = None
            if args.eval_split == "train":  # the card also shows the held-out split's conditioning
                model, tokenizer = load(args.out)
                built = folder_config(args.out)
                items = eval_items(args.eval_prompts, seed=1000 + args.seed, split="heldout", setting=built["setting"])
                held = conditioning_stats(model, tokenizer, items, args.eval_samples, seed=args.seed,
                                          max_new_tokens=built["gen_tokens"])
            cmd = "python -m core.tools.bootstrap " + " ".join(a for a in argv_list if a != "--card")
            print(f"wrote {write_card(args.out, result, cmd.strip(), held)}")
        return 0
    cfg = BootstrapConfig.for_setting(args.setting, args.seed, micro=args.micro)
    cfg = replace(cfg, threads=args.threads)
    if args.steps:
        cfg = replace(cfg, steps=args.steps)

    def log(line: str) -> None:
        print(line, flush=True)

    bootstrap(cfg, args.out, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
