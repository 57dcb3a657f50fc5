"""Relevance and routing: from per-token relevance d[k, i, t] to routing weights w[k, i, t].

The formulas are in docs/METHOD.md ("MRTPO", "Relevance variants", "Routing sources"):

- `js_distance`: base-2 Jensen-Shannon distance between two next-token distributions, in [0, 1];
- `RELEVANCE`: relevance variants by name (`js`, `js_specific`, `swap`, `swap_specific`, `logp`,
  `logp_specific`, `auto`): which contrastive prompt, which per-token distance (`js_distance`, `logp_distance`),
  and `(d, applicable) -> relevance`;
- `routing_weights`: u = T_i d / sum_t d (mean 1 over a response), v = (1 - lam) + lam u, then w = clip(v, 0, w_max)
  (`clip="clip"`) or `mass_keeping_clip` (`clip="mass"`: capped at w_max, mean 1 kept);
- `shuffle_routing`, `entropy_routing`: the controls (docs/METHOD.md, "Controls"): a row's weights permuted over its
  tokens; weights on the top-q highest-entropy tokens;
- `ROUTING`: routing sources by name (`replay`, `span`, `uniform`, `entropy`), each `(RoutingInputs) -> (weights, d)`;
  `replay` gets d by contrastive replay (a callable the trainer provides: `core.algos.teacher_forcing`);
- `replay_pairs`: the (sample, reward) pairs whose contrastive pass can change a token advantage
  (docs/METHOD.md, "Replay only where it can matter"); the others are skipped and their d is NaN.

Shapes: B samples, K rewards, T response tokens (right-padded, `mask` (B, T) is 1 on real tokens),
V vocabulary. A reward that does not apply to a sample's prompt has d = NaN for that sample.
Pure torch: never imports transformers, streamlit or plotly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

LN2 = math.log(2.0)

# ----------------------------------------------------------------------------- relevance and routing maths


def js_distance(logp: Tensor, logq: Tensor) -> Tensor:
    """Base-2 Jensen-Shannon distance between distributions given as log-probs over the last dim.

    JSD(p, q) = 1/2 KL(p || m) + 1/2 KL(q || m), m = (p + q) / 2, in bits; distance = sqrt(JSD),
    in [0, 1]. Per vocabulary entry, with lo = min(log p, log q), hi = max(log p, log q),
    r = hi - lo >= 0 (so the smaller probability is e^lo = e^hi e^-r):
        p log(p / m) + q log(q / m) = -(e^lo + e^hi) log1p(expm1(-r) / 2) - e^lo r
    which is exactly 0 where p_v == q_v (r = 0: no sqrt-amplified rounding noise), needs no
    exp of large numbers (expm1(-r) lies in [-1, 0]) and is bitwise symmetric in (p, q). Log-probs
    below -1e4 (e.g. -inf: probability 0) are raised to -1e4, whose exp is exactly 0 in float32 and
    float64, so a zero on one side gives the term q log 2 and zeros on both sides give 0.
    Returns shape logp.shape[:-1] in the input dtype (at least float32). Rows are computed in blocks of
    about `JS_BLOCK_ELEMENTS` values (the temporaries stay in cache: 2-4x faster on CPU; same numbers).
    """
    dtype = torch.promote_types(torch.promote_types(logp.dtype, logq.dtype), torch.float32)
    logp, logq = torch.broadcast_tensors(logp.to(dtype), logq.to(dtype))
    shape, v = logp.shape[:-1], logp.shape[-1]
    logp, logq = logp.reshape(-1, v), logq.reshape(-1, v)
    rows = max(1, JS_BLOCK_ELEMENTS // max(v, 1))
    if logp.shape[0] <= rows:
        return _js_rows(logp, logq).reshape(shape)
    return torch.cat([_js_rows(logp[s: s + rows], logq[s: s + rows]) for s in range(0, logp.shape[0], rows)]
                     ).reshape(shape)


JS_BLOCK_ELEMENTS = 1 << 18


def _js_rows(logp: Tensor, logq: Tensor) -> Tensor:
    """`js_distance` of (n, V) log-probs (same dtype): the formula, on one block of rows."""
    lo = torch.minimum(logp, logq).clamp_(min=-1e4)
    hi = torch.maximum(logp, logq).clamp_(min=-1e4)
    neg_r = lo - hi  # -r <= 0
    p_lo, p_hi = lo.exp_(), hi.exp_()  # in place: the log-probs are not needed any more
    log_half_sum = torch.expm1(neg_r).mul_(0.5).log1p_()  # log((1 + e^-r) / 2) in [-log 2, 0]
    two_jsd_nats = p_hi.add_(p_lo).mul_(log_half_sum).neg_().addcmul_(p_lo, neg_r).sum(-1)
    return (two_jsd_nats * (0.5 / LN2)).clamp_(0.0, 1.0).sqrt_()


def routing_weights(d: Tensor, mask: Tensor, lam: float = 1.0, w_max: float = 5.0, sharpen: float = 1.0,
                    clip: str = "clip") -> Tensor:
    """Routing weights w[k, i, t] from relevance d (B, K, T) and the response mask (B, T).

    u[k, i, t] = T_i * d'[k, i, t] / sum_t d'[k, i, t],  d' = d ** sharpen (sharpen = 1: plain d),
    so u has mean 1 over the response's T_i tokens (sharpening is an exponent on u renormalised to
    mean 1);  v = (1 - lam) + lam * u (mean 1 too), then by `clip` (docs/METHOD.md, "Keeping each
    reward's mass"):
      "clip": w = clip(v, 0, w_max); the mass above w_max is lost (runs recorded before the option);
      "mass": w = `mass_keeping_clip(v, mask, w_max)`: no weight above w_max and mean 1 over the T_i
              tokens, so reward k keeps all of its advantage mass.
    lam = 1 is pure routing, lam = 0 uniform weights. A response whose d is all zero (or NaN: the
    reward does not apply) gets uniform weights 1; padding positions get 0.
    """
    if clip not in ROUTING_CLIPS:
        raise ValueError(f"unknown routing clip {clip!r}; valid: {', '.join(ROUTING_CLIPS)}")
    mask_f = mask.to(torch.float32 if not d.is_floating_point() else d.dtype)[:, None, :]  # (B, 1, T)
    d = torch.nan_to_num(d.to(mask_f.dtype), nan=0.0).clamp(min=0.0) * mask_f
    if sharpen != 1.0:
        d = d.pow(sharpen)
    n_tokens = mask_f.sum(-1, keepdim=True)  # (B, 1, 1) = T_i
    total = d.sum(-1, keepdim=True)  # (B, K, 1)
    u = torch.where(total > 0, n_tokens * d / total.clamp(min=torch.finfo(d.dtype).tiny), torch.ones_like(d))
    v = (1.0 - lam) + lam * u
    if clip == "mass":
        return mass_keeping_clip(v * mask_f, mask, w_max)
    return v.clamp(0.0, w_max) * mask_f


# How a routing weight above w_max is handled (`routing_weights`): "mass" redistributes the excess (each reward keeps
# its advantage mass), "clip" drops it (the behaviour before the option; runs recorded without it load as "clip").
ROUTING_CLIPS = ("mass", "clip")


def mass_keeping_clip(v: Tensor, mask: Tensor, w_max: float = 5.0) -> Tensor:
    """Cap weights at w_max while keeping their mean 1 over each response's real tokens (B, K, T) -> (B, K, T).

    v >= 0 has mean 1 over the T_i real tokens of each (sample, reward) row (`routing_weights`); padding is 0.
    Clip, then hand the clipped excess to the unclipped tokens in proportion to their weight, and repeat
    until no weight exceeds w_max. The fixed point is water-filling:
        w[t] = min(w_max, c v[t]),  c >= 1 the scale with sum_t w[t] = T_i
    found by iterating  S = {t : c v[t] >= w_max},  c = (T_i - w_max |S|) / sum_{t not in S} v[t]
    from c = 1 (S only grows, so at most T_i rounds).
    Edge cases:
    - no weight above w_max: w = v unchanged (c = 1); uniform v (all-zero relevance, lam = 0) stays 1;
    - too few tokens with v > 0 to hold the mass (n_pos w_max < T_i, e.g. lam = 1 and all relevance on one
      token): every such token gets w_max and the rest R = T_i - n_pos w_max is spread evenly over the
      tokens with v = 0, each R / (T_i - n_pos) <= 1 (that needs w_max >= 1, which the config enforces);
      with lam < 1 every v >= 1 - lam > 0, so this never happens;
    - w_max >= T_i: nothing can exceed it (v <= T_i), w = v.
    Invariants: sum_t w = T_i and 0 <= w <= w_max on real tokens (for w_max >= 1), 0 on padding.
    """
    m = mask.to(v.dtype)[:, None, :].expand_as(v)  # (B, K, T)
    v = v * m
    n = m.sum(-1, keepdim=True)  # (B, K, 1) = T_i
    clipped = torch.zeros_like(v, dtype=torch.bool)
    scale = torch.ones_like(n)
    for _ in range(v.shape[-1] + 1):
        free = v.masked_fill(clipped, 0.0).sum(-1, keepdim=True)  # sum of v over the unclipped tokens
        room = n - w_max * clipped.sum(-1, keepdim=True)  # mass the unclipped tokens must hold
        scale = torch.where(free > 0, room / free.clamp(min=torch.finfo(v.dtype).tiny), scale)
        now = (scale * v >= w_max) & (m > 0) & (v > 0)
        if torch.equal(now, clipped):
            break
        clipped = now
    w = torch.where(clipped, torch.full_like(v, w_max), (scale * v).clamp(max=w_max))
    # Rows whose positive tokens are all at w_max and still short of T_i: spread the rest over the v = 0 tokens.
    zero = (v <= 0) & (m > 0)
    n_zero = zero.sum(-1, keepdim=True).to(v.dtype)
    rest = (n - w.sum(-1, keepdim=True)).clamp(min=0.0)
    short = (v.masked_fill(clipped, 0.0).sum(-1, keepdim=True) <= 0) & (n_zero > 0)
    fill = torch.where(short, rest / n_zero.clamp(min=1.0), torch.zeros_like(rest))
    w = torch.where(zero, fill.expand_as(w), w)
    return w * m


def applicable_from(d: Tensor) -> Tensor:
    """(B, K) bool: reward k applies to sample i, i.e. its relevance row is not all NaN."""
    return ~torch.isnan(d).all(dim=-1)


def specific_relevance(d: Tensor, applicable: Tensor | None = None) -> Tensor:
    """`js_specific`: d_spec[k, i, t] = max(d[k, i, t] - mean_{j != k, j applicable} d[j, i, t], 0).

    The part of reward k's JS that removing the other constraints does not also cause. The mean
    runs over the other rewards that apply to sample i (`applicable` (B, K), default: rows of d that
    are not all NaN); with no other applicable reward (e.g. K = 1) d_spec = d. Non-applicable
    rewards stay NaN.
    """
    if applicable is None:
        applicable = applicable_from(d)
    app = applicable.to(d.dtype)[:, :, None]  # (B, K, 1)
    d0 = torch.nan_to_num(d, nan=0.0) * app
    others_sum = d0.sum(1, keepdim=True) - d0  # sum over applicable j != k
    others_n = app.sum(1, keepdim=True) - app
    others_mean = torch.where(others_n > 0, others_sum / others_n.clamp(min=1), torch.zeros_like(others_sum))
    spec = (d0 - others_mean).clamp(min=0.0)
    return torch.where(app.bool().expand_as(spec), spec, torch.full_like(spec, torch.nan))


def span_routing(span_mask: Tensor, mask: Tensor, lam: float = 1.0, w_max: float = 5.0, clip: str = "clip") -> Tensor:
    """The `span` oracle: u = the verifier's inspected-span mask (B, K, T) scaled to mean 1 over the
    response (u = T_i s / sum_t s), then w from (1 - lam) + lam * u and `clip` as in `routing_weights`.
    An empty span mask gives uniform weights; padding gets 0."""
    return routing_weights(span_mask.to(torch.float32), mask, lam=lam, w_max=w_max, sharpen=1.0, clip=clip)



def shuffle_routing(weights: Tensor, mask: Tensor, generator: torch.Generator, rows_before: int = 0) -> Tensor:
    """The `shuffle` control (docs/METHOD.md, "Controls"): each (sample, reward) row's routing weights
    permuted uniformly at random over that response's real tokens, (B, K, T) -> (B, K, T).

        w'[k, i, t] = w[k, i, pi_{k,i}(t)],  pi_{k,i} a uniform random permutation of the T_i real tokens of i

    drawn from `generator` (seeded by the caller, the seed recorded). Each row keeps the same multiset of
    weights, hence the same mass sum_t w'[k, i, t] = sum_t w[k, i, t]; only the positions change. Padding
    (mask 0) is left as it is. All rows at once: pi_{k,i} = argsort of uniform keys u[i, k, t] (drawn on the
    CPU from `generator`, +inf on padding so it sorts last), which is a uniform random permutation of the real
    tokens (ties have probability 0). `rows_before`: the rows of the step's batch held by the processes before this
    one (a multi-process run: process p of P, b rows each, passes p * b); the keys are drawn for them too and this
    process takes the rows after them, so every process permutes its rows independently of the others.
    """
    real = mask.bool()[:, None, :].expand_as(weights)  # (B, K, T)
    b, k, t = weights.shape
    keys = torch.rand((rows_before + b, k, t), generator=generator)[rows_before:].to(weights.device)
    order = torch.where(real, keys, torch.full_like(keys, torch.inf)).argsort(dim=-1)  # (B, K, T) real first
    return torch.where(real, weights.gather(-1, order), weights)


def shuffle_generator(seed: int, step: int) -> torch.Generator:
    """The generator of `shuffle_routing` at one step: seeded with seed * 1_000_003 + step, so a run's
    permutations are reproducible from its recorded `routing_shuffle_seed` and differ between steps."""
    return torch.Generator().manual_seed(int(seed) * 1_000_003 + int(step))


def top_entropy_tokens(entropy: Tensor, mask: Tensor, q: float = 0.2) -> Tensor:
    """(B, T) float 0/1: the top-q fraction of each response's real tokens by the rollout policy's entropy.

    n_i = ceil(q T_i) tokens (at least 1 when T_i >= 1) with the highest H[i, t] among the T_i real tokens;
    ties go to the earlier token (stable order). Padding gets 0.
    """
    real = mask.bool()
    n_sel = torch.ceil(q * real.sum(-1).to(torch.float64)).long().clamp(min=1)  # (B,)
    n_sel = torch.minimum(n_sel, real.sum(-1))
    h = torch.where(real, entropy.float(), torch.full_like(entropy, -torch.inf, dtype=torch.float32))
    order = torch.argsort(-h, dim=-1, stable=True)  # (B, T) highest first, earlier first among ties
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(h.shape[1]).expand_as(order).contiguous())
    return ((rank < n_sel[:, None]) & real).to(torch.float32)


def entropy_routing(entropy: Tensor, mask: Tensor, n_rewards: int, q: float = 0.2, lam: float = 1.0,
                    w_max: float = 5.0, clip: str = "clip") -> Tensor:
    """The `entropy` control (docs/METHOD.md, "Controls"): the same weights for every reward, from the rollout
    policy's per-token entropy H (B, T): s = `top_entropy_tokens(H, mask, q)` as relevance of every reward, then
    `routing_weights` (u = T_i s / sum_t s, v = (1 - lam) + lam u, then `clip`), so each response's mass is
    normalised exactly as the method's routing normalises it. Returns (B, K, T)."""
    s = top_entropy_tokens(entropy, mask, q)[:, None, :].expand(-1, n_rewards, -1)
    return routing_weights(s, mask, lam=lam, w_max=w_max, sharpen=1.0, clip=clip)



# ----------------------------------------------------------------------------- relevance variants
# A variant names the contrastive prompt x^-k (`contrast`, see core.contrast.CONTRASTS), the per-token distance of
# the two passes (`distance`, see DISTANCES) and how the distances of a sample's rewards combine into relevance
# (`combine`: fn(d (B, K, T), applicable (B, K)) -> relevance (B, K, T); NaN stays NaN where a reward does not
# apply). `pairwise`: relevance[k, i] depends on d[k, i] alone (`replay_pairs` may then skip the other rewards
# of a sample; a variant that reads the other rewards keeps all of them whenever one is replayed).


def js_relevance(d: Tensor, applicable: Tensor) -> Tensor:
    """`js`, `swap`, `logp`: the distance itself, relevance[k, i, t] = d[k, i, t]."""
    return d


def logp_distance(logp_tok: Tensor, logq_tok: Tensor) -> Tensor:
    """The `logp` distance of the sampled token: d = |log p(y_t | x) - log p(y_t | x^-k)|, elementwise on the
    gathered log-probs of the sampled tokens (no vocabulary-sized tensor); in [0, inf), 0 where they agree."""
    return (logp_tok.float() - logq_tok.float()).abs()


# name -> how a per-token distance is computed from the two passes: "js" on the full next-token
# distributions (`js_distance`), "logp" on the sampled token's log-probs only (`logp_distance`).
DISTANCES = ("js", "logp", "gradxinput")
# The distances of two teacher-forced passes (`core.algos.teacher_forcing.contrastive_distances`); `gradxinput` is
# an attribution of the constraint's tokens in one differentiated pass (`core.algos.attribution`).
PASS_DISTANCES = ("js", "logp")


def placebo_merge(ds: list[Tensor]) -> Tensor:
    """`placebo`: the removal distance less the placebo's, floored at 0 (docs/METHOD.md, "Relevance variants"):
        d[k,i,t] = max(0, d_remove[k,i,t] - d_placebo[k,i,t])
    with d_placebo the distance between x and x with a neutral sentence of constraint k's length added after it, so
    what any sentence of that length at that place does (position and length sensitivity) cancels. NaN stays NaN."""
    d_remove, d_placebo = ds
    return (d_remove - d_placebo).clamp(min=0.0)


def mean_merge(ds: list[Tensor]) -> Tensor:
    """`average`: the mean of the contrasts' distances, d = (1 / C) sum_c d_c (docs/METHOD.md, "Relevance
    variants"). NaN where any is NaN."""
    return torch.stack(ds).mean(0)


@dataclass(frozen=True)
class Relevance:
    """One relevance variant (docs/METHOD.md, "Relevance variants")."""

    contrast: str  # "remove": x^-k leaves out constraint k's part; "swap": its argument replaced; ... (CONTRASTS)
    distance: str  # one of DISTANCES
    combine: Callable[[Tensor, Tensor], Tensor]
    pairwise: bool
    # More contrastive prompts after `contrast` (one more pass each) and how their distances merge into one d
    # (B, K, T) before `combine`: fn([d_contrast, d_extra_1, ...]) -> d.
    extra: tuple[str, ...] = ()
    merge: Callable[[list[Tensor]], Tensor] | None = None

    @property
    def contrasts(self) -> tuple[str, ...]:
        """Every contrastive prompt the variant replays, one pass per (sample, reward) each."""
        return (self.contrast, *self.extra)

    def __call__(self, d: Tensor, applicable: Tensor) -> Tensor:
        return self.combine(d, applicable)


RELEVANCE: dict[str, Relevance] = {
    "js": Relevance("remove", "js", js_relevance, pairwise=True),
    "js_specific": Relevance("remove", "js", specific_relevance, pairwise=False),
    "swap": Relevance("swap", "js", js_relevance, pairwise=True),
    "swap_specific": Relevance("swap", "js", specific_relevance, pairwise=False),
    "logp": Relevance("remove", "logp", js_relevance, pairwise=True),
    "logp_specific": Relevance("remove", "logp", specific_relevance, pairwise=False),
    # per family, the variant its evidence names (core.evidence; default: swap for the families whose argument the
    # policy reads, core.contrast.AUTO_SWAP_FAMILIES, js for the rest)
    "auto": Relevance("auto", "js", js_relevance, pairwise=True),
    # the newer contrastive prompts (core.contrast_kinds): content replaced by a same-length neutral text, the
    # constraint's opposite, its key words removed; the placebo-corrected removal; the mean of five contrasts
    "neutral": Relevance("neutral", "js", js_relevance, pairwise=True),
    "opposite": Relevance("opposite", "js", js_relevance, pairwise=True),
    "key": Relevance("key", "js", js_relevance, pairwise=True),
    "placebo": Relevance("remove", "js", js_relevance, pairwise=True, extra=("placebo",), merge=placebo_merge),
    "average": Relevance("remove", "js", js_relevance, pairwise=True, extra=("swap", "neutral", "opposite", "key"),
                         merge=mean_merge),
    # gradient x input of the constraint's tokens (those x^-k of `remove` lacks) on each response token's log-prob
    "gradxinput": Relevance("remove", "gradxinput", js_relevance, pairwise=True),
}
# Variants whose relevance[k, i] depends on d[k, i] alone (`Relevance.pairwise`).
PAIRWISE_RELEVANCE = frozenset(name for name, r in RELEVANCE.items() if r.pairwise)


def one_pass_reason(name: str, distance: str | None = None) -> str:
    """Why one no-gradient contrastive pass per (sample, reward), all of one distance, cannot compute variant `name`
    ("" when it can). This is the replay MRTPOTrainer runs (docs/TRL.md). `distance`: the one distance that pass
    must give (`auto` under TRL: js), else any of PASS_DISTANCES. `auto` itself is resolved per reward by the caller.

    >>> one_pass_reason("swap"), one_pass_reason("logp"), one_pass_reason("logp", distance="js")
    ('', '', 'logp uses distance logp, not js')
    >>> one_pass_reason("placebo")
    'placebo merges 2 contrastive passes per reward (remove, placebo)'
    """
    variant = get_relevance(name)
    if variant.distance not in PASS_DISTANCES:
        return f"{name} differentiates the policy through the constraint's tokens (no no-gradient pass gives it)"
    if len(variant.contrasts) > 1:
        return (f"{name} merges {len(variant.contrasts)} contrastive passes per reward "
                f"({', '.join(variant.contrasts)})")
    if distance is not None and variant.distance != distance:
        return f"{name} uses distance {variant.distance}, not {distance}"
    return ""


def get_relevance(name: str) -> Relevance:
    """The relevance variant `name` (callable as `(d, applicable) -> relevance`); unknown names raise with
    the valid ones."""
    try:
        return RELEVANCE[name]
    except KeyError:
        raise ValueError(f"unknown relevance {name!r}; valid: {', '.join(RELEVANCE)}") from None


# ----------------------------------------------------------------------------- routing sources


def replay_pairs(group_adv: Tensor, applicable: Tensor, relevance: str = "js") -> Tensor:
    """(B, K) bool: the (sample, reward) pairs whose contrastive pass can change a token advantage.

    Reward k's term of A[i, t] is w_k * w[k, i, t] * a[k, i] (docs/METHOD.md, "MRTPO"): where the GDPO
    group advantage a[k, i] is 0 (every sample of the group scored the same on reward k, or the reward
    applies to fewer than 2 of them) the routing weight multiplies 0, so d[k, i] cannot change anything.
        active[i, k] = applicable[i, k] and a[k, i] != 0
    For a relevance variant in `PAIRWISE_RELEVANCE` the pairs are `active`; any other variant reads the
    other rewards of the sample, so a sample with an active pair keeps all its applicable rewards:
        pairs[i, k] = applicable[i, k] and any_j active[i, j]
    Skipping the other pairs leaves every token advantage and credit bitwise unchanged.
    """
    applicable = applicable.bool()
    active = applicable & (group_adv != 0)
    if relevance in PAIRWISE_RELEVANCE:
        return active
    return applicable & active.any(dim=1, keepdim=True)


@dataclass
class RoutingInputs:
    """What a routing source may use.

    `distances(pairs)` runs the contrastive replay passes on demand for the (sample, reward) pairs
    where `pairs` (B, K) is True and returns d (B, K, T), NaN elsewhere (only `replay` calls it).
    `replay` (B, K) bool limits replay to those pairs (`replay_pairs`); None replays every applicable pair.
    """

    mask: Tensor  # (B, T) 1 on real response tokens
    span_mask: Tensor  # (B, K, T) bool: token overlaps a span verifier k inspected
    applicable: Tensor  # (B, K) bool: reward k applies to sample i's prompt
    lam: float = 1.0
    w_max: float = 5.0
    sharpen: float = 1.0
    relevance: str = "js"
    distances: Callable[[Tensor], Tensor] | None = None
    replay: Tensor | None = None
    clip: str = "clip"  # one of ROUTING_CLIPS: what happens to weight above w_max (`routing_weights`)
    entropy: Tensor | None = None  # (B, T) the rollout policy's next-token entropy (only `entropy` reads it)
    entropy_q: float = 0.2  # `entropy`: the fraction of each response's tokens that get the weight


def route_replay(inputs: RoutingInputs) -> tuple[Tensor, Tensor]:
    """`replay`: d by contrastive replay on the chosen pairs, the relevance variant, then `routing_weights`.
    d is NaN where the reward does not apply and where replay was skipped (uniform weights there)."""
    if inputs.distances is None:
        raise ValueError("replay routing needs the trainer's contrastive passes (RoutingInputs.distances)")
    pairs = inputs.applicable.bool()
    if inputs.replay is not None:
        pairs = pairs & inputs.replay.bool()
    d = inputs.distances(pairs).float()  # (B, K, T)
    d = torch.where(pairs[:, :, None], d, torch.full_like(d, float("nan")))
    relevance = get_relevance(inputs.relevance)(d, pairs)
    w = routing_weights(relevance, inputs.mask, lam=inputs.lam, w_max=inputs.w_max, sharpen=inputs.sharpen,
                        clip=inputs.clip)
    return w, d


def route_span(inputs: RoutingInputs) -> tuple[Tensor, None]:
    """`span` (oracle): the verifiers' own inspected-span masks as relevance (`span_routing`)."""
    return span_routing(inputs.span_mask, inputs.mask, lam=inputs.lam, w_max=inputs.w_max, clip=inputs.clip), None


def route_uniform(inputs: RoutingInputs) -> tuple[Tensor, None]:
    """`uniform`: every routing weight 1 on real tokens (MRTPO then equals GDPO exactly)."""
    k = inputs.span_mask.shape[1]
    return inputs.mask[:, None, :].expand(-1, k, -1).to(torch.float32), None


def route_entropy(inputs: RoutingInputs) -> tuple[Tensor, None]:
    """`entropy` (control): the top-q highest-entropy tokens of each response, the same for every reward
    (`entropy_routing`)."""
    if inputs.entropy is None:
        raise ValueError("entropy routing needs the rollout policy's per-token entropy (RoutingInputs.entropy)")
    k = inputs.span_mask.shape[1]
    return entropy_routing(inputs.entropy, inputs.mask, k, q=inputs.entropy_q, lam=inputs.lam, w_max=inputs.w_max,
                           clip=inputs.clip), None


# name -> fn(RoutingInputs) -> (weights (B, K, T), relevance d (B, K, T) or None when no replay ran)
ROUTING: dict[str, Callable[[RoutingInputs], tuple[Tensor, Tensor | None]]] = {
    "replay": route_replay,
    "span": route_span,
    "uniform": route_uniform,
    "entropy": route_entropy,
}


def get_routing(name: str) -> Callable[[RoutingInputs], tuple[Tensor, Tensor | None]]:
    """The routing source `name`; unknown names raise with the valid ones."""
    try:
        return ROUTING[name]
    except KeyError:
        raise ValueError(f"unknown routing {name!r}; valid: {', '.join(ROUTING)}") from None
