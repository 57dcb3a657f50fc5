"""The tiny-instruct bootstrap: corpus semantics, tokenizer, training pieces, and a micro build end to end."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict

import pytest
import torch

from core.tools import bootstrap as bs
from core.verifiers import build

pytestmark = pytest.mark.train  # builds (trains) micro models in this process

STYLE = (bs.KEYWORD, bs.END, bs.LOWER, bs.NO_COMMA)


@pytest.fixture(scope="module")
def corpus():
    cfg = bs.BootstrapConfig(seed=3)
    examples, vocab = bs.build_corpus(3000, cfg)
    return cfg, examples, vocab


def _constraints_of(example, vocab):
    """Rebuild the verifiers a corpus prompt states from its text (the sentences are fixed by CONTRACTS.md)."""
    out = []
    for w in vocab["keywords"]:
        if f"Include the keyword {w}." in example.prompt:
            out.append(build(bs.KEYWORD, keywords=[w]))
    for p in vocab["phrases"]:
        if f"End your response with the phrase {p}" in example.prompt:
            out.append(build(bs.END, end_phrase=p))
    if "Use only lowercase letters." in example.prompt:
        out.append(build(bs.LOWER))
    if "Do not use any commas." in example.prompt:
        out.append(build(bs.NO_COMMA))
    return out


def test_corpus_labels_agree_with_the_verifiers(corpus):
    """Whether a response obeys each stated constraint is what the real verifier says."""
    _, examples, vocab = corpus
    checked = 0
    for e in examples:
        for v in _constraints_of(e, vocab):
            assert v.verify(e.response).score == float(e.obeyed[v.family]), (e.prompt, e.response, v.family)
            checked += 1
    assert checked > 3000


def test_corpus_compliance_is_partial_and_prompt_dependent(corpus):
    cfg, examples, vocab = corpus
    stated, unstated = defaultdict(list), defaultdict(list)
    probes = {bs.LOWER: build(bs.LOWER), bs.NO_COMMA: build(bs.NO_COMMA)}
    for e in examples:
        for fam in cfg.p_comply:
            if fam in e.obeyed:
                stated[fam].append(e.obeyed[fam])
        for fam, v in probes.items():
            if fam not in e.obeyed:
                unstated[fam].append(v.verify(e.response).score)
        if bs.KEYWORD not in e.obeyed:  # any keyword of the prompt sets appearing by accident
            unstated[bs.KEYWORD].append(float(any(w in e.response.lower() for w in vocab["keywords"])))
    for fam, flags in stated.items():
        rate = sum(flags) / len(flags)
        # binomial: 4 standard deviations around the configured probability
        sd = math.sqrt(cfg.p_comply[fam] * (1 - cfg.p_comply[fam]) / len(flags))
        assert abs(rate - cfg.p_comply[fam]) < 4 * sd + 1e-9, (fam, rate)
    for fam, scores in unstated.items():
        assert sum(scores) / len(scores) < 0.08, fam


def test_corpus_covers_zero_to_four_constraints_and_dropped_questions(corpus):
    _, examples, _ = corpus
    counts = {len([f for f in e.obeyed if f in STYLE]) for e in examples}
    assert counts == {0, 1, 2, 3, 4}
    assert any(bs.ARITH in e.obeyed for e in examples)
    dropped = [e for e in examples if not e.prompt.startswith(("Write", "What"))]
    assert dropped and all(bs.ARITH not in e.obeyed for e in dropped)
    assert not any(any(ch.isdigit() for ch in e.response) for e in dropped)


def test_arithmetic_responses_state_one_number(corpus):
    _, examples, _ = corpus
    arith = [e for e in examples if bs.ARITH in e.obeyed]
    for e in arith:
        a, b = (int(x) for x in bs._ARITH_RE.match(e.prompt.split("?")[0] + "?").groups())
        v = build(bs.ARITH, answer=a + b)
        assert v.verify(e.response).score == float(e.obeyed[bs.ARITH])


def test_corpus_is_deterministic_in_the_seed():
    cfg = bs.BootstrapConfig(seed=5)
    a, _ = bs.build_corpus(200, cfg)
    b, _ = bs.build_corpus(200, cfg)
    c, _ = bs.build_corpus(200, bs.BootstrapConfig(seed=6))
    assert a == b
    assert a != c


def test_templates_never_contain_a_keyword():
    from core.tools import promptgen

    bs.check_templates(promptgen.KEYWORDS + promptgen.HELDOUT_KEYWORDS)
    with pytest.raises(ValueError, match="keywords"):
        bs.check_templates(["share"])  # "share" occurs in an opener


def test_lr_schedule_hand_values():
    cfg = bs.BootstrapConfig(steps=110, lr=1e-3, warmup_steps=10, min_lr_ratio=0.1)
    assert bs.lr_at(0, cfg) == pytest.approx(1e-4)
    assert bs.lr_at(9, cfg) == pytest.approx(1e-3)
    assert bs.lr_at(10, cfg) == pytest.approx(1e-3)
    assert bs.lr_at(60, cfg) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))  # half way: cos(pi/2) = 0
    assert bs.lr_at(110, cfg) == pytest.approx(1e-4)


@pytest.fixture(scope="module")
def tokenizer(corpus):
    _, examples, _ = corpus
    return bs.train_tokenizer([e.prompt + "\n" + e.response for e in examples[:1500]], 500)


def test_tokenizer_chat_template_special_tokens_and_offsets(tokenizer):
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "What is 3 plus 4?"}], add_generation_prompt=True,
                                        tokenize=True, return_dict=False)
    text = tokenizer.decode(ids)
    assert text == "<|user|>\nWhat is 3 plus 4?<|end|>\n<|assistant|>\n"
    # rendering the template then tokenizing it gives the same ids (role markers are single special tokens)
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "What is 3 plus 4?"}],
                                             add_generation_prompt=True, tokenize=False)
    assert tokenizer(rendered, add_special_tokens=False)["input_ids"] == ids == bs.prompt_ids(tokenizer,
                                                                                             "What is 3 plus 4?")
    assert tokenizer.convert_ids_to_tokens(ids[:1]) == [bs.USER]
    assert tokenizer.eos_token == bs.EOS and tokenizer.pad_token == bs.PAD
    assert tokenizer.eos_token_id != tokenizer.pad_token_id
    response = "the word steady comes to mind, ok."
    enc = tokenizer(response, add_special_tokens=False, return_offsets_mapping=True)
    assert tokenizer.decode(enc["input_ids"]) == response
    pieces = [response[s:e] for s, e in enc["offset_mapping"]]
    assert "".join(pieces).replace(" ", "") == response.replace(" ", "")
    # decoding a prefix of the ids gives a prefix of the text (incremental decoding works)
    assert response.startswith(tokenizer.decode(enc["input_ids"][:5]))
    # any text encodes (byte-level); multi-byte characters share their character's offsets
    other = "Ünïcode, 🙂 ok"
    enc = tokenizer(other, add_special_tokens=False, return_offsets_mapping=True)
    assert tokenizer.decode(enc["input_ids"]) == other
    starts = [s for s, _ in enc["offset_mapping"]]
    assert starts == sorted(starts) and max(e for _, e in enc["offset_mapping"]) == len(other)


def test_batches_mask_prompt_and_padding(tokenizer, corpus):
    _, examples, _ = corpus
    encoded = bs.encode_examples(tokenizer, examples[:40])
    rows, labelled = 0, 0
    for ids, labels in bs.make_batches(encoded, 8, tokenizer.pad_token_id, seed=0):
        assert ids.shape == labels.shape and ids.shape[0] <= 8
        kept = labels != -100
        assert torch.equal(ids[kept], labels[kept])
        for row in range(ids.shape[0]):
            last = int(kept[row].nonzero().max())
            assert labels[row, last] == tokenizer.eos_token_id  # each row's labels end with its eos
            assert bool((ids[row, last + 1:] == tokenizer.pad_token_id).all())  # right padding after it
        rows += ids.shape[0]
        labelled += int(kept.sum())
    assert rows == 40
    assert labelled == sum(len(s) - n for s, n in encoded)  # exactly the response tokens + eos are labelled


def test_response_loss_counts_response_tokens_only(tokenizer, corpus):
    _, examples, _ = corpus
    cfg = bs.BootstrapConfig.micro()
    model = bs.build_model(cfg, tokenizer)
    encoded = bs.encode_examples(tokenizer, examples[:6])
    ids, labels = next(bs.make_batches(encoded, 6, tokenizer.pad_token_id, seed=1))
    with torch.no_grad():
        loss = bs.response_loss(model, ids, labels)
        # slow reference: full logits, per token, only where the label is a response token
        logits = model(input_ids=ids).logits
        terms = []
        for b in range(ids.shape[0]):
            for t in range(1, ids.shape[1]):
                if labels[b, t] != -100:
                    terms.append(-torch.log_softmax(logits[b, t - 1], -1)[labels[b, t]])
        ref = torch.stack(terms).mean()
    assert loss.item() == pytest.approx(ref.item(), rel=1e-5)
    # what sits in the padding does not matter (causal attention: real tokens never see later pads)
    pad_only = (ids == tokenizer.pad_token_id) & (labels == -100)
    ids3 = ids.clone()
    ids3[pad_only] = 5
    with torch.no_grad():
        assert bs.response_loss(model, ids3, labels).item() == pytest.approx(loss.item(), rel=1e-6)


def test_two_training_steps_change_the_parameters_and_lower_the_loss(tokenizer, corpus):
    _, examples, _ = corpus
    cfg = bs.BootstrapConfig.micro()
    cfg.steps, cfg.log_every = 8, 4
    model = bs.build_model(cfg, tokenizer)
    before = [p.detach().clone() for p in model.parameters()]
    encoded = bs.encode_examples(tokenizer, examples[:16])
    batches = [next(bs.make_batches(encoded, 16, tokenizer.pad_token_id, seed=0))] * cfg.steps
    with torch.no_grad():
        loss0 = bs.response_loss(model, *batches[0]).item()
    records = bs.train(model, iter(batches), cfg, log=lambda _: None)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    with torch.no_grad():
        assert bs.response_loss(model, *batches[0]).item() < loss0
    assert [r["step"] for r in records] == [4, 8]


@pytest.fixture(scope="module")
def micro_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "tiny-instruct"
    assert bs.main(["--micro", "--out", str(out), "--seed", "1"]) == 0
    return out


def test_micro_bootstrap_writes_a_folder_plain_transformers_loads(micro_folder):
    """`mrtpo bootstrap --micro` writes a folder that plain transformers loads and samples from."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = micro_folder
    for name in ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json", "bootstrap_config.json"):
        assert (out / name).is_file(), name
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert next(model.parameters()).dtype == torch.float32
    assert model.config.eos_token_id == tok.eos_token_id
    assert model.config.pad_token_id == tok.pad_token_id
    ids = tok.apply_chat_template([{"role": "user", "content": "Write a short note about rivers."}],
                                  add_generation_prompt=True, return_tensors="pt", return_dict=True)
    torch.manual_seed(0)
    gen = model.generate(**ids, do_sample=True, top_k=0, max_new_tokens=8, pad_token_id=tok.pad_token_id)
    assert gen.shape[1] > ids["input_ids"].shape[1]
    meta = json.loads((out / "bootstrap_config.json").read_text())
    assert meta["config"]["steps"] == 40 and meta["config"]["seed"] == 1
    assert [r["step"] for r in meta["log"]][-1] == 40


