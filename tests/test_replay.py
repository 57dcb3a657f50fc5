"""Contrastive replay: JS distance, routing weights, span metrics, and the teacher-forced passes on a
tiny random Llama (alignment with what generation produced, padding and chunking invariance)."""

import math

import numpy as np
import pytest
import torch

from core.algos import forward_passes
from core.algos.forward_passes import response_logits, teacher_forced_chunks
from core.algos.routing import js_distance, routing_weights, span_routing, specific_relevance
from core.algos.span_metrics import control_auc, js_summary, mass_in_span, roc_auc, span_agreement, span_auc
from core.algos.teacher_forcing import contrastive_distances, response_logprobs
from core.model import response_mask

NAN = float("nan")

# ----------------------------------------------------------------------------- js_distance


def _numpy_js(p, q):
    """Direct float64 computation: sqrt(1/2 KL(p||m) + 1/2 KL(q||m)) in bits, 0 log 0 = 0."""
    m = (p + q) / 2

    def kl(a):
        safe = np.where(a > 0, a, 1.0)
        return np.sum(np.where(a > 0, a * np.log2(safe / np.where(a > 0, m, 1.0)), 0.0), axis=-1)

    return np.sqrt(np.clip(0.5 * kl(p) + 0.5 * kl(q), 0, 1))


def test_js_matches_numpy_and_is_symmetric_bounded():
    g = torch.Generator().manual_seed(0)
    logits_p = torch.randn(64, 30, generator=g) * 4
    logits_q = torch.randn(64, 30, generator=g) * 4
    logits_p[:8, :10] = -torch.inf  # exact zeros in p
    logits_q[4:12, 5:20] = -torch.inf  # and in q, overlapping
    lp, lq = torch.log_softmax(logits_p, -1), torch.log_softmax(logits_q, -1)
    d = js_distance(lp, lq)
    assert d.shape == (64,)
    assert torch.equal(d, js_distance(lq, lp))
    assert torch.all((d >= 0) & (d <= 1))
    expected = _numpy_js(lp.exp().double().numpy(), lq.exp().double().numpy())
    assert np.allclose(d.numpy(), expected, atol=1e-5)


def test_js_in_blocks_equals_one_block(monkeypatch):
    from core.algos import routing

    g = torch.Generator().manual_seed(1)
    lp = torch.log_softmax(torch.randn(3, 7, 50, generator=g) * 3, -1)
    lq = torch.log_softmax(torch.randn(3, 7, 50, generator=g) * 3, -1)
    whole = js_distance(lp, lq)
    monkeypatch.setattr(routing, "JS_BLOCK_ELEMENTS", 120)  # blocks of 2 rows
    assert whole.shape == (3, 7) and torch.equal(js_distance(lp, lq), whole)
    assert torch.equal(js_distance(lp[0, 0], lq[0, 0]), whole[0, 0])  # a single distribution


def test_js_identical_and_disjoint():
    lp = torch.log_softmax(torch.randn(5, 100) * 3, -1)
    assert torch.equal(js_distance(lp, lp), torch.zeros(5))
    # disjoint supports: JSD = 1 bit, distance 1
    lp = torch.log(torch.tensor([[0.5, 0.5, 0.0, 0.0]]))
    lq = torch.log(torch.tensor([[0.0, 0.0, 0.25, 0.75]]))
    assert js_distance(lp, lq).item() == pytest.approx(1.0, abs=1e-6)
    # a hand case: p = (1, 0), q = (1/2, 1/2): m = (3/4, 1/4);
    # KL(p||m) = log2(4/3); KL(q||m) = 1/2 log2(2/3) + 1/2 log2(2) ; JSD = mean of the two
    jsd = 0.5 * math.log2(4 / 3) + 0.5 * (0.5 * math.log2(2 / 3) + 0.5 * math.log2(2))
    got = js_distance(torch.log(torch.tensor([1.0, 0.0])), torch.log(torch.tensor([0.5, 0.5])))
    assert got.item() == pytest.approx(math.sqrt(jsd), rel=1e-5)


def test_js_extreme_logits_stay_finite():
    lp = torch.log_softmax(torch.tensor([[0.0, -200.0, -1e4]]), -1)
    lq = torch.log_softmax(torch.tensor([[-1e4, 0.0, -300.0]]), -1)
    d = js_distance(lp, lq)
    assert torch.isfinite(d).all() and d.item() == pytest.approx(1.0, abs=1e-4)


# ----------------------------------------------------------------------------- routing weights


