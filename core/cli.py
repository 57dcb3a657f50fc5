"""The `mrtpo` command line: `train`, `app`, `bootstrap`, `bench`.

Each subcommand lives in its own module and is imported only when called, so `mrtpo --help`
and `mrtpo app` never import torch.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

# subcommand -> (module, one-line help). The module exposes `main(argv: list[str]) -> int`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "train": ("core.train_cli", "train a policy with GRPO, GDPO or MRTPO and write a run store"),
    "app": ("core.cli", "serve the Streamlit workbench on http://127.0.0.1:8501"),
    "bootstrap": ("core.bootstrap", "build the embedded tiny-instruct model from a synthetic corpus"),
    "bench": ("core.bench", "benchmarks: overhead (MRTPO vs GDPO step time), app, efficiency"),
}


class NotYetAvailable(SystemExit):
    """A subcommand whose implementation has not landed yet."""


def app_main(argv: list[str]) -> int:
    """Serve app.py with streamlit, bound to 127.0.0.1 unless --address says otherwise."""
    parser = argparse.ArgumentParser(prog="mrtpo app", description=SUBCOMMANDS["app"][1])
    parser.add_argument("--port", type=int, default=int(os.environ.get("MRTPO_PORT", "8501")))
    parser.add_argument("--address", default="127.0.0.1", help="interface to bind (default: localhost only)")
    parser.add_argument("--runs-dir", default=None, help="runs directory (default: $MRTPO_RUNS_DIR or ./runs)")
    parser.add_argument("--headless", action="store_true", help="do not try to open a browser")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    if args.runs_dir:
        env["MRTPO_RUNS_DIR"] = str(Path(args.runs_dir).resolve())
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(REPO_ROOT / "app.py"),
        "--server.address", args.address, "--server.port", str(args.port),
        "--browser.gatherUsageStats", "false",
        # The watcher rescans the repo (and can overflow inotify); the app needs no reload-on-save for users.
        "--server.fileWatcherType", "none",
    ]
    if args.headless:
        cmd += ["--server.headless", "true"]
    print(f"MRTPO workbench on http://{args.address}:{args.port}", flush=True)
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="mrtpo",
        description="MRTPO workbench: multi-reward RL credit assignment for language models.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="subcommands:\n" + "\n".join(f"  {name:<10} {help_}" for name, (_, help_) in SUBCOMMANDS.items())
        + "\n\n`mrtpo <subcommand> --help` documents each one.",
    )
    parser.add_argument("subcommand", choices=list(SUBCOMMANDS), metavar="subcommand", help="one of: %(choices)s")
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    if not argv:
        parser.print_help()
        return 2
    if argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    ns = parser.parse_args(argv[:1])
    rest = argv[1:]
    if ns.subcommand == "app":
        return app_main(rest)
    module_name = SUBCOMMANDS[ns.subcommand][0]
    if ns.subcommand == "bench" and rest[:1] == ["app"]:
        # The app benchmark measures the viewing side; it lives there so that core stays free of plotly/streamlit.
        module_name, rest = "mrtpo_viz.bench_app", rest[1:]
    elif ns.subcommand == "bench" and rest[:1] == ["efficiency"]:
        # The study orchestrates `mrtpo train` subprocesses; it needs no torch in this process.
        module_name, rest = "core.efficiency", rest[1:]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        print(f"mrtpo {ns.subcommand}: not yet available in this version ({module_name} is missing).", file=sys.stderr)
        return 3
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
