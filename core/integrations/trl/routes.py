"""How `MRTPOTrainer` routes each reward: its contrast (`core.contrast`), whether it reports spans, and the one line
per reward said at start, so that no reward is routed uniformly without a word (docs/TRL.md, "Bring your own rewards").

`plan_routes` reads the reward functions, `MRTPOConfig.reward_contrasts` and every dataset row once, before anything
runs or is written: a contrast that cannot give x^-k for a row, or that finds nothing in any row, is a ConfigError
naming the reward and the row. `RewardRoute.contrastive` gives x^-k of one row at training time. Imports neither
torch nor TRL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.config import ConfigError
from core.contrast import Contrast, ContrastError, contrastive_prompt, others_for, parse
from core.integrations.trl.dataset import PromptRow


@dataclass
class RewardRoute:
    """One reward as MRTPO routes it. `contrast` None: uniform (`why` says why); `rows_found` of `rows` dataset
    rows have an x^-k for it (the others route it uniformly); `spans`: the function reports inspected spans."""

    name: str
    contrast: Contrast | None
    spans: bool
    rows_found: int = 0
    rows: int = 0
    why: str = ""

    @property
    def replays(self) -> bool:
        return self.contrast is not None

    def contrastive(self, row: Mapping, prompt_row: PromptRow, relevance_contrast: str, names: Sequence[str],
                    contrasts: Sequence[Contrast | None]) -> Any | None:
        """x^-k of one dataset row for this reward (None: no x^-k here, uniform on this row). The verifier's rule
        takes the relevance variant's kind (remove / swap / auto); the other contrasts remove. `names`, `contrasts`:
        every reward's, for `question` (which keeps the others' instruction texts: a constraint the row states
        points at its sentence, `core.contrast.others_for`)."""
        if self.contrast is None:
            return None
        if self.contrast.kind == "verifier":
            out = prompt_row.contrastive(self.name, relevance_contrast)
            return None if out is None or out == prompt_row.prompt else out
        others = others_for(prompt_row.item if prompt_row.item.constraints else None, names, contrasts,
                            list(names).index(self.name))
        return contrastive_prompt(self.contrast, row, others)

    def line(self, source: str) -> str:
        """The start-up line: `<name>: replay, contrast column 'hint' (16 of 16 rows); spans reported`."""
        spans = "spans reported" if self.spans else "no spans reported (span metrics and overlays off)"
        if source == "span":
            how = "span routing (the spans it reports)" if self.spans else "uniform: span routing, and it reports no spans"
        elif source == "replay" and self.contrast is not None:
            rest = "" if self.rows_found == self.rows else \
                f"; uniform on the other {self.rows - self.rows_found} rows, where the contrast finds nothing"
            how = f"replay, contrast {self.contrast.describe()} ({self.rows_found} of {self.rows} rows{rest})"
        elif source == "replay":
            how = f"uniform: {self.why}"
        else:
            how = f"uniform ({source})"
        return f"MRTPO routing: {self.name}: {how}; {spans}"


def reports_spans(func: Callable) -> bool:
    """A reward function that reports inspected spans: a workbench verifier (`verifier_reward`: `.results`) or one
    wrapped by `reward_with_spans` (`.spans`)."""
    return hasattr(func, "results") or hasattr(func, "spans")


def duplicate_names_error(names: Sequence[str]) -> str:
    """The one-line refusal of two reward functions with one name ("" when the names are distinct)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return (f"two reward functions are named {name!r}: MRTPO keys each reward's contrast, metrics and credit "
                    f"map by name; give each its own (a def, or fn.__name__ = 'name', before passing it)")
        seen.add(name)
    return ""


def _declared(names: Sequence[str], funcs: Sequence[Callable], contrasts: Mapping[str, Contrast] | None,
              families: set[str]) -> list[Contrast | None]:
    """Each reward's declared contrast: reward_contrasts' entry, else `verifier` for a workbench verifier family."""
    contrasts = dict(contrasts or {})
    unknown = [k for k in contrasts if k not in names]
    if unknown:
        raise ConfigError("reward_contrasts", f"{', '.join(map(repr, unknown))} is not a reward function's name; the "
                                              f"rewards are {', '.join(map(repr, names))}")
    out: list[Contrast | None] = []
    for name, func in zip(names, funcs, strict=True):
        contrast = contrasts.get(name)
        is_family = hasattr(func, "family") or name in families
        if contrast is not None and contrast.kind == "verifier" and not is_family:
            raise ConfigError("reward_contrasts", f"{name}: 'verifier' needs a workbench verifier family that the rows "
                                                  "state; give a column:, match:, ... contrast for your own reward")
        if contrast is None and is_family:
            contrast = parse("verifier")
        out.append(None if contrast is not None and contrast.kind == "uniform" else contrast)
    return out