def test_routing_weights_hand_case():
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    d = torch.tensor([[[1.0, 3.0, 0.0, 0.0, 7.0]]])  # padding value must be ignored
    # u = T d / sum d = 4 (1, 3, 0, 0) / 4
    assert routing_weights(d, mask, lam=1.0, w_max=10.0)[0, 0].tolist() == [1.0, 3.0, 0.0, 0.0, 0.0]
    # lam = .5: .5 + .5 u = (1, 2, .5, .5); clip at 1.5
    assert routing_weights(d, mask, lam=0.5, w_max=1.5)[0, 0].tolist() == [1.0, 1.5, 0.5, 0.5, 0.0]
    # sharpen 2: d' = (1, 9, 0, 0), u = 4 d' / 10
    got = routing_weights(d, mask, lam=1.0, w_max=10.0, sharpen=2.0)[0, 0]
    assert got.tolist() == pytest.approx([0.4, 3.6, 0.0, 0.0, 0.0], rel=1e-6)
    assert routing_weights(d, mask, lam=0.0, w_max=5.0)[0, 0].tolist() == [1.0, 1.0, 1.0, 1.0, 0.0]


def test_routing_weights_mean_one_and_clipping():
    g = torch.Generator().manual_seed(3)
    mask = torch.ones(6, 10, dtype=torch.bool)
    mask[2, 4:] = False
    mask[5, 1:] = False
    d = torch.rand(6, 3, 10, generator=g) * 0.1 + 0.05
    w = routing_weights(d, mask, lam=1.0, w_max=100.0)
    n = mask.sum(-1, keepdim=True).float()
    assert torch.allclose(w.sum(-1) / n, torch.ones(6, 3), atol=1e-5)
    assert torch.all(w.permute(0, 2, 1)[~mask] == 0)
    spike = torch.zeros(1, 1, 10)
    spike[0, 0, 3] = 0.4
    w = routing_weights(spike, torch.ones(1, 10), lam=1.0, w_max=5.0)
    assert w[0, 0, 3].item() == 5.0 and w.max().item() == 5.0 and w.min().item() == 0.0


def test_routing_weights_zero_or_nan_relevance_is_uniform():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    d = torch.zeros(2, 2, 3)
    d[1, 1] = NAN
    w = routing_weights(d, mask, lam=1.0, w_max=5.0)
    assert w.tolist() == [[[1, 1, 0], [1, 1, 0]], [[1, 1, 1], [1, 1, 1]]]


def test_specific_relevance():
    d = torch.tensor([[[0.5], [0.2], [0.1]]])  # (B=1, K=3, T=1)
    assert specific_relevance(d)[0, :, 0].tolist() == pytest.approx([0.35, 0.0, 0.0])
    d_nan = torch.tensor([[[0.5], [0.2], [NAN]]])  # reward 3 does not apply: not in the others' mean
    got = specific_relevance(d_nan)[0, :, 0]
    assert got[:2].tolist() == pytest.approx([0.3, 0.0]) and math.isnan(got[2].item())
    # an explicit applicability mask wins over the NaN rule
    got = specific_relevance(torch.tensor([[[0.5], [0.2], [0.1]]]), torch.tensor([[True, True, False]]))[0, :, 0]
    assert got[:2].tolist() == pytest.approx([0.3, 0.0]) and math.isnan(got[2].item())
    single = torch.rand(2, 1, 4)
    assert torch.equal(specific_relevance(single), single)


def test_span_routing():
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    spans = torch.tensor([[[0, 1, 1, 0, 0], [0, 0, 0, 0, 0]]])
    w = span_routing(spans, mask, lam=1.0, w_max=5.0)
    assert w[0, 0].tolist() == [0.0, 2.0, 2.0, 0.0, 0.0]
    assert w[0, 1].tolist() == [1.0, 1.0, 1.0, 1.0, 0.0]


# ----------------------------------------------------------------------------- span metrics


def test_mass_in_span_hand_case():
    x = torch.tensor([[[1.0, 3.0, 0.0, 5.0], [0.0, 0.0, 0.0, 0.0]]])
    spans = torch.tensor([[[0, 1, 1, 1], [1, 0, 0, 0]]])
    mask = torch.tensor([[1, 1, 1, 0]])
    share = mass_in_span(x, spans, mask)
    assert share[0, 0].item() == pytest.approx(0.75)  # 3 of 4 (the padding's 5 is ignored)
    assert math.isnan(share[0, 1].item())  # no mass


