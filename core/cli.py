"""The `mrtpo` command line: `train`, `app`, `eval`, `bootstrap`, `bench <name>`; the one place that routes them.

Each subcommand and benchmark lives in its own module (`SUBCOMMANDS`, `BENCHMARKS`) exposing
`main(argv) -> int`, imported only when called, so `mrtpo --help` and `mrtpo app` never import torch.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from core.paths import ASGI_FILE, REPO_ROOT, runs_dir
from core.processes import end_with_parent

# subcommand -> (module, one-line help). The module exposes `main(argv: list[str]) -> int`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "train": ("core.run.train_cli", "train a policy with GRPO, GDPO or MRTPO and write a run store"),
    "app": ("core.cli", "serve the Streamlit workbench on http://127.0.0.1:8501"),
    "eval": ("core.evaluate.ifeval", "IFEval's four accuracies of a model or a responses file on a prompt set"),
    "upgrade": ("core.tools.upgrade_run", "rewrite a finished run's credit maps in the newest schema (opens faster)"),
    "bootstrap": ("core.tools.bootstrap", "build an embedded model from a synthetic corpus (tiny-instruct; "
                  "--setting multi: tiny-multi)"),
}
# `mrtpo bench <name>` -> (module, one-line help).
BENCHMARKS: dict[str, tuple[str, str]] = {
    "overhead": ("core.tools.bench_overhead", "MRTPO vs GDPO step time on the same batches"),
    "model": ("core.tools.bench_model", "load time and one teacher-forced pass of a model"),
    "app": ("mrtpo_viz.tools.bench_app", "render times of the app's pages"),
    "efficiency": ("core.tools.efficiency", "the sample-efficiency study (GRPO, GDPO, MRTPO variants)"),
    "trl": ("core.tools.bench_trl", "MRTPOTrainer vs TRL's GDPO on the same batches, 1 vs N processes"),
    "live": ("mrtpo_viz.tools.bench_live", "a run's s/step with and without a browser watching its curves"),
    "faithfulness": ("core.tools.bench_faithfulness", "span faithfulness and cost of every relevance variant"),
    "contrast": ("core.tools.bench_contrast", "per family: does the policy read the constraint's argument (swap vs remove)"),
    "store": ("core.tools.bench_store", "one step's credit map written and read at GPU batch sizes"),
}
SUBCOMMANDS["bench"] = ("core.cli", "benchmarks that print numbers: " + ", ".join(BENCHMARKS))


def bench_main(argv: list[str]) -> int:
    """`mrtpo bench <name> [args]`: run one benchmark module's main with the rest of the arguments."""
    parser = argparse.ArgumentParser(
        prog="mrtpo bench", description="benchmarks that print numbers",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="benchmarks:\n" + "\n".join(f"  {name:<11} {help_}" for name, (_, help_) in BENCHMARKS.items())
        + "\n\n`mrtpo bench <name> --help` documents each one.",
    )
    parser.add_argument("benchmark", choices=list(BENCHMARKS), metavar="benchmark", help="one of: %(choices)s")
    ns = parser.parse_args(argv[:1])
    return int(importlib.import_module(BENCHMARKS[ns.benchmark][0]).main(argv[1:]) or 0)


def app_address_problem(address: str, expose: bool) -> str:
    """Why `mrtpo app` refuses to bind `address` ("" when it may): anything but loopback needs `--expose`, since
    the page has no login and starts processes and reads local paths for whoever reaches it."""
    import ipaddress

    if expose or address == "localhost":
        return ""
    try:
        if ipaddress.ip_address(address).is_loopback:
            return ""
    except ValueError:
        pass
    return (f"--address {address} would expose the workbench beyond this machine: it has no login, and it starts "
            "training processes and reads local paths for anyone who reaches it; add --expose if that is meant "
            "(e.g. inside a private network), or use an SSH tunnel to 127.0.0.1")


def app_main(argv: list[str]) -> int:
    """Serve app.py with streamlit (through mrtpo_viz/server/asgi.py), bound to 127.0.0.1 unless --address (with
    --expose) says otherwise."""
    parser = argparse.ArgumentParser(prog="mrtpo app", description=SUBCOMMANDS["app"][1])
    parser.add_argument("--port", type=int, default=int(os.environ.get("MRTPO_PORT", "8501")))
    parser.add_argument("--address", default="127.0.0.1",
                        help="interface to bind (default: localhost only; another one needs --expose)")
    parser.add_argument("--expose", action="store_true",
                        help="allow an --address other than loopback (the app has no login: anyone who reaches it "
                        "can start processes and read local paths)")
    parser.add_argument("--runs-dir", default=None, help="runs directory (default: $MRTPO_RUNS_DIR or ./runs)")
    parser.add_argument("--headless", action="store_true", help="do not try to open a browser")
    args = parser.parse_args(argv)
    problem = app_address_problem(args.address, args.expose)
    if problem:
        print(f"mrtpo app: error: {problem}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    # The server runs from the repo root (where .streamlit/config.toml holds its settings), so the runs
    # directory is fixed here, relative to where `mrtpo app` was started.
    env["MRTPO_RUNS_DIR"] = str(Path(args.runs_dir).resolve() if args.runs_dir else runs_dir())
    cmd = [
        # mrtpo_viz.server.serve warms the server (the pages' imports, Plotly's validators), then runs Streamlit on
        # mrtpo_viz/server/asgi.py: app.py in an st.App whose middleware preloads the chart pages' Plotly module.
        sys.executable, "-m", "mrtpo_viz.server.serve", "run", str(ASGI_FILE),
        "--server.address", args.address, "--server.port", str(args.port),
    ]
    if args.headless:
        cmd += ["--server.headless", "true"]
    print(f"MRTPO workbench on http://{args.address}:{args.port}", flush=True)
    return run_server(cmd, env)


def run_server(cmd: list[str], env: dict[str, str]) -> int:
    """Run the server as a child and stay its parent: SIGTERM, SIGINT and SIGHUP to `mrtpo app` (make forwards
    SIGTERM to it on `make demo`) go on to the server, which stops; then this returns its exit status. Before,
    the server ran on under PID 1 and held the port, and the next `make demo` failed."""
    proc = subprocess.Popen(cmd, env=env, cwd=REPO_ROOT, preexec_fn=end_with_parent)

    def forward(signum, frame):
        try:
            proc.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)
        except ProcessLookupError:
            pass

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0 if code in (0, -signal.SIGTERM, -signal.SIGINT) else code


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
    if ns.subcommand == "bench":
        return bench_main(rest)
    return int(importlib.import_module(SUBCOMMANDS[ns.subcommand][0]).main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
