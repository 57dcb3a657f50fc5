"""`mrtpo bench model`: how long a model takes to load and to teacher-force one batch.

    mrtpo bench model                       # smollm2-135m (needs `make smollm2`)
    mrtpo bench model tiny-instruct --batch 32 --tokens 48

Prints the load time (and whether the GGUF was converted on this call) and the seconds of each
repeat of one no-gradient teacher-forced pass (`core.algos.teacher_forcing.response_logprobs`) over
`--batch` random responses of `--tokens` tokens after a short prompt.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mrtpo bench model", description=__doc__.split("\n\n")[0])
    parser.add_argument("name", nargs="?", default="smollm2-135m", help="preset or model folder (default: smollm2-135m)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--batch", type=int, default=8, help="responses per pass (default: 8)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per response (default: 64)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes (default: 3)")
    args = parser.parse_args(argv)

    import torch

    from core.algos.teacher_forcing import response_logprobs
    from core.model import ModelLoadError, encode_prompt, load_policy

    try:
        model, tokenizer, info = load_policy(args.name, args.device)
    except ModelLoadError as exc:
        print(f"mrtpo bench model: {exc}", file=sys.stderr)
        return 2
    print(f"load: {info.load_seconds:.2f} s (converted={info.converted}) {info.n_params / 1e6:.1f}M params "
          f"on {info.device} from {info.path}", flush=True)
    prompt = encode_prompt(tokenizer, "Write a short note about rivers. Include the keyword steady.")
    g = torch.Generator().manual_seed(0)
    response = torch.randint(0, len(tokenizer), (args.batch, args.tokens), generator=g).to(info.device)
    mask = torch.ones_like(response, dtype=torch.bool)
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        response_logprobs(model, [prompt] * args.batch, response, mask, chunk=args.batch, keep_full=True)
        if info.device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    print(f"teacher-forced pass, {args.batch} x {args.tokens} response tokens after a {len(prompt)}-token prompt: "
          f"{' '.join(f'{t:.3f}' for t in times)} s (threads={torch.get_num_threads()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