def _brute_auc(scores, labels):
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def test_roc_auc():
    assert roc_auc(torch.tensor([1.0, 2.0, 2.0, 3.0]), torch.tensor([0, 0, 1, 1])) == pytest.approx(0.875)
    assert roc_auc(torch.tensor([3.0, 2.0]), torch.tensor([1, 0])) == 1.0
    assert roc_auc(torch.tensor([3.0, 3.0]), torch.tensor([1, 0])) == 0.5
    assert math.isnan(roc_auc(torch.tensor([1.0, 2.0]), torch.tensor([1, 1])))
    g = torch.Generator().manual_seed(4)
    scores = torch.randint(0, 6, (80,), generator=g).float()  # many ties
    labels = torch.rand(80, generator=g) < 0.3
    assert roc_auc(scores, labels) == pytest.approx(_brute_auc(scores.tolist(), labels.tolist()), abs=1e-12)


def test_span_auc_and_control():
    g = torch.Generator().manual_seed(5)
    spans = torch.zeros(4, 2, 8, dtype=torch.bool)
    spans[:, 0, 2] = True
    spans[:, 1, 5:] = True
    mask = torch.ones(4, 8, dtype=torch.bool)
    d = torch.rand(4, 2, 8, generator=g) * 0.1
    d[:, 0] += spans[:, 0] * 1.0  # reward 0's JS sits on its span
    assert span_auc(d, spans, mask, 0) == 1.0
    ctrl = control_auc(d, spans, mask, 0)  # reward 1's JS on reward 0's spans: chance level
    assert 0.0 <= ctrl < 1.0 and ctrl == span_auc(d, spans, mask, 0, scorer=1)
    assert math.isnan(control_auc(d[:, :1], spans[:, :1], mask, 0))
    stats = span_agreement(d, routing_weights(d, mask, 1.0, 5.0), spans, mask, ["kw", "end"])
    assert set(stats) == {f"span/{n}/{m}" for n in ("kw", "end") for m in ("mass_in", "auc", "auc_control")}
    assert stats["span/kw/auc"] == 1.0 and stats["span/kw/mass_in"] > 0.5
    no_replay = span_agreement(None, torch.ones(4, 2, 8), spans, mask, ["kw", "end"])
    assert no_replay["span/kw/mass_in"] == pytest.approx(1 / 8) and math.isnan(no_replay["span/kw/auc"])
    # a reward that applies to no sample's prompt has no share (not a share of 0)
    none_apply = torch.tensor([[True, False]] * 4)
    stats = span_agreement(None, torch.ones(4, 2, 8), spans, mask, ["kw", "end"], applicable=none_apply)
    assert math.isnan(stats["span/end/mass_in"]) and stats["span/kw/mass_in"] == pytest.approx(1 / 8)
    summary = js_summary(d, mask, ["kw", "end"])
    assert summary["js/kw/max"] == pytest.approx(float(d[:, 0].max()))


# ----------------------------------------------------------------------------- teacher-forced passes


def _tiny_llama(seed=0, vocab=48):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, initializer_range=0.4,
        pad_token_id=0, bos_token_id=2, eos_token_id=1,
    )
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return _tiny_llama()


PROMPTS = [[2, 5, 9], [2, 7, 7, 11, 30, 4, 17], [2, 40, 3, 3, 3]]


