"""`mrtpo bench live`: does watching a run in the app slow its training? The same short run, trained with
nobody watching and with a headless Chromium on its Training curves page for the whole run.

    mrtpo bench live [--steps 40] [--seed 0] [--repeat 1] [--app-root DIR [DIR ...]]

Each arm starts the run as the app does (`mrtpo_viz.launcher.start_run`: `python -m core.cli train ...` in its
own session) with the same config and seed, so both arms train the same steps on the same samples:
  none     the trainer alone;
  browser  an `mrtpo app` server (as `mrtpo bench app` starts it) and headless Chromium
           (/usr/bin/chromium through Playwright) on `/curves?run=<name>`, opened as soon as the run folder
           exists and kept open until the run completes (the page polls every 2 s while the run is active).
Printed per arm: the median and mean `time/step` of steps 2..N (step 1 warms up), the run's wall time, the CPU
seconds the app server and the browser (Playwright's driver and Chromium) used from the run's start to its end,
and the load average before and after.
With `--repeat R` the arms alternate (none, browser, none, ...). `--app-root` serves another checkout's app
(to measure an older version of the page); with several, the browser arm runs once per checkout in each round
(labelled by the folder's name), so versions are compared under the same load. Needs Chromium and Playwright.
Never imports torch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from core.config import TrainConfig
from core.paths import REPO_ROOT
from core.run.store import RunStore
from mrtpo_viz import launcher
from mrtpo_viz.tools.bench_app_visits import CHROMIUM, CHROMIUM_ARGS, Server

ARMS = ("none", "browser")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def load_average() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) of process `root` and its living descendants, and of their reaped children."""
    kids, total, todo = _children(), 0.0, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15]) / CLOCK_TICKS  # utime stime cutime cstime
        except (OSError, ValueError, IndexError):
            pass
        todo += kids.get(pid, [])
    return total


def _wait_for(predicate, timeout_s: float, poll_s: float = 0.2) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(poll_s)
    return False


def run_arm(arm: str, cfg: TrainConfig, name: str, app_root: Path, work: Path, timeout_s: float) -> dict:
    """Train run `name` once, watched or not; its step times and what the watching cost."""
    import dataclasses

    runs = work / f"runs-{name}"
    cfg = dataclasses.replace(cfg, runs_dir=str(runs), run_name=name)
    load_before = load_average()
    server = pw = browser = None
    server_cpu = browser_cpu = 0.0
    try:
        if arm == "browser":
            runs.mkdir(parents=True, exist_ok=True)
            server = Server(app_root, runs, work / f"server-{name}.log")
            from playwright.sync_api import sync_playwright

            pw = sync_playwright().start()
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        # the watchers: the app server and this process's other children (Playwright's driver and its Chromium),
        # taken before the trainer (also a child) starts
        browsers = [pid for pid in _children().get(os.getpid(), []) if server and pid != server.proc.pid]
        server_start = tree_cpu_s(server.proc.pid) if server else 0.0
        browser_start = sum(tree_cpu_s(pid) for pid in browsers)
        t0 = time.monotonic()
        launched = launcher.start_run(cfg)
        if browser is not None:
            if not _wait_for(lambda: (launched.path / "config.json").exists(), timeout_s):
                raise RuntimeError(f"run {name} did not start within {timeout_s:.0f} s")
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.goto(f"{server.url}/curves?run={name}", wait_until="commit")
        done = _wait_for(lambda: launcher.run_state(launched.path).get("state") not in ("starting", "running"),
                         timeout_s, poll_s=0.5)
        wall = time.monotonic() - t0
        if server is not None:
            server_cpu = tree_cpu_s(server.proc.pid) - server_start
            browser_cpu = sum(tree_cpu_s(pid) for pid in browsers) - browser_start
    finally:
        if browser is not None:
            browser.close()
        if pw is not None:
            pw.stop()
        if server is not None:
            server.close()
    state = launcher.run_state(launched.path).get("state")
    if not done or state != "completed":
        raise RuntimeError(f"run {name} ended {state} (see {launched.path / 'train.log'})")
    times = RunStore(launched.path).metrics()["time/step"].tolist()[1:]
    return {"arm": arm, "name": name, "median_s": statistics.median(times), "mean_s": statistics.fmean(times),
            "steps": len(times) + 1, "wall_s": wall, "server_cpu_s": server_cpu, "browser_cpu_s": browser_cpu, "load_before": load_before,
            "load_after": load_average()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mrtpo bench live", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="steps of the run (40)")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (0)")
    parser.add_argument("--model", default="tiny-instruct", help="model (tiny-instruct)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per arm, the arms alternating (1)")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS), help="arms (both)")
    parser.add_argument("--app-root", nargs="+", default=[str(REPO_ROOT)],
                        help="checkouts whose app is served in the browser arm (this one)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a run may take (900)")
    args = parser.parse_args(argv)
    if "browser" in args.arms and not os.access(CHROMIUM, os.X_OK):
        print(f"mrtpo bench live: needs Chromium at {CHROMIUM}", file=sys.stderr)
        return 2
    cfg = TrainConfig(model=args.model, steps=args.steps, seed=args.seed, checkpoint_every=0, device="cpu")
    roots = [Path(r).resolve() for r in args.app_root]
    print(f"run: {cfg.model}, {cfg.method}/{cfg.routing}, {cfg.prompts_per_step} prompts x G={cfg.group_size}, "
          f"max_new_tokens {cfg.max_new_tokens}, {cfg.steps} steps, seed {cfg.seed}, cpu; apps at "
          f"{', '.join(map(str, roots))}", flush=True)
    plan = [(arm, root) for arm in args.arms for root in (roots if arm == "browser" else [None])]
    label = {root: "browser" if len(roots) == 1 else f"browser:{root.name}" for root in roots}
    results = []
    with tempfile.TemporaryDirectory(prefix="mrtpo-bench-live-") as tmp:
        for i in range(args.repeat):
            for n, (arm, root) in enumerate(plan):
                name = f"live-{arm}-{i}-{n}"
                r = run_arm(arm, cfg, name, root or roots[0], Path(tmp), args.timeout)
                r["arm"] = label[root] if root else arm
                results.append(r)
                print(f"  {r['arm']:<16} median {r['median_s']:.3f} s/step, mean {r['mean_s']:.3f} s/step over steps "
                      f"2..{r['steps']}, wall {r['wall_s']:.0f} s, CPU server {r['server_cpu_s']:.1f} s, browser {r['browser_cpu_s']:.1f} s; "
                      f"load {r['load_before']} -> {r['load_after']}", flush=True)
    print("\narm              median s/step (per run)   CPU s of server + browser (per run)")
    for arm in dict.fromkeys(r["arm"] for r in results):
        mine = [r for r in results if r["arm"] == arm]
        med = [r["median_s"] for r in mine]
        cpu = [f"{r['server_cpu_s']:.1f} + {r['browser_cpu_s']:.1f}" for r in mine]
        print(f"{arm:<16} {statistics.median(med):.3f}  ({', '.join(f'{m:.3f}' for m in med)})   {', '.join(cpu)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
