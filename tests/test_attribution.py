"""Gradient-x-input relevance (core/algos/attribution.py; docs/METHOD.md, "Gradient x input (`gradxinput`)")."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from core.algos.attribution import constraint_token_range, gradxinput_relevance

# ----------------------------------------------------------------------------- constraint_token_range


def test_range_of_a_removed_middle_part():
    # x = [1, 2] + [7, 8, 9] + [3, 4]: prefix 2, suffix 2 -> [2, 5)
    assert constraint_token_range([1, 2, 7, 8, 9, 3, 4], [1, 2, 3, 4]) == (2, 5)


def test_range_at_the_start_and_at_the_end():
    assert constraint_token_range([7, 8, 1, 2], [1, 2]) == (0, 2)  # no common prefix, suffix 2
    assert constraint_token_range([1, 2, 7, 8], [1, 2]) == (2, 4)  # prefix 2, suffix limited to 0


def test_suffix_may_not_overlap_the_prefix():
    # x = [1, 2, 3, 2, 3, 4], x^-k = [1, 2, 3, 4]: prefix 3 ([1, 2, 3]); the suffix may be at most
    # min(6, 4) - 3 = 1 long ([4]), although [2, 3, 4] is common to both ends -> [3, 5), the tokens [2, 3]
    assert constraint_token_range([1, 2, 3, 2, 3, 4], [1, 2, 3, 4]) == (3, 5)
    # a repeated token: x = [5, 5, 5], x^-k = [5, 5]: prefix 2, suffix limit 0 -> [2, 3)
    assert constraint_token_range([5, 5, 5], [5, 5]) == (2, 3)


def test_range_covers_tokens_the_cut_tokenises_differently():
    # x = [10, 11] + [12, 13, 14] + [15]; at the cut x^-k merged into token 99 (not in x):
    # prefix [10, 11] (2), suffix [15] (1, since x[-2] = 14 != 99) -> [2, 5)
    assert constraint_token_range([10, 11, 12, 13, 14, 15], [10, 11, 99, 15]) == (2, 5)
    # the sentence's last token differs from its re-tokenisation in x^-k: [2, 3, 4] covers 12, 13 and the changed 14
    assert constraint_token_range([10, 11, 12, 13, 14, 15, 16], [10, 11, 98, 15, 16]) == (2, 5)


def test_nothing_removed_is_none():
    assert constraint_token_range([1, 2, 3], [1, 2, 3]) is None
    assert constraint_token_range([1, 2, 3], [1, 2, 9, 3]) is None  # x^-k only inserts: x lacks nothing
    assert constraint_token_range([], []) is None


# ----------------------------------------------------------------------------- a toy model differentiated by hand


class SumToy(torch.nn.Module):
    """h_c = sum of the real (attention mask 1) input embeddings at columns <= c, scalar embeddings e_v = E[v];
    logits_v = h_c * U_v. So d log p(y) / d e_j = U_y - sum_v p_v U_v for every real column j <= c."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(3, 1)
        self.out = torch.nn.Parameter(torch.tensor([0.0, 1.0, -1.0]))  # U
        with torch.no_grad():
            self.emb.weight.copy_(torch.tensor([[0.3], [1.0], [-0.5]]))  # E; the pad token 0 gets 0.3, masked out

    def get_input_embeddings(self):
        return self.emb

    def forward(self, inputs_embeds, attention_mask, position_ids=None, use_cache=False):
        h = (inputs_embeds * attention_mask[..., None].to(inputs_embeds.dtype)).cumsum(1)  # (n, L, 1)
        return SimpleNamespace(logits=h * self.out)  # (n, L, 3)