def _generate(model, prompts, n_new=12, seed=0):
    """Sample with plain temperature-1 sampling and keep the logits generation used."""
    p_max = max(map(len, prompts))
    ids = torch.zeros(len(prompts), p_max, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for r, p in enumerate(prompts):
        ids[r, p_max - len(p):] = torch.tensor(p)
        attn[r, p_max - len(p):] = 1
    torch.manual_seed(seed)
    out = model.generate(
        input_ids=ids, attention_mask=attn, max_new_tokens=n_new, do_sample=True, top_k=0, top_p=1.0,
        temperature=1.0, pad_token_id=0, eos_token_id=1, output_logits=True, return_dict_in_generate=True,
    )
    resp = out.sequences[:, p_max:]
    gen_logp = torch.log_softmax(torch.stack(out.logits, 1).float(), -1)
    return resp, response_mask(resp, 1), gen_logp


def test_alignment_matches_generation(tiny):
    resp, mask, gen_logp = _generate(tiny, PROMPTS)
    gen_token_logp = torch.gather(gen_logp, -1, resp[..., None]).squeeze(-1)
    out = response_logprobs(tiny, PROMPTS, resp, mask, chunk=2)
    assert out.token_logp.shape == resp.shape
    m = mask.bool()
    assert torch.allclose(out.token_logp[m], gen_token_logp[m], atol=1e-4)
    assert torch.allclose(out.logp_full[m], gen_logp[m], atol=1e-4)
    aligned = out.token_logp[m].mean().item()
    # the distribution one position off scores the sampled tokens clearly worse
    shifted = torch.gather(out.logp_full[:, 1:], -1, resp[:, :-1, None]).squeeze(-1)[m[:, 1:]].mean().item()
    assert aligned > shifted + 0.5
    assert torch.all(out.token_logp[~m] == 0) and torch.all(out.entropy[m] > 0)


def test_padding_and_chunking_invariance(tiny):
    resp, mask, _ = _generate(tiny, PROMPTS, seed=1)
    one = response_logprobs(tiny, PROMPTS, resp, mask, chunk=1)
    many = response_logprobs(tiny, PROMPTS, resp, mask, chunk=8)
    m = mask.bool()
    assert torch.allclose(one.token_logp[m], many.token_logp[m], atol=1e-5)
    # a single unpadded row computed by hand: logits at prompt_len + t - 1 predict token t
    p = PROMPTS[1]
    n = int(mask[1].sum())
    seq = torch.tensor([p + resp[1, :n].tolist()])
    logits = tiny(input_ids=seq).logits[0, len(p) - 1: len(p) + n - 1]
    assert torch.allclose(torch.log_softmax(logits, -1), many.logp_full[1, :n], atol=1e-4)
    with torch.no_grad():
        rl = response_logits(tiny, [p], resp[1:2, :n], mask[1:2, :n])
    assert torch.allclose(rl[0], logits, atol=1e-4)


def test_contrastive_js(tiny):
    resp, mask, _ = _generate(tiny, PROMPTS, seed=2)
    contrastive = [
        [[2, 5], PROMPTS[0]],  # reward 0: a different prompt; reward 1: the same prompt
        [None, [2, 30, 4, 17]],  # reward 0 does not apply to sample 1
        [[2, 40], [9, 9, 9, 9, 9, 9, 9, 9, 9]],
    ]
    d = contrastive_distances(tiny, PROMPTS, contrastive, resp, mask, chunk_size=3)
    m = mask.bool()
    assert d.shape == (3, 2, resp.shape[1])
    assert torch.isnan(d[1, 0]).all() and not torch.isnan(d[[0, 2]]).any() and not torch.isnan(d[1, 1]).any()
    assert d[0, 1][m[0]].max().item() < 1e-3  # same prompt: no shift
    assert d[0, 0][m[0]].mean().item() > 0.01 and d[2, 1][m[2]].mean().item() > 0.01
    valid = d[~torch.isnan(d)]
    assert torch.all((valid >= 0) & (valid <= 1))
    for i in (0, 2):  # padding positions of applicable rewards get 0
        assert torch.all(d[i][:, ~m[i]] == 0)
    # chunking and the reused full pass do not change the result
    d1 = contrastive_distances(tiny, PROMPTS, contrastive, resp, mask, chunk_size=1)
    full = response_logprobs(tiny, PROMPTS, resp, mask, chunk=3).logp_full
    d2 = contrastive_distances(tiny, PROMPTS, contrastive, resp, mask, chunk_size=5, logp_full=full)
    ok = ~torch.isnan(d)
    assert torch.allclose(d1[ok], d[ok], atol=1e-3) and torch.allclose(d2[ok], d[ok], atol=1e-3)
    # against a direct computation for one (sample, reward): unpadded single-row passes
    n = int(m[2].sum())
    r = resp[2, :n].tolist()
    lp = torch.log_softmax(tiny(input_ids=torch.tensor([PROMPTS[2] + r])).logits[0, 4: 4 + n], -1)
    lq = torch.log_softmax(tiny(input_ids=torch.tensor([[2, 40] + r])).logits[0, 1: 1 + n], -1)
    assert torch.allclose(d[2, 0, :n], js_distance(lp, lq), atol=1e-3)


# ----------------------------------------------------------------------------- prompt-cached passes


def _uncached_rows(model, prompts, resp, lengths):
    """The reference: every row alone, unpadded, through the plain forward (no cache, no batching)."""
    out = []
    for p, r, n in zip(prompts, resp, lengths, strict=True):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([list(p) + r[:n].tolist()]), use_cache=False).logits[0]
        out.append(logits[len(p) - 1: len(p) + n - 1])  # row t predicts response token t
    return out


