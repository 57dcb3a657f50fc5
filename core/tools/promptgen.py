"""The prompt-set generator: the default set (setting `tiny`, for tiny-instruct) and the harder `multi` set.

Writing prompts: task "Write a short note about {topic}." plus 2-4 constraints from four
families (include a keyword, end with a phrase, all lowercase, no commas); arithmetic prompts:
"What is {a} plus {b}?" (a, b in 1..9, family `task:arithmetic`) plus 1-3 of those constraints.
The held-out split uses other topics and other keywords (same end phrases and families).

The `multi` setting (for tiny-multi, see `Setting`): 4-6 constraints per prompt from four kinds at once:
format (start phrase, end phrase, title, postscript), safety (do not use the word the topic invites),
style (lowercase, no commas, a word limit) and content (a keyword), plus correctness on arithmetic prompts;
about 30% of its writing prompts pair a word limit with a keyword and an end phrase (they pull against each other).

The vocabulary is small on purpose: a 1M-parameter model must learn to copy the stated keyword
and end phrase from the prompt. Deterministic for a given (n, seed, split).

    python -m core.tools.promptgen --out sample_data/prompts      # rewrites every setting's two files

Never imports torch.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.tasks import save_prompt_set
from core.verifiers.shared.kinds import REWARD_KIND

TOPICS = (
    "rivers", "mountains", "the sea", "cats", "dogs", "bread", "rain", "the moon", "trees", "music",
    "trains", "gardens", "winter", "books", "birds", "coffee", "the city", "bees", "the desert", "bicycles",
)  # fmt: skip
KEYWORDS = (
    "light",
    "green",
    "stone",
    "quiet",
    "bright",
    "warm",
    "river",
    "happy",
    "little",
    "steady",
    "gentle",
    "morning",
)
HELDOUT_TOPICS = (
    "clocks", "islands", "horses", "candles", "bridges", "snow", "apples", "kites", "the forest", "boats",
)  # fmt: skip
HELDOUT_KEYWORDS = ("silver", "calm", "sweet", "fresh", "round", "golden")
END_PHRASES = ("That is all.", "The end.", "Thank you.", "See you soon.")

WRITING_FAMILIES = (
    "keywords:existence",
    "startend:end_checker",
    "change_case:english_lowercase",
    "punctuation:no_comma",
)
SPLITS = ("train", "heldout")

# --- the `multi` setting: four kinds of verifiers at once -----------------------------------------------------
START_PHRASES = ("Dear reader", "Hello friend", "Good day", "Well now")
# Each topic invites one word (the template notes mention it): the `keywords:forbidden_words` constraint of
# the multi setting forbids exactly that word, so obeying it takes a decision, not luck.
INVITED_WORDS = {
    "rivers": "water", "mountains": "peak", "the sea": "waves", "cats": "fur", "dogs": "bark", "bread": "flour",
    "rain": "umbrella", "the moon": "night", "trees": "leaves", "music": "song", "trains": "tracks",
    "gardens": "flowers", "winter": "cold", "books": "pages", "birds": "wings", "coffee": "cup",
    "the city": "streets", "bees": "honey", "the desert": "sand", "bicycles": "wheels",
    "clocks": "tick", "islands": "beach", "horses": "saddle", "candles": "flame", "bridges": "arch",
    "snow": "white", "apples": "juice", "kites": "wind", "the forest": "wood", "boats": "sail",
}  # fmt: skip
ARITHMETIC_INVITED = "sum"  # what an answer to "What is a plus b?" invites
WORD_LIMITS = (20, 25, 30)
# The multi setting's families in drawing order (the order makes the generated sets; do not reorder), grouped by
# their kind of reward (`core.verifiers.shared.kinds.REWARD_KIND`, the one table of kinds): every prompt's
# constraints are drawn so that format, safety and style each appear in it.
_MULTI_ORDER = ("startend:start_checker", "startend:end_checker", "detectable_format:title",
                "detectable_content:postscript", "keywords:forbidden_words", "change_case:english_lowercase",
                "punctuation:no_comma", "length_constraints:number_words", "keywords:existence", "task:arithmetic")
KINDS = {kind: tuple(f for f in _MULTI_ORDER if REWARD_KIND[f] == kind)
         for kind in ("format", "safety", "style", "content", "correctness")}
MULTI_FAMILIES = tuple(f for kind in ("format", "safety", "style", "content") for f in KINDS[kind])
# The conflicting triple: a word limit against "include the keyword and end with the phrase".
CONFLICT = ("length_constraints:number_words", "keywords:existence", "startend:end_checker")


@dataclass(frozen=True)
class Setting:
    """A family of prompt sets: which constraint families a prompt draws, how many, and its file names.

    `tiny` is the default set (tiny-instruct's); `multi` carries 4-6 constraints from format, safety,
    style and content (+ correctness on arithmetic prompts); with probability `conflict_share` a writing
    prompt also gets the conflicting triple (word limit, keyword, end phrase) when it still fits after the
    required kinds (about 30% of the multi set's writing prompts carry it)."""

    name: str
    families: tuple[str, ...]
    writing_constraints: tuple[int, int]
    arithmetic_constraints: tuple[int, int]
    arithmetic_share: float
    files: tuple[str, str]  # train, held-out file names in sample_data/prompts
    required_kinds: tuple[str, ...] = ()  # a prompt with enough constraints has one of each of these kinds
    conflict_share: float = 0.0
    model: str = "tiny-instruct"  # the embedded model trained on this distribution
    max_new_tokens: int | None = None  # longest response its model writes (None: the trainer's default, 48)


SETTINGS = {
    "tiny": Setting("tiny", WRITING_FAMILIES, (2, 4), (1, 3), 0.2, ("default.jsonl", "heldout.jsonl")),
    "multi": Setting("multi", MULTI_FAMILIES, (4, 6), (3, 5), 0.4, ("multi.jsonl", "multi-heldout.jsonl"),
                     required_kinds=("format", "safety", "style"), conflict_share=0.5, model="tiny-multi",
                     max_new_tokens=96),
}


def get_setting(name: str) -> Setting:
    if name not in SETTINGS:
        raise ValueError(f"unknown setting {name!r}; valid choices: {', '.join(SETTINGS)}")
    return SETTINGS[name]


def _constraint(family: str, rng: random.Random, keywords: tuple[str, ...], topic: str) -> dict[str, Any]:
    if family == "keywords:existence":
        # A keyword inside the topic could be copied from the task instead of the constraint.
        choices = [w for w in keywords if w not in topic] or list(keywords)
        return {"family": family, "kwargs": {"keywords": [rng.choice(choices)]}}
    if family == "startend:end_checker":
        return {"family": family, "kwargs": {"end_phrase": rng.choice(END_PHRASES)}}
    if family == "startend:start_checker":
        return {"family": family, "kwargs": {"start_phrase": rng.choice(START_PHRASES)}}
    if family == "keywords:forbidden_words":
        return {"family": family, "kwargs": {"forbidden_words": [INVITED_WORDS.get(topic, ARITHMETIC_INVITED)]}}
    if family == "detectable_content:postscript":
        return {"family": family, "kwargs": {"postscript_marker": "P.S."}}
    if family == "length_constraints:number_words":
        return {"family": family, "kwargs": {"num_words": rng.choice(WORD_LIMITS), "relation": "less than"}}
    return {"family": family, "kwargs": {}}


def _choose_families(setting: Setting, rng: random.Random, count: int, arithmetic: bool) -> list[str]:
    """`count` distinct families of the setting. tiny: a uniform sample. With required kinds: one family of each
    required kind first (as many as `count` allows), then the conflict triple (writing prompts, with probability
    conflict_share, when it fits), then uniform; returned in random order."""
    if not setting.required_kinds:
        return rng.sample(setting.families, count)
    chosen: list[str] = []
    for kind in rng.sample(setting.required_kinds, len(setting.required_kinds))[:count]:
        chosen.append(rng.choice(KINDS[kind]))
    if not arithmetic and rng.random() < setting.conflict_share:
        extra = [f for f in CONFLICT if f not in chosen]
        if len(chosen) + len(extra) <= count:
            chosen += extra
    rest = [f for f in setting.families if f not in chosen]
    chosen += rng.sample(rest, max(0, count - len(chosen)))
    rng.shuffle(chosen)
    return chosen


def generate_prompts(
    n: int,
    seed: int = 0,
    split: str = "train",
    *,
    setting: str = "tiny",
    arithmetic_share: float | None = None,
    writing_constraints: tuple[int, int] | None = None,
    arithmetic_constraints: tuple[int, int] | None = None,
) -> list[dict[str, Any]]:
    """`n` prompts of a setting (`tiny`, the default set, or `multi`) as native JSONL records (`key`, `task`,
    `constraints`).

    `round(n * arithmetic_share)` of them (at random positions) are arithmetic prompts. The
    number of other constraints is drawn uniformly from the inclusive ranges given (default: the
    setting's; the bootstrap corpus uses ranges from 0 so that a contrastive prompt is one the model has seen).

    >>> generate_prompts(1, seed=0, arithmetic_share=0.0)[0]["task"]
    'Write a short note about cats.'
    """
    spec = get_setting(setting)
    arithmetic_share = spec.arithmetic_share if arithmetic_share is None else arithmetic_share
    writing_constraints = writing_constraints or spec.writing_constraints
    arithmetic_constraints = arithmetic_constraints or spec.arithmetic_constraints
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0.0 <= arithmetic_share <= 1.0:
        raise ValueError(f"arithmetic_share must be in [0, 1], got {arithmetic_share}")
    for name, (lo, hi) in (
        ("writing_constraints", writing_constraints),
        ("arithmetic_constraints", arithmetic_constraints),
    ):
        if not 0 <= lo <= hi <= len(spec.families):
            raise ValueError(f"{name} must satisfy 0 <= low <= high <= {len(spec.families)}, got {(lo, hi)}")
    topics, keywords = (TOPICS, KEYWORDS) if split == "train" else (HELDOUT_TOPICS, HELDOUT_KEYWORDS)
    rng = random.Random(f"{split}:{seed}" if setting == "tiny" else f"{setting}:{split}:{seed}")
    arithmetic = set(rng.sample(range(n), round(n * arithmetic_share)))
    prefix = ("p" if split == "train" else "h") if setting == "tiny" else ("m" if split == "train" else "mh")
    records = []
    for i in range(n):
        if i in arithmetic:
            a, b = rng.randint(1, 9), rng.randint(1, 9)
            task, topic = f"What is {a} plus {b}?", ""
            lo, hi = arithmetic_constraints
            constraints = [{"family": "task:arithmetic", "kwargs": {"answer": a + b}}]
        else:
            topic = rng.choice(topics)
            task = f"Write a short note about {topic}."
            lo, hi = writing_constraints
            constraints = []
        chosen = _choose_families(spec, rng, rng.randint(lo, hi), bool(constraints))
        constraints += [_constraint(family, rng, keywords, topic) for family in chosen]
        records.append({"key": f"{prefix}{i + 1:04d}", "task": task, "constraints": constraints})
    return records


# Larger held-out sets, setting -> (file name, prompts): study v3 scores 128 held-out prompts
# (docs/results/study-v3.md), more than the 60 of multi-heldout.jsonl. Drawn by the same generator (another n
# draws other prompts, so its first 60 are not multi-heldout.jsonl's).
LARGE_HELDOUT = {"multi": ("multi-heldout-128.jsonl", 128)}


# --- study v4's evaluation sets (docs/results/study-v4.md): clean held-out and out-of-template ---------------------
# The `heldout` split above keeps the training end / start phrases, word limits, "P.S." and arithmetic questions
# (issue 42: 23 of its 51 arithmetic questions and 26 of 44 argument values occur in multi.jsonl). These sets share
# no argument value, no arithmetic question and no prompt with the training set; `ood` also states every constraint
# in words never used in training (`core.tasks.with_sentence`) on topics of neither split.
CLEAN_END_PHRASES = ("All done.", "Until next time.", "That is my note.", "Goodbye for now.")
CLEAN_START_PHRASES = ("Hi there", "Greetings all", "Listen here", "Once again")
CLEAN_WORD_LIMITS = (22, 28, 35)
CLEAN_POSTSCRIPT = "P.P.S"
CLEAN_ARITHMETIC_INVITED = "total"
OOD_TOPICS = {
    "owls": "feathers", "pianos": "keys", "volcanoes": "lava", "tea": "kettle", "castles": "tower",
    "clouds": "sky", "frogs": "pond", "maps": "roads", "shoes": "laces", "stars": "sparkle",
}  # fmt: skip
# Out-of-template wording: the task and every constraint sentence paraphrased ({} fields: the arguments).
OOD_TASKS = ("Tell me a little about {topic}.", "Say a few words on {topic}.")
OOD_ARITHMETIC = ("Add {a} and {b}.", "Work out {a} + {b}.")
OOD_SENTENCES = {
    "startend:start_checker": ("Begin with the words {start_phrase}.", "Your first words must be {start_phrase}."),
    "startend:end_checker": ("Finish with the exact words {end_phrase}", "Let your last words be {end_phrase}"),
    "detectable_format:title": ("Put a title inside double angle brackets, like <<a title>>.",
                                "Head it with a title in <<double angle brackets>>."),
    "detectable_content:postscript": ("Close with a note that begins with {postscript_marker}.",
                                      "Add an afterthought at the bottom, opening with {postscript_marker}."),
    "keywords:forbidden_words": ("Never write the word {forbidden_words}.", "Avoid the word {forbidden_words}."),
    "change_case:english_lowercase": ("Write everything in small letters, no capitals.",
                                      "Capital letters are not allowed."),
    "punctuation:no_comma": ("Leave out every comma.", "Commas are not allowed."),
    "length_constraints:number_words": ("Keep it under {num_words} words.", "Use fewer than {num_words} words."),
    "keywords:existence": ("Make sure the word {keywords} appears.", "Mention the word {keywords}."),
}
EVAL_SETS = {"clean": ("multi-heldout-clean.jsonl", 128), "ood": ("multi-ood.jsonl", 128)}


def _clean_constraint(family: str, rng: random.Random, topic: str) -> dict[str, Any]:
    """A multi-setting constraint with the clean argument pools (none of them is a training argument)."""
    if family == "keywords:existence":
        choices = [w for w in HELDOUT_KEYWORDS if w not in topic] or list(HELDOUT_KEYWORDS)
        return {"family": family, "kwargs": {"keywords": [rng.choice(choices)]}}
    if family == "startend:end_checker":
        return {"family": family, "kwargs": {"end_phrase": rng.choice(CLEAN_END_PHRASES)}}
    if family == "startend:start_checker":
        return {"family": family, "kwargs": {"start_phrase": rng.choice(CLEAN_START_PHRASES)}}
    if family == "keywords:forbidden_words":
        word = {**INVITED_WORDS, **OOD_TOPICS}.get(topic, CLEAN_ARITHMETIC_INVITED)
        return {"family": family, "kwargs": {"forbidden_words": [word]}}
    if family == "detectable_content:postscript":
        return {"family": family, "kwargs": {"postscript_marker": CLEAN_POSTSCRIPT}}
    if family == "length_constraints:number_words":
        return {"family": family, "kwargs": {"num_words": rng.choice(CLEAN_WORD_LIMITS), "relation": "less than"}}
    return {"family": family, "kwargs": {}}


def _ood_sentence(constraint: dict[str, Any], rng: random.Random) -> str:
    args = {k: v[0] if isinstance(v, list) else v for k, v in constraint["kwargs"].items()}
    return rng.choice(OOD_SENTENCES[constraint["family"]]).format(**args)


def _arithmetic_questions(train: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """The (a, b) of 1..9 whose question "What is a plus b?" the training set never asks."""
    asked = {r["task"] for r in train}
    return [(a, b) for a in range(1, 10) for b in range(1, 10) if f"What is {a} plus {b}?" not in asked]


def generate_eval_prompts(n: int, split: str, seed: int = 0, n_train: int = 200) -> list[dict[str, Any]]:
    """`n` prompts of study v4's evaluation sets for the multi setting: `clean` (held-out topics, clean
    arguments, training wording) or `ood` (new topics, clean arguments, every task and constraint sentence
    paraphrased: `OOD_TASKS`, `OOD_SENTENCES`, written as each constraint's `sentence`). Constraint families are
    drawn as in the multi setting; arithmetic questions are the ones `multi.jsonl` (n_train, seed) never asks; a
    prompt already drawn (the same task and constraints, in any order) is drawn again, so none repeats. Deterministic for (n, split, seed)."""
    from core.tasks import item_from_record

    if split not in EVAL_SETS:
        raise ValueError(f"split must be one of {', '.join(EVAL_SETS)}, got {split!r}")
    spec = get_setting("multi")
    questions = _arithmetic_questions(generate_prompts(n_train, seed, "train", setting="multi"))
    topics = HELDOUT_TOPICS if split == "clean" else tuple(OOD_TOPICS)
    rng = random.Random(f"multi:{split}:{seed}")
    arithmetic = set(rng.sample(range(n), round(n * spec.arithmetic_share)))
    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i in range(n):
        while True:
            if i in arithmetic:
                a, b = rng.choice(questions)
                template = "What is {a} plus {b}?" if split == "clean" else rng.choice(OOD_ARITHMETIC)
                task, topic = template.format(a=a, b=b), ""
                lo, hi = spec.arithmetic_constraints
                constraints = [{"family": "task:arithmetic", "kwargs": {"answer": a + b}}]
            else:
                topic = rng.choice(topics)
                task = (f"Write a short note about {topic}." if split == "clean"
                        else rng.choice(OOD_TASKS).format(topic=topic))
                lo, hi = spec.writing_constraints
                constraints = []
            chosen = _choose_families(spec, rng, rng.randint(lo, hi), bool(constraints))
            constraints += [_clean_constraint(family, rng, topic) for family in chosen]
            if split == "ood":
                for c in constraints[1 if i in arithmetic else 0:]:
                    c["sentence"] = _ood_sentence(c, rng)
            record = {"key": f"m{split[0]}{i + 1:04d}", "task": task, "constraints": constraints}
            item = item_from_record(record)  # a prompt is its task and its set of stated constraints, in any order
            text = repr((item.task, sorted(f"{c!r} {c.sentence()}" for c in item.constraints)))
            if text not in seen:
                seen.add(text)
                records.append(record)
                break
    return records


def write_eval_sets(out_dir: str | Path, seed: int = 0) -> list[Path]:
    """Write study v4's `multi-heldout-clean.jsonl` and `multi-ood.jsonl` (`EVAL_SETS`) into `out_dir`."""
    paths = []
    for split, (name, n) in EVAL_SETS.items():
        paths.append(Path(out_dir) / name)
        save_prompt_set(generate_eval_prompts(n, split, seed), paths[-1])
    return paths


def write_default_sets(out_dir: str | Path, n_train: int = 200, n_heldout: int = 60, seed: int = 0,
                       setting: str = "tiny") -> list[Path]:
    """Write a setting's train and held-out files (tiny: `default.jsonl`, `heldout.jsonl`; multi: `multi.jsonl`,
    `multi-heldout.jsonl`, `multi-heldout-128.jsonl` (`LARGE_HELDOUT`) and study v4's clean held-out and
    out-of-template sets (`write_eval_sets`)) into `out_dir`."""
    out_dir = Path(out_dir)
    spec = get_setting(setting)
    paths = [out_dir / spec.files[0], out_dir / spec.files[1]]
    save_prompt_set(generate_prompts(n_train, seed, "train", setting=setting), paths[0])
    save_prompt_set(generate_prompts(n_heldout, seed, "heldout", setting=setting), paths[1])
    if setting in LARGE_HELDOUT:
        name, n = LARGE_HELDOUT[setting]
        paths.append(out_dir / name)
        save_prompt_set(generate_prompts(n, seed, "heldout", setting=setting), paths[-1])
    if setting == "multi":
        paths += write_eval_sets(out_dir, seed)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.tools.promptgen", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the prompt files")
    parser.add_argument("--setting", choices=[*SETTINGS, "all"], default="all",
                        help="which setting's files to write (default: all)")
    parser.add_argument("--n", type=int, default=200, help="train prompts (default 200)")
    parser.add_argument("--heldout-n", type=int, default=60, help="held-out prompts (default 60)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for setting in SETTINGS if args.setting == "all" else [args.setting]:
        for path in write_default_sets(args.out, args.n, args.heldout_n, args.seed, setting):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