def test_toy_model_against_hand_computed_numbers():
    toy = SumToy()
    # sample 0: x = [1, 2, 2, 1] (e = 1, -.5, -.5, 1), x^-0 = [1, 1] -> S = [1, 3), sum_S e = -1; x^-1 = x -> NaN
    # sample 1: x = [2, 1], x^-0 = [2] -> S = [1, 2), sum_S e = 1; x^-1 None -> NaN
    prompts = [[1, 2, 2, 1], [2, 1]]
    contrastive = [[[1, 1], [1, 2, 2, 1]], [[2], None]]
    resp = torch.tensor([[1, 2], [1, 0]])  # padding at (1, 1): its unmasked derivative is not 0
    mask = torch.tensor([[1, 1], [1, 0]])
    a = gradxinput_relevance(toy, prompts, contrastive, resp, mask, chunk_size=8)
    # a = |sum_S e| * |U_y - (p_1 - p_2)|, p = softmax(0, h, -h):
    # (0, t=0) h = 1 - .5 - .5 + 1 = 1, y = 1: p1 - p2 = (e - 1/e) / (1 + e + 1/e) = .575210 -> .424790
    # (0, t=1) h = 1 + e(y_0 = 1) = 2, y = 2: p1 - p2 = (e^2 - e^-2) / (1 + e^2 + e^-2) = .850937 -> |-1 - .850937|
    # (1, t=0) h = -.5 + 1 = .5, y = 1: p1 - p2 = (e^.5 - e^-.5) / (1 + e^.5 + e^-.5) = .320157 -> 1 - .320157
    assert a.shape == (2, 2, 2)
    assert a[0, 0].tolist() == pytest.approx([0.4247896, 1.8509371], abs=1e-6)
    assert a[1, 0, 0].item() == pytest.approx(0.6798433, abs=1e-6)
    assert a[1, 0, 1].item() == 0.0  # padding
    assert torch.isnan(a[0, 1]).all() and torch.isnan(a[1, 1]).all()  # x^-k = x; reward does not apply
    # one (i, k) row per call gives the same numbers; the parameters got no gradient
    assert torch.equal(gradxinput_relevance(toy, prompts, contrastive, resp, mask, chunk_size=1).nan_to_num(-1),
                       a.nan_to_num(-1))
    assert all(p.grad is None for p in toy.parameters())


def test_hand_formula_is_what_the_toy_computes():
    """The closed form the numbers above come from, checked at one more point (h = -1.5, y = 0)."""
    h = -1.5
    z = 1 + math.exp(h) + math.exp(-h)
    toy = SumToy()
    # x = [2, 2, 2] (h at the last column = -1.5), x^-0 = [2] -> S = [1, 3), sum_S e = -1; response [0]
    a = gradxinput_relevance(toy, [[2, 2, 2]], [[[2]]], torch.tensor([[0]]), torch.tensor([[1]]))
    assert a[0, 0, 0].item() == pytest.approx(abs(-1.0 * (0 - (math.exp(h) - math.exp(-h)) / z)), abs=1e-6)


# ----------------------------------------------------------------------------- a real tiny transformers model


@pytest.fixture(scope="module")
def tiny_instruct():
    from core.model import encode_prompt, load_policy

    torch.set_num_threads(1)
    model, tokenizer, _ = load_policy("tiny-instruct", "cpu")  # train mode, gradients enabled, as the trainer has it
    task = "Write a short story about a cat."
    c1, c2 = "Do not use any commas.", "End your response with the phrase Is there anything else."
    x = encode_prompt(tokenizer, f"{task} {c1} {c2}")
    return model, x, [encode_prompt(tokenizer, f"{task} {c2}"), encode_prompt(tokenizer, f"{task} {c1}")]


def _brute_force(model, prompt, response, span, ts):
    """|sum_{j in S} e_j . d log p(y_t) / d e_j| by reverse mode, one backward per t, unpadded single row."""
    s, e = span
    ids = torch.tensor([list(prompt) + list(response)])
    emb = model.get_input_embeddings()(ids).detach().requires_grad_(True)
    logp = torch.log_softmax(model(inputs_embeds=emb, use_cache=False).logits[0].float(), -1)
    out = []
    for t in ts:
        (g,) = torch.autograd.grad(logp[len(prompt) + t - 1, response[t]], emb, retain_graph=True)
        out.append(float((g[0, s:e] * emb[0, s:e]).sum().abs().detach()))
    return out


def test_real_tiny_model_against_reverse_mode(tiny_instruct):
    model, x, (x_minus_0, x_minus_1) = tiny_instruct
    # sample 1 has a shorter prompt (x^-0 as its prompt: left padding in the batch) and a shorter response
    prompts = [x, x_minus_0]
    contrastive = [[x_minus_0, x_minus_1], [None, x_minus_0[:3] + x_minus_0[8:]]]
    g = torch.Generator().manual_seed(3)
    resp = torch.randint(3, model.config.vocab_size, (2, 9), generator=g)
    mask = torch.ones(2, 9, dtype=torch.bool)
    mask[1, 6:] = False
    resp[1, 6:] = 0
    a = gradxinput_relevance(model, prompts, contrastive, resp, mask, pad_token_id=0, chunk_size=3)  # one padded batch
    assert torch.isnan(a[1, 0]).all() and torch.all(a[1, 1, 6:] == 0)
    for i, k in ((0, 0), (0, 1), (1, 1)):
        span = constraint_token_range(prompts[i], contrastive[i][k])
        n = int(mask[i].sum())
        ts = [0, 2, n - 1]
        want = _brute_force(model, prompts[i], resp[i, :n].tolist(), span, ts)
        got = a[i, k, ts].tolist()
        assert got == pytest.approx(want, abs=1e-4, rel=1e-3), (i, k)
        assert max(want) > 1e-3  # a real signal, not two zeros agreeing
    assert all(p.grad is None for p in model.parameters())
    assert all(p.requires_grad for p in model.parameters())  # the model is left as it was