# prompts of different lengths (left padding inside a prefix batch), the same prompt on several rows
# (its KV state computed once, shared) and responses of different lengths (right padding)
CACHE_PROMPTS = [[2, 5, 9], [2, 7, 7, 11, 30, 4, 17], [2, 5, 9], [3], [2, 7, 7, 11, 30, 4, 17], [2, 40, 3, 3, 3, 8]]
CACHE_LENGTHS = [7, 3, 10, 1, 10, 5]


def _cache_case(seed=7):
    g = torch.Generator().manual_seed(seed)
    resp = torch.randint(3, 48, (len(CACHE_PROMPTS), max(CACHE_LENGTHS)), generator=g)
    for r, n in enumerate(CACHE_LENGTHS):
        resp[r, n:] = 0
    mask = torch.arange(resp.shape[1])[None, :] < torch.tensor(CACHE_LENGTHS)[:, None]
    return resp, mask


@pytest.mark.parametrize("chunk", [1, 2, 4, 100])
def test_cached_chunks_equal_uncached_reference(tiny, chunk):
    import warnings


    resp, mask = _cache_case()
    ref = _uncached_rows(tiny, CACHE_PROMPTS, resp, CACHE_LENGTHS)
    seen, order = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecated cache arguments or other warnings on this path
        for jobs, logits in teacher_forced_chunks(tiny, CACHE_PROMPTS, resp, CACHE_LENGTHS, chunk=chunk):
            assert len(jobs) <= chunk and logits.shape[:2] == (len(jobs), max(CACHE_LENGTHS[j] for j in jobs))
            assert not logits.requires_grad
            for row, j in enumerate(jobs):
                n = CACHE_LENGTHS[j]
                assert torch.allclose(logits[row, :n], ref[j], atol=1e-4), (chunk, j)
                assert torch.isfinite(logits[row, :n]).all()
            seen.extend(jobs)
            order.extend(CACHE_LENGTHS[j] for j in jobs)
    assert sorted(seen) == list(range(len(CACHE_PROMPTS)))  # every job exactly once
    assert order == sorted(order, reverse=True)  # longest responses first: little padding per chunk


def test_cached_chunks_match_batched_uncached_and_rows_argument(tiny):

    resp, mask = _cache_case(seed=8)
    with torch.no_grad():
        batched = response_logits(tiny, CACHE_PROMPTS, resp, mask)  # the left-padded uncached pass
    # jobs that point at response rows: row 4's response under two other prompts, row 2's under its own
    jobs_prompts, rows = [[2, 5, 9], [3, 3], CACHE_PROMPTS[2]], [4, 4, 2]
    got = {}
    for jobs, logits in teacher_forced_chunks(tiny, jobs_prompts, resp, CACHE_LENGTHS, chunk=2, rows=rows):
        got.update({j: logits[r] for r, j in enumerate(jobs)})
    n2, n4 = CACHE_LENGTHS[2], CACHE_LENGTHS[4]
    assert torch.allclose(got[2][:n2], batched[2, :n2], atol=1e-4)
    ref = _uncached_rows(tiny, jobs_prompts[:2], resp[[4, 4]], [n4, n4])
    assert torch.allclose(got[0][:n4], ref[0], atol=1e-4) and torch.allclose(got[1][:n4], ref[1], atol=1e-4)
    with pytest.raises(ValueError):
        list(teacher_forced_chunks(tiny, [[]], resp[:1], [3]))


