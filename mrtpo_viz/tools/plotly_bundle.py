"""`python -m mrtpo_viz.tools.plotly_bundle OUT`: write the plotly.js bundle the app's charts draw with
(`mrtpo_viz.ui.charts`); `make` runs it once per virtual environment (`$VENV/share/mrtpo/plotly.min.js`).

The bundle is plotly.js's core (the scatter trace, axes, legend, hover, annotations, shapes, modebar) with the other
traces the app's figures use (`TRACES`: bar and box; `tests/test_charts.py` fails when a page draws a trace that is
not in it), of the plotly.js version the installed plotly package writes its figures for. It is built from
plotly.js's own modules (npm `plotly.js`) by esbuild, in a temporary folder removed afterwards: about 20 s and 170 MB
of npm packages while it runs, a 1.2 MB file written. Its header comment reads "plotly.js (mrtpo: scatter, bar, box
- minified) v<version>", which `ui.charts.bundle_header` reads.

Why not plotly.js's ready-made cartesian bundle (npm `plotly.js-cartesian-dist-min`, 1.5 MB): it also holds heatmap,
histogram, contour, violin..., and a browser runs its code for 0.27 s at the start of every cold chart page, against
0.08 s for this one (headless Chromium on this project's two-core machine, `mrtpo bench app --script-run`;
docs/results/app-speed.md, "A plotly.js bundle of the app's three traces"). Where the build fails (no npm, offline, a package not found), the cartesian bundle
is fetched instead; where that fails too, nothing is written and the app draws with Streamlit's chart element. The
command never fails `make`: it says what it wrote, or why nothing. Never imports torch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The traces the app's figures draw (`mrtpo_viz.figures`); plotly.js's core registers scatter itself.
TRACES = ("scatter", "bar", "box")
# The esbuild release that bundles plotly.js here (plotly.js 4.1 builds its own bundles with esbuild ^0.28).
ESBUILD = "0.28.2"
# The npm package of plotly.js's cartesian bundle, and the file in it: the fallback.
CARTESIAN = ("plotly.js-cartesian-dist-min", "plotly-cartesian.min.js")
NPM_TIMEOUT_S = 300


def entry_js(traces=TRACES) -> str:
    """The bundle's entry module: plotly.js's core with each trace of `traces` but scatter registered (core has it),
    exported as the script's global `Plotly`, as plotly.js's own bundles do."""
    extra = ", ".join(f"require('plotly.js/lib/{t}')" for t in traces if t != "scatter")
    return ("var Plotly = require('plotly.js/lib/core');\n"
            f"Plotly.register([{extra}]);\n"
            "module.exports = Plotly;\n")


def banner(version: str, traces=TRACES) -> str:
    """The header comment of the built bundle: plotly.js's own (name, version, copyright, licence) with the traces."""
    return (f"/**\n* plotly.js (mrtpo: {', '.join(traces)} - minified) v{version}\n"
            "* Copyright 2012-2026, Plotly, Inc.\n* All rights reserved.\n* Licensed under the MIT license\n*/")


def _npm(args: list[str], cwd: Path) -> None:
    """Run npm in `cwd`, quietly; raises RuntimeError with npm's last lines when it fails."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed")
    done = subprocess.run([npm, *args, "--no-audit", "--no-fund", "--fetch-timeout=30000", "--fetch-retries=1"],
                          cwd=cwd, capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
    if done.returncode != 0:
        tail = " / ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"npm {args[0]} failed: {tail}")


def build(out: Path, version: str, work: Path, traces=TRACES) -> None:
    """Build the bundle of `traces` from npm `plotly.js@version` with esbuild in `work`, and write it to `out`."""
    (work / "package.json").write_text(json.dumps({"private": True}))
    _npm(["install", "--ignore-scripts", "--no-package-lock", f"plotly.js@{version}", f"esbuild@{ESBUILD}"], work)
    (work / "entry.js").write_text(entry_js(traces))
    built = work / "plotly.min.js"
    esbuild = work / "node_modules" / ".bin" / "esbuild"
    done = subprocess.run([str(esbuild), "entry.js", "--bundle", "--minify", "--format=iife", "--global-name=Plotly",
                           "--define:global=window",  # Node's `global`, read by some of plotly.js's packages
                           "--log-level=error", f"--banner:js={banner(version, traces)}", f"--outfile={built}"],
                          cwd=work, capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"esbuild failed: {done.stderr.strip()[-400:]}")
    _install(built, out)


def fetch_cartesian(out: Path, version: str, work: Path) -> None:
    """Write plotly.js's ready-made cartesian bundle of `version` (npm `plotly.js-cartesian-dist-min`) to `out`."""
    package, name = CARTESIAN
    _npm(["pack", "--silent", f"{package}@{version}"], work)
    tarball = next(work.glob("*.tgz"))
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(work), f"package/{name}"], check=True)
    _install(work / "package" / name, out)


def _install(built: Path, out: Path) -> None:
    """Move `built` to `out` (through a file beside it, so a half-written bundle is never read)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + ".part")
    shutil.copyfile(built, part)
    os.replace(part, out)


def write_bundle(out: Path, version: str) -> str:
    """The bundle built (`build`), else the cartesian one fetched (`fetch_cartesian`), written to `out`; returns
    what was written, or why nothing was. Each try in its own temporary folder, removed afterwards."""
    reasons = []
    for what, make in ((f"plotly.js {version} with {', '.join(TRACES)}, built with esbuild", build),
                       (f"plotly.js {version}'s cartesian bundle", fetch_cartesian)):
        with tempfile.TemporaryDirectory(prefix="mrtpo-plotly-") as work:
            try:
                make(out, version, Path(work))
            except (RuntimeError, OSError, StopIteration, subprocess.SubprocessError) as e:
                reasons.append(f"{what}: {e or type(e).__name__}")
                continue
        if _names_version(out, version):
            return f"{out}: {what} ({out.stat().st_size / 1e6:.1f} MB)"
        reasons.append(f"{what}: the file written has no plotly.js {version} header")
        out.unlink(missing_ok=True)
    return "no plotly.js bundle written (" + "; ".join(reasons) + "): the app's charts use Streamlit's Plotly element"


def _names_version(path: Path, version: str) -> bool:
    """Whether `path` starts with a plotly.js bundle's header comment of `version` (`ui.charts.bundle_header` reads
    it in the app)."""
    with path.open("rb") as f:
        head = f.read(400)
    return head.startswith(b"/**") and b"plotly.js (" in head and f") v{version}\n".encode() in head


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m mrtpo_viz.tools.plotly_bundle OUT.js", file=sys.stderr)
        return 2
    from plotly.offline import get_plotlyjs_version

    print(f"plotly.js bundle for the app's charts: {write_bundle(Path(args[0]), get_plotlyjs_version())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