def contrast_of(relevance_contrast: str | Mapping[str, str], name: str) -> str:
    """The kind of contrastive prompt reward `name` is replayed with: the relevance variant's, or, per reward
    (`auto`: `MRTPOTrainer` resolves it from the evidence), the mapping's (remove for a name it lacks)."""
    return relevance_contrast if isinstance(relevance_contrast, str) else relevance_contrast.get(name, "remove")


def relevance_contrasts(args: Any, names: Sequence[str], model: Any) -> str | dict[str, str]:
    """The kind of contrastive prompt each reward is replayed with under `args.relevance`: the variant's own, or for
    `auto` per reward the contrast of the variant its family's evidence names (`core.auto_evidence`; the evidence is
    `args.auto_evidence`, else the model's own when shipped, else tiny-multi, and is written back to
    `args.auto_evidence` so the run records it). ConfigError where the evidence picks a variant that merges several
    passes (MRTPOTrainer replays one prompt per reward)."""
    from core import auto_evidence
    from core.algos.routing import get_relevance

    if args.relevance != "auto":
        return get_relevance(args.relevance).contrast
    model_name = model if isinstance(model, str) else str(getattr(getattr(model, "config", None), "_name_or_path", ""))
    args.auto_evidence = args.auto_evidence or auto_evidence.for_model(model_name)
    evidence = auto_evidence.load(args.auto_evidence)
    out = {}
    for name in names:
        picked = auto_evidence.variant_for(evidence, name)
        variant = get_relevance(picked)
        reason = auto_evidence.one_pass_reason(picked)
        if reason:
            raise ConfigError("auto_evidence", f"{args.auto_evidence} picks {picked} for {name}: {reason}; "
                                               "MRTPOTrainer replays one no-gradient js prompt per reward: use the "
                                               "built-in trainer, auto_evidence=\"tiny-multi\" or another relevance")
        out[name] = variant.contrast
    return out


def plan_routes(names: Sequence[str], funcs: Sequence[Callable], contrasts: Mapping[str, Contrast] | None,
                rows: Sequence[Mapping], prompt_rows: Sequence[PromptRow], source: str | None,
                relevance_contrast: str | Mapping[str, str] = "remove") -> list[RewardRoute]:
    """Every reward's route, checked on every dataset row (module docstring). `source`: the routing source
    (`core.choices.routing_source`: replay, span, or None when the method does not route)."""
    message = duplicate_names_error(names)
    if message:
        raise ConfigError("reward_funcs", message)
    families = {f for r in prompt_rows for f in r.item.families()}
    declared = _declared(names, funcs, contrasts, families)
    routes = []
    for name, func, contrast in zip(names, funcs, declared, strict=True):
        route = RewardRoute(name, contrast, reports_spans(func), rows=len(rows))
        explicit = (contrasts or {}).get(name)
        if contrast is None:
            route.why = ("declared uniform" if explicit is not None else
                         f"no contrast declared (MRTPOConfig(reward_contrasts={{{name!r}: ...}}) routes it by replay; "
                         "docs/TRL.md)")
        elif source == "replay":
            for i, (row, prow) in enumerate(zip(rows, prompt_rows, strict=True)):
                try:
                    found = route.contrastive(row, prow, contrast_of(relevance_contrast, name), names, declared)
                except ContrastError as exc:
                    raise ConfigError("reward_contrasts", f"{name}: row {i}: {exc}") from None
                route.rows_found += found is not None
            if not route.rows_found:
                raise ConfigError("reward_contrasts", f"{name}: contrast {contrast.describe()} finds nothing to remove "
                                                      f"in any of the {len(rows)} rows, so replay would route it "
                                                      "uniformly everywhere; fix the contrast or declare 'uniform'")
        routes.append(route)
    if source == "replay" and not any(r.replays for r in routes):
        raise ConfigError("reward_contrasts", "routing='replay' but no reward has a contrast, so every reward would be "
                                              "routed uniformly (that is GDPO: method='gdpo'); declare one per reward, "
                                              "e.g. reward_contrasts={" + repr(names[0]) + ": 'last_sentence'}")
    return routes