class _NoCacheModel(torch.nn.Module):
    """A causal LM whose forward takes no KV cache: the cached path must fall back to full sequences."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, attention_mask=None, position_ids=None, use_cache=False):
        return self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          use_cache=False)


class _CacheIgnoringModel(_NoCacheModel):
    """Takes a `cache` argument but returns none (as with caching switched off)."""

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=False):
        assert cache is None  # no cache came back, so none may be passed in
        return super().forward(input_ids, attention_mask, position_ids)


@pytest.mark.parametrize("wrapper", [_NoCacheModel, _CacheIgnoringModel])
def test_no_cache_model_falls_back(tiny, wrapper):

    resp, _ = _cache_case(seed=9)
    ref = _uncached_rows(tiny, CACHE_PROMPTS, resp, CACHE_LENGTHS)
    seen = []
    for jobs, logits in teacher_forced_chunks(wrapper(tiny), CACHE_PROMPTS, resp, CACHE_LENGTHS, chunk=4):
        for row, j in enumerate(jobs):
            assert torch.allclose(logits[row, : CACHE_LENGTHS[j]], ref[j], atol=1e-4)
        seen.extend(jobs)
    assert sorted(seen) == list(range(len(CACHE_PROMPTS)))


def test_cached_replay_equals_uncached_replay(tiny):
    """response_logprobs and contrastive_distances (prompt-cached, length-sorted) against the per-row uncached
    computation of p_t, q_t and d."""
    resp, mask = _cache_case(seed=10)
    contrastive = [
        [[2, 9], [2, 5]],
        [[2, 7, 11, 30, 4, 17], None],
        [[2, 9], [2, 5]],  # same contrastive prompts as row 0 (a group): computed once
        [None, [4, 4, 4, 4]],
        [[2, 7, 11, 30, 4, 17], [2, 7, 7, 11]],
        [[5], [2, 40, 3]],
    ]
    full = response_logprobs(tiny, CACHE_PROMPTS, resp, mask, chunk=3)
    d = contrastive_distances(tiny, CACHE_PROMPTS, contrastive, resp, mask, chunk_size=3, logp_full=full.logp_full)
    d_alone = contrastive_distances(tiny, CACHE_PROMPTS, contrastive, resp, mask, chunk_size=4)  # full rows join the jobs
    ref_p = _uncached_rows(tiny, CACHE_PROMPTS, resp, CACHE_LENGTHS)
    for i, n in enumerate(CACHE_LENGTHS):
        lp = torch.log_softmax(ref_p[i], -1)
        assert torch.allclose(full.logp_full[i, :n], lp, atol=1e-4)
        assert torch.allclose(full.token_logp[i, :n], lp.gather(-1, resp[i, :n, None])[:, 0], atol=1e-4)
        assert torch.allclose(full.entropy[i, :n], -(lp.exp() * lp).sum(-1), atol=1e-4)
        assert torch.all(full.token_logp[i, n:] == 0) and torch.all(full.logp_full[i, n:] == 0)
        for k, c in enumerate(contrastive[i]):
            if c is None:
                assert torch.isnan(d[i, k]).all() and torch.isnan(d_alone[i, k]).all()
                continue
            lq = torch.log_softmax(_uncached_rows(tiny, [c], resp[i: i + 1], [n])[0], -1)
            expected = js_distance(lp, lq)
            assert torch.allclose(d[i, k, :n], expected, atol=2e-4), (i, k)
            assert torch.allclose(d_alone[i, k, :n], expected, atol=2e-4), (i, k)
            assert torch.all(d[i, k, n:] == 0)


def test_chunks_sorted_within_windows_and_prompts_released(tiny, monkeypatch):
    """Jobs sorted by length within windows of SORT_WINDOW_CHUNKS chunks; a prompt's KV state is dropped
    once no later chunk needs it, so with group-contiguous jobs few prompts are alive at a time."""

    monkeypatch.setattr(forward_passes, "SORT_WINDOW_CHUNKS", 2)
    g = torch.Generator().manual_seed(11)
    n_prompts, group, chunk = 6, 4, 2
    prompts = [[2] + torch.randint(3, 48, (1 + p,), generator=g).tolist() for p in range(n_prompts)]
    jobs_prompts = [p for p in prompts for _ in range(group)]  # group-contiguous, like a batch's rows
    lengths = torch.randint(1, 9, (len(jobs_prompts),), generator=g).tolist()
    resp = torch.randint(3, 48, (len(jobs_prompts), 8), generator=g)
    alive = []
    release = forward_passes._PrefixStore.release

    def spy(self, c):
        release(self, c)
        alive.append(len({id(entry) for entry, _ in self.where.values()}) * chunk)  # live batches x prompts each

    monkeypatch.setattr(forward_passes._PrefixStore, "release", spy)
    ref = _uncached_rows(tiny, jobs_prompts, resp, lengths)
    order = []
    for jobs, logits in teacher_forced_chunks(tiny, jobs_prompts, resp, lengths, chunk=chunk):
        order.extend(jobs)
        for row, j in enumerate(jobs):
            assert torch.allclose(logits[row, : lengths[j]], ref[j], atol=1e-4)
    window = chunk * 2
    assert sorted(order) == list(range(len(jobs_prompts)))
    for w in range(0, len(order), window):
        block = order[w: w + window]
        assert sorted(block) == list(range(w, w + len(block)))  # a window holds its own jobs
        assert [lengths[j] for j in block] == sorted((lengths[j] for j in block), reverse=True)
    assert max(alive) <= 2 * chunk and alive[-1] == 0  # never all six prompts at once; all dropped at the end
