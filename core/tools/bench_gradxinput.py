"""What one (sample, reward) row of gradient-x-input relevance costs next to a no-gradient teacher-forced pass.

    python -m core.tools.bench_gradxinput [--model smollm2-135m] [--tokens 48] [--repeats 5] [--threads 1] [--rows 1]

One IFEval-style prompt with two constraint sentences (chat template applied, `core.model.encode_prompt`), x^-k
without the first one, and a response of `--tokens` token ids (drawn at random with seed 0: a teacher-forced
pass costs the same whatever the ids), `--rows` copies of that (i, k) row in one call (one batch). Times, `--repeats` times each after one warm-up, on the CPU:

- `nograd`: `response_logits` under torch.no_grad over the rows (the plain teacher-forced pass; default SDPA kernel);
- `nograd_math`: the same with SDPA's math backend (the kernel forward-mode AD needs);
- `gradxinput`: `gradxinput_relevance` for the rows (one forward-mode JVP per call, all T tokens; the columns
  before the constraint run first without AD into a KV cache);
- `gradxinput_whole`: the same with `prefix_cache=False` (the JVP over every column);
- `reverse_one_t`: reverse mode for ONE response token of one row (forward with a graph + one backward to the
  embeddings; not scaled by `--rows`):
  the brute-force route needs T of these backwards (or T forward + backward passes) per row.

Prints the median and min seconds of each, their ratio to `nograd`, and the process's peak resident memory
after each stage (ru_maxrss: a running maximum, so each stage shows the peak so far). Never imports streamlit.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time

TASK = "Write a short blog post about the benefits of walking to work."
CONSTRAINTS = ("Your entire response should be in lowercase letters.",
               "End your response with the exact phrase Is there anything else I can help with?")


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _time(fn, repeats: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def run(model_name: str, tokens: int, repeats: int, threads: int, rows: int = 1) -> list[tuple[str, list[float], float]]:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from core.algos.attribution import constraint_token_range, gradxinput_relevance
    from core.algos.forward_passes import response_logits
    from core.model import encode_prompt, load_policy

    torch.set_num_threads(threads)
    model, tokenizer, info = load_policy(model_name, "cpu")
    model.eval()
    pad = tokenizer.pad_token_id or 0
    x = encode_prompt(tokenizer, " ".join((TASK,) + CONSTRAINTS))
    x_minus = encode_prompt(tokenizer, " ".join((TASK,) + CONSTRAINTS[1:]))
    s, e = constraint_token_range(x, x_minus)
    g = torch.Generator().manual_seed(0)
    resp = torch.randint(3, model.config.vocab_size, (1, tokens), generator=g).expand(rows, -1).contiguous()
    mask = torch.ones(rows, tokens, dtype=torch.bool)
    print(f"model {model_name}: prompt {len(x)} tokens, constraint tokens [{s}, {e}), response {tokens} tokens, "
          f"{rows} row(s) per call, {threads} thread(s); peak RSS after load {_peak_mib():.0f} MiB"
          + (" (this load converted the GGUF file: the peaks include the conversion)" if info.converted else ""))
    results = []

    def nograd():
        with torch.no_grad():
            torch.log_softmax(response_logits(model, [x] * rows, resp, mask, pad).float(), -1)

    def nograd_math():
        with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
            torch.log_softmax(response_logits(model, [x] * rows, resp, mask, pad).float(), -1)

    def gxi():
        gradxinput_relevance(model, [x] * rows, [[x_minus]] * rows, resp, mask, pad_token_id=pad, chunk_size=rows)

    def gxi_whole():
        gradxinput_relevance(model, [x] * rows, [[x_minus]] * rows, resp, mask, pad_token_id=pad, chunk_size=rows,
                             prefix_cache=False)

    def reverse_one_t():
        ids = torch.tensor([x + resp[0].tolist()])
        emb = model.get_input_embeddings()(ids).detach().requires_grad_(True)
        logp = torch.log_softmax(model(inputs_embeds=emb, use_cache=False, logits_to_keep=tokens + 1).logits[0, -2].float(), -1)
        (grad,) = torch.autograd.grad(logp[resp[0, -1]], emb)
        (grad[0, s:e] * emb[0, s:e].detach()).sum()

    for name, fn in (("nograd", nograd), ("nograd_math", nograd_math), ("gradxinput", gxi),
                     ("gradxinput_whole", gxi_whole), ("reverse_one_t", reverse_one_t)):
        results.append((name, _time(fn, repeats), _peak_mib()))
    assert all(p.grad is None for p in model.parameters())
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.tools.bench_gradxinput", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tokens", type=int, default=48, help="response tokens (the config's max_new_tokens default)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rows", type=int, default=1, help="(i, k) rows per call (replay batches replay_chunk rows)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if min(args.tokens, args.repeats, args.threads, args.rows) < 1:
        print("--tokens, --repeats, --threads and --rows must be >= 1", file=sys.stderr)
        return 2
    results = run(args.model, args.tokens, args.repeats, args.threads, args.rows)
    base = statistics.median(results[0][1])
    print(f"{'pass':<16} {'median s':>9} {'min s':>8} {'x nograd':>9} {'peak RSS MiB':>13}  all")
    for name, times, peak in results:
        med = statistics.median(times)
        print(f"{name:<16} {med:9.3f} {min(times):8.3f} {med / base:9.2f} {peak:13.0f}  "
              + " ".join(f"{t:.3f}" for t in times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
