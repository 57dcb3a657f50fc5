"""`mrtpo bench app`: server-side render times of the app, printed (targets: first page < 3 s after the
server is up, Token credit page for a 256-token sample with 4 rewards < 300 ms).

Writes a synthetic run (8 samples x 256 tokens x 4 rewards per step, through core.run.store's writer) to
a temporary runs directory, then times:
  heatmap   building the Token credit HTML for one sample (one-reward view and one-row-per-reward view);
  page      a full run of the Token credit page script (Streamlit AppTest: data loading from the
            cache, filters, tables, heatmap) after a warm-up run, i.e. what a widget change costs;
  first     the first run of the app (Runs page) in a fresh interpreter that has imported streamlit (as a
            server that is up has) but nothing else: the app's own imports (pandas, pyarrow, core.run.store)
            are part of it, as they are for the first visitor of a new server.
Each number is the median of --repeat runs. Never imports torch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from core.paths import APP_FILE

# Run in a fresh interpreter: streamlit imported first (a running server has it), then the timed first run.
_FIRST_PAGE = """
import sys, time
from streamlit.testing.v1 import AppTest
t0 = time.perf_counter()
at = AppTest.from_file(sys.argv[1], default_timeout=120).run()
ms = (time.perf_counter() - t0) * 1000
assert not at.exception, at.exception
print(ms)
"""


def _median_ms(fn, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mrtpo bench app", description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=256, help="response tokens per sample (default 256)")
    parser.add_argument("--rewards", type=int, default=4, help="rewards per sample (default 4)")
    parser.add_argument("--samples", type=int, default=8, help="samples per step (default 8)")
    parser.add_argument("--repeat", type=int, default=7, help="timed repetitions per measurement (default 7)")
    args = parser.parse_args(argv)

    from mrtpo_viz import heatmap
    from mrtpo_viz.tools.synthetic import DEFAULT_REWARDS, synthetic_credit_frame, write_synthetic_run

    names = tuple(DEFAULT_REWARDS[i % len(DEFAULT_REWARDS)] + ("" if i < len(DEFAULT_REWARDS) else f"#{i}")
                  for i in range(args.rewards))
    frame = synthetic_credit_frame(1, args.samples, args.tokens, names, group_size=4)
    sample = frame[frame["sample"] == 0]
    print(f"synthetic credit map: {args.samples} samples x {args.tokens} tokens x {args.rewards} rewards "
          f"({len(frame)} rows); sample 0 has {len(sample)} rows", flush=True)

    single_ms, single_min = _median_ms(lambda: heatmap.token_heatmap_html(sample, names[0], reward_names=names),
                                       args.repeat)
    rows_ms, rows_min = _median_ms(lambda: heatmap.token_heatmap_html(sample, mode="rows", reward_names=names),
                                   args.repeat)
    size_single = len(heatmap.token_heatmap_html(sample, names[0], reward_names=names))
    size_rows = len(heatmap.token_heatmap_html(sample, mode="rows", reward_names=names))
    print(f"heatmap one reward       : median {single_ms:7.1f} ms (min {single_min:.1f}), {size_single / 1e3:.0f} kB")
    print(f"heatmap one row per reward: median {rows_ms:7.1f} ms (min {rows_min:.1f}), {size_rows / 1e3:.0f} kB")

    from streamlit.testing.v1 import AppTest

    with tempfile.TemporaryDirectory(prefix="mrtpo-bench-app-") as tmp:
        write_synthetic_run(tmp, "bench", steps=2, rewards=names, n_samples=args.samples, n_tokens=args.tokens)
        os.environ["MRTPO_RUNS_DIR"] = tmp
        app = str(APP_FILE)

        firsts = []
        for _ in range(3):
            out = subprocess.run([sys.executable, "-c", _FIRST_PAGE, app], capture_output=True, text=True,
                                 timeout=300, env={**os.environ, "MRTPO_RUNS_DIR": tmp})
            if out.returncode != 0:
                print(f"first page failed: {out.stderr[-2000:]}", file=sys.stderr)
                return 1
            firsts.append(float(out.stdout.strip().splitlines()[-1]))
        first_ms = statistics.median(firsts)
        print(f"first page (Runs), cold   : median {first_ms:7.1f} ms of {len(firsts)} fresh interpreters "
              f"(min {min(firsts):.1f}; app imports included)")

        at = AppTest.from_file(app, default_timeout=120).run()
        at.switch_page("mrtpo_viz/pages/credit.py").run()  # warm-up: fills the data cache
        if at.exception:
            print(f"Token credit page raised: {at.exception[0].value}", file=sys.stderr)
            return 1
        page_ms, page_min = _median_ms(lambda: at.run(), args.repeat)
        rows_view = at.radio[0]
        rows_view.set_value("one row per reward")
        at.run()
        page_rows_ms, page_rows_min = _median_ms(lambda: at.run(), args.repeat)
        print(f"Token credit page, one reward       : median {page_ms:7.1f} ms (min {page_min:.1f})")
        print(f"Token credit page, one row per reward: median {page_rows_ms:7.1f} ms (min {page_rows_min:.1f})")
    target = 300.0
    worst = max(page_ms, page_rows_ms)
    print(f"target: Token credit page < {target:.0f} ms server-side -> {'OK' if worst < target else 'OVER'} "
          f"(worst median {worst:.1f} ms); first page < 3000 ms -> {'OK' if first_ms < 3000 else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
