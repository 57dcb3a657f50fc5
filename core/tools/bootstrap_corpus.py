"""`mrtpo bootstrap`'s data: the settings' constants, `BootstrapConfig`, the synthetic corpus (prompts from the
prompt-set families, template responses that obey a stated constraint part of the time) and its BPE tokenizer.
Imported by `core.tools.bootstrap` (the build) and `bootstrap_eval`."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from core.presets import EMBEDDED_MODELS
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