def test_micro_bootstrap_is_deterministic_in_the_seed(micro_folder, tmp_path):
    from safetensors.torch import load_file

    lines: list[str] = []
    summary = bs.bootstrap(bs.BootstrapConfig.micro(seed=1), tmp_path / "again", log=lines.append)
    assert any("step 40/40" in line for line in lines)
    assert summary["params"] > 0
    a, b = load_file(micro_folder / "model.safetensors"), load_file(tmp_path / "again" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (micro_folder / "tokenizer.json").read_text() == (tmp_path / "again" / "tokenizer.json").read_text()


def test_sampling_helper_and_conditioning_stats_shapes(micro_folder):
    model, tok = bs.load(micro_folder)
    items = bs.eval_items(3, seed=0)
    stats = bs.conditioning_stats(model, tok, items, samples_per_prompt=2, seed=0)
    assert stats["n_samples"] == 6
    fams = {c.family for it in items for c in it.constraints}
    assert set(stats["families"]) == fams
    for v in stats["families"].values():
        assert 0.0 <= v["stated"] <= 1.0 and 0.0 <= v["removed"] <= 1.0
    assert 0.0 <= stats["all_satisfied"] <= 1.0


# ---------------------------------------------------------------------------------------------
# the multi setting (tiny-multi)


@pytest.fixture(scope="module")
def multi_corpus():
    cfg = bs.BootstrapConfig.for_setting("multi", seed=3)
    examples, vocab = bs.build_corpus(4000, cfg)
    return cfg, examples, vocab


def test_multi_corpus_labels_are_the_verifiers_and_compliance_is_prompt_dependent(multi_corpus):
    from core.tools import promptgen

    cfg, examples, vocab = multi_corpus
    stated = defaultdict(list)
    for e in examples:
        for fam, ok in e.obeyed.items():
            stated[fam].append(ok)
    assert set(stated) == set(bs.MULTI_RESPONSE_FAMILIES)
    for fam, flags in stated.items():
        rate = sum(flags) / len(flags)
        # 0.7 by construction; a word limit can still be broken when every part is written, and a no-comma
        # or forbidden-word rule can hold by accident (compact bodies have no comma and no invited word)
        assert 0.55 <= rate <= 0.85, (fam, rate)
    # unstated: the rule holds by accident rarely, except the invited word's absence (10% by design)
    probes = {bs.LOWER: build(bs.LOWER), bs.NO_COMMA: build(bs.NO_COMMA), bs.TITLE: build(bs.TITLE),
              bs.POSTSCRIPT: build(bs.POSTSCRIPT, postscript_marker="P.S."),
              bs.WORD_LIMIT: build(bs.WORD_LIMIT, num_words=30, relation="less than")}
    for fam, v in probes.items():
        scores = [v.verify(e.response).score for e in examples if fam not in e.obeyed]
        assert sum(scores) / len(scores) < 0.1, fam
    avoided = []
    for e in examples:
        m = re.match(r"Write a short note about (.+?)\.(?: |$)", e.prompt)
        if m and bs.FORBIDDEN not in e.obeyed:
            word = promptgen.INVITED_WORDS[m.group(1)]
            avoided.append(not re.search(rf"\b{word}\b", e.response, re.IGNORECASE))
    assert 0.03 < sum(avoided) / len(avoided) < 0.2  # 1 - p_invited


def test_multi_word_limit_is_kept_only_by_the_compact_body(multi_corpus):
    """Long bodies have >= 30 words, so a stated limit holds only when the response writes the compact body, in
    which every other stated part (phrases, title, keyword, postscript) still costs words."""
    from core.verifiers import count_words

    _, examples, _ = multi_corpus
    stated = [e for e in examples if bs.WORD_LIMIT in e.obeyed]
    kept = [count_words(e.response) for e in stated if e.obeyed[bs.WORD_LIMIT]]
    assert kept and max(kept) < 20  # a compact body fits even the smallest limit
    unstated = [count_words(e.response) for e in examples if bs.WORD_LIMIT not in e.obeyed]
    assert sum(n >= 30 for n in unstated) / len(unstated) > 0.9  # long bodies, except the rare compact accident
    parts = [len(e.obeyed) for e in stated if e.obeyed[bs.WORD_LIMIT] and all(e.obeyed.values())]
    assert max(parts) >= 5  # a compact body can hold every part of a crowded prompt


def test_tiny_corpus_is_unchanged_by_the_multi_setting():
    """The tiny setting draws exactly what it drew before the multi setting existed (tiny-instruct rebuilds)."""
    examples, _ = bs.build_corpus(200, bs.BootstrapConfig(seed=0))
    assert examples[0].prompt == bs.build_corpus(200, bs.BootstrapConfig.for_setting("tiny", seed=0))[0][0].prompt
    assert all(set(e.obeyed) <= set(STYLE) | {bs.ARITH} for e in examples)


def test_micro_multi_build(tmp_path):
    out = tmp_path / "tiny-multi"
    assert bs.main(["--setting", "multi", "--micro", "--out", str(out)]) == 0
    assert bs.folder_config(out)["setting"] == "multi" and bs.folder_config(out)["gen_tokens"] == 96
    model, tok = bs.load(out)
    items = bs.eval_items(2, seed=0, setting="multi")
    stats = bs.conditioning_stats(model, tok, items, samples_per_prompt=1, seed=0, max_new_tokens=8)
    assert set(stats["families"]) == {c.family for it in items for c in it.constraints}