def test_real_tiny_model_chunking_and_empty_responses(tiny_instruct):
    model, x, (x_minus_0, x_minus_1) = tiny_instruct
    prompts = [x, x, x_minus_1]
    contrastive = [[x_minus_0, x_minus_1], [x_minus_0, None], [x_minus_1[:5] + x_minus_1[9:], None]]
    resp = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0], [0, 0, 0, 0]])
    mask = resp != 0
    one = gradxinput_relevance(model, prompts, contrastive, resp, mask, chunk_size=1)
    many = gradxinput_relevance(model, prompts, contrastive, resp, mask, chunk_size=8)
    assert torch.allclose(one.nan_to_num(-1), many.nan_to_num(-1), atol=1e-5)
    assert torch.all(many[2, 0] == 0)  # an empty response: all padding, 0
    assert torch.isnan(many[1, 1]).all() and torch.isnan(many[2, 1]).all()
    assert torch.all(many[1, 0, 2:] == 0) and torch.all(many[1, 0, :2] > 0)


class Recording(torch.nn.Module):
    """Delegates to a transformers model and records the width of every forward's input embeddings."""

    def __init__(self, model):
        super().__init__()
        self.model, self.widths = model, []

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def forward(self, inputs_embeds, attention_mask=None, position_ids=None, use_cache=False, cache=None,
                logits_to_keep=0):
        self.widths.append(inputs_embeds.shape[1])
        return self.model(inputs_embeds=inputs_embeds, attention_mask=attention_mask, position_ids=position_ids,
                          use_cache=use_cache, cache=cache, logits_to_keep=logits_to_keep)


def test_prefix_cache_runs_the_derivative_pass_from_the_first_constraint_token(tiny_instruct):
    model, x, (x_minus_0, x_minus_1) = tiny_instruct
    rec = Recording(model)
    resp = torch.tensor([[5, 6, 7, 8, 9]])
    mask = torch.ones(1, 5, dtype=torch.bool)
    s, _ = constraint_token_range(x, x_minus_0)
    assert s > 5
    cached = gradxinput_relevance(rec, [x], [[x_minus_0]], resp, mask)
    assert rec.widths == [s, len(x) + 5 - s]  # the prefix [0, s) without AD, then the rest with it
    rec.widths.clear()
    whole = gradxinput_relevance(rec, [x], [[x_minus_0]], resp, mask, prefix_cache=False)
    assert rec.widths == [len(x) + 5]
    assert torch.allclose(cached, whole, atol=1e-5) and cached.abs().max() > 1e-3
    # a chunk of rows with different constraints and prompt lengths: cut at the earliest constraint column
    rec.widths.clear()
    prompts = [x, x_minus_1]
    contrastive = [[x_minus_1], [x_minus_1[:9] + x_minus_1[12:]]]
    resp2 = resp.expand(2, -1).contiguous()
    mask2 = torch.ones(2, 5, dtype=torch.bool)
    cached = gradxinput_relevance(rec, prompts, contrastive, resp2, mask2)
    pad = len(x) - len(x_minus_1)
    cut = min(constraint_token_range(x, x_minus_1)[0], pad + 9)
    assert rec.widths == [cut, len(x) + 5 - cut]
    whole = gradxinput_relevance(model, prompts, contrastive, resp2, mask2, prefix_cache=False)
    assert torch.allclose(cached, whole, atol=1e-5)
    for i in range(2):  # and each row equals the row run alone
        alone = gradxinput_relevance(model, [prompts[i]], [contrastive[i]], resp, mask)
        assert torch.allclose(cached[i], alone[0], atol=1e-5)


def test_inference_mode_gives_the_same_numbers(tiny_instruct):
    """Forward AD is off in inference mode (the derivative would silently vanish): the function leaves it."""
    model, x, (x_minus_0, _) = tiny_instruct
    resp = torch.tensor([[10, 11, 12]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    want = gradxinput_relevance(model, [x], [[x_minus_0]], resp, mask)
    with torch.inference_mode():
        got = gradxinput_relevance(model, [x], [[x_minus_0]], resp.clone(), mask.clone())
    assert torch.allclose(got, want, atol=1e-6) and want.abs().max() > 1e-3


def test_bench_prints_every_pass(capsys):
    from core.tools import bench_gradxinput

    assert bench_gradxinput.main(["--model", "tiny-instruct", "--tokens", "3", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    for name in ("nograd", "nograd_math", "gradxinput", "gradxinput_whole", "reverse_one_t"):
        assert any(line.startswith(name + " ") for line in out.splitlines()), name
    assert bench_gradxinput.main(["--model", "tiny-instruct", "--rows", "0"]) == 2
