"""Token credit heatmaps as HTML strings.

Pure functions from a credit frame (the run store's long format, one row per sample, reward and
response token) to HTML. No Streamlit here, so tests can check the output directly; the Token
credit page passes the string to `st.html`.

Every piece of text that comes from a run (token text, prompt, reward names) is HTML-escaped, so a
token such as `<script>` shows as text. Whitespace inside tokens is made visible: a newline shows
as `↵` followed by a line break, a tab as `⇥`, and a token made only of spaces shows `·` per space; a
combining mark with no character before it in its token (a byte-level vocabulary has many) sits on a dim `◌`,
and every token cell is at least one character wide, so no token is a zero-width box.

Colours: a diverging scale centred at 0 (blue < 0 < red, the page's own colour at exactly 0: `diverging_css`), symmetric around 0
with half-width `scale`; `scale` is the largest |value| shown unless the caller fixes it (to
compare samples on one scale). Each reward's inspected spans are drawn as a bar under the tokens
in that reward's colour (one slot per reward with a span in the sample; wrapped lines lie further apart than
the slots are tall, so a bar sits under its own line); consecutive in-span tokens join into one bar.

Never imports torch or streamlit.
"""

from __future__ import annotations

import functools
import html
import math
import unicodedata
import zlib
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mrtpo_viz.colours import PAGE_BACKGROUNDS, with_contrast

# Qualitative colours for rewards (span bars, figure lines): 10 colours of Okabe & Ito's and Paul Tol's colour-blind-safe
# palettes, chosen (a max-min search over those palettes, none closer than 20 to the white or the dark page) so that
# any two lie >= 14 apart in CIEDE2000, and >= 10 apart as a protanope, deuteranope or tritanope sees them
# (Machado 2009); `mrtpo_viz.colours`, tests/test_colours.py.
REWARD_PALETTE = (
    "#0072B2",  # blue (Okabe-Ito)
    "#CC3311",  # red (Tol vibrant)
    "#009E73",  # bluish green (Okabe-Ito)
    "#F0E442",  # yellow (Okabe-Ito)
    "#AA3377",  # purple (Tol bright)
    "#56B4E9",  # sky blue (Okabe-Ito)
    "#999933",  # olive (Tol muted)
    "#FFAABB",  # pink (Tol light)
    "#CC79A7",  # reddish purple (Okabe-Ito)
    "#EE6677",  # rose red (Tol bright)
)

# The span bars' colours on the light theme where a palette colour has less than 3:1 contrast with white (WCAG's
# non-text contrast, `colours.NON_TEXT_CONTRAST`; yellow had 1.3:1, sky blue 2.3:1, pink 1.8:1, issue 46): a shade of
# it (mixed with black). The shades were chosen by a search over shades in steps of 1/64, only these three moved,
# for the largest smallest CIEDE2000 distance among the ten light-theme span colours: 14.9 with normal vision (as the
# palette itself), 6.6 as a dichromat sees them (the palette: 10.2); tests/test_colours.py holds both and the contrast.
# On the dark theme each colour is `colours.with_contrast` of the dark page (all but one pass as they are).
LIGHT_SPAN_SHADES = {"#F0E442": "#746E20", "#56B4E9": "#22465B", "#FFAABB": "#97656F"}

NEGATIVE_RGB = (33, 102, 172)  # blue end of the diverging scale
POSITIVE_RGB = (178, 24, 43)  # red end
ZERO_RGB = (255, 255, 255)

TOTAL_ROW = "total advantage"
BAR_SLOT_PX = 4  # a span bar's slot under a token: 3 px of bar and 1 px above it (CSS i.b)
BAR_GAP_PX = 6  # the space between the last bar slot of a line of tokens and the next line

EMPTY_TOKEN = "∅"  # how a token that decodes to no text (the end-of-sequence token) is drawn
MARK_BASE = "◌"  # what a combining mark with nothing before it in its token is drawn on (Unicode's dotted circle)

# Colours that work on Streamlit's light and dark themes: text outside the token cells inherits the page's
# colour; a token cell sets its own (dark on light cells, white on dark ones) because its background is the
# credit colour; boxes are tinted with translucent grey instead of a fixed light grey.
_CSS = """
<style>
.mrtpo-hm { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 14px;
  line-height: 1.25; color: inherit; }
.mrtpo-hm .row { margin: 0 0 10px 0; }
.mrtpo-hm .row-label { font-family: sans-serif; font-size: 12px; font-weight: 600; margin: 2px 0; }
.mrtpo-hm .tokens { display: flex; flex-wrap: wrap; align-items: flex-start; row-gap: 10px; }
.mrtpo-hm .tok { display: inline-flex; flex-direction: column; margin: 0; position: relative; outline: none; }
.mrtpo-hm .tok-text { white-space: pre; padding: 1px 0; border-radius: 2px; color: inherit; cursor: default;
  min-width: 1ch; }
.mrtpo-hm .dk { color: #fff; }
.mrtpo-hm .ws { color: #888; }
.mrtpo-hm i.b { display: block; height: 3px; margin-top: 1px; }
.mrtpo-hm .br { flex-basis: 100%; height: 0; }
.mrtpo-hm .prompt { font-family: sans-serif; background: rgba(128, 128, 128, 0.14); padding: 6px 8px;
  border-radius: 4px; margin-bottom: 8px; white-space: pre-wrap; }
.mrtpo-hm .legend { font-family: sans-serif; font-size: 12px; display: flex; flex-wrap: wrap; gap: 14px;
  align-items: center; margin: 6px 0 10px 0; }
.mrtpo-hm .cbar { display: inline-block; width: 160px; height: 12px; vertical-align: middle;
  border: 1px solid rgba(128, 128, 128, 0.6); margin: 0 4px; }
.mrtpo-hm .swatch { display: inline-block; width: 18px; height: 4px; vertical-align: middle; margin-right: 4px; }
.mrtpo-hm .tip { display: none; position: absolute; top: 100%; left: 0; z-index: 20; margin-top: 2px;
  padding: 6px 8px; min-width: 24em; white-space: pre; font-size: 12px; line-height: 1.35; color: #111;
  background: #fffbe6; border: 1px solid #b8a86a; border-radius: 4px; box-shadow: 0 2px 6px rgba(0, 0, 0, 0.3);
  user-select: text; cursor: text; }
.mrtpo-hm .tok:hover .tip, .mrtpo-hm .tok:focus .tip { display: block; }
.mrtpo-hm .tok:focus .tok-text { outline: 2px solid #b8a86a; }
.mrtpo-hm .row-scale { font-weight: 400; opacity: 0.75; }
</style>
"""


def reward_colors(reward_names: Sequence[str]) -> dict[str, str]:
    """The colour of each reward in one view (a page's figures and heatmaps): the one function that owns them,
    `palette_colors(reward_names, REWARD_PALETTE)`: the same on every page and in every run, distinct in a view
    of at most len(REWARD_PALETTE) rewards."""
    return palette_colors(reward_names, REWARD_PALETTE)


def span_colour(colour: str, theme: str) -> str:
    """The colour a reward's span bar is drawn in on `theme` ("light" or "dark"): `colour` where it has 3:1
    contrast with that theme's page, else a shade of it that has (`LIGHT_SPAN_SHADES`, `colours.with_contrast`)."""
    if theme == "light" and colour in LIGHT_SPAN_SHADES:
        return LIGHT_SPAN_SHADES[colour]
    return with_contrast(colour, PAGE_BACKGROUNDS[theme])


@functools.lru_cache(maxsize=256)
def span_css(colour: str) -> str:
    """A span bar's CSS colour: `colour` where it has 3:1 contrast with both themes' pages, else
    `light-dark(<light>, <dark>)` of its `span_colour`s, which the browser resolves by the color-scheme Streamlit
    sets for its theme (so one HTML serves both)."""
    light, dark = span_colour(colour, "light"), span_colour(colour, "dark")
    return colour if light == dark == colour else f"light-dark({light}, {dark})"


def palette_colors(names: Sequence[str], palette: Sequence[str]) -> dict[str, str]:
    """A colour for each name of one view, fixed by the name (rewards: `reward_colors`; runs: `figures.run_colors`).

    A name's own colour is `palette[crc32(name) % len(palette)]`, the same on every page, in every session and
    whatever else is shown. In a view where several names want the same colour, the first by name keeps it and
    the others, in name order, take the next colour of the palette that no name of the view wants or has taken;
    so a name whose own colour no other name of the view wants always has it, and the colours of a view are
    distinct while it has at most len(palette) names (beyond that they repeat). The result does not depend on
    the order of `names`: every page that shows the same names gives each the same colour.
    """
    n = len(palette)
    names_sorted = sorted(set(names))
    own = {name: zlib.crc32(name.encode("utf-8")) % n for name in names_sorted}
    slot_of: dict[str, int] = {}
    for name in names_sorted:  # first pass: each wanted colour to the first name that wants it
        if own[name] not in slot_of.values():
            slot_of[name] = own[name]
    used = set(slot_of.values())
    for name in names_sorted:  # second pass: the others, each to the next colour nobody has
        if name in slot_of:
            continue
        if len(used) == n:
            used = set()  # more names than colours: colours repeat
        slot = own[name]
        while slot in used:
            slot = (slot + 1) % n
        slot_of[name] = slot
        used.add(slot)
    return {name: palette[slot_of[name]] for name in dict.fromkeys(names)}


def diverging_rgb(value: float, scale: float) -> tuple[int, int, int]:
    """RGB of `value` on a diverging scale centred at 0.

    x = clip(value / scale, -1, 1); colour = white + |x| * (end - white), end = red for x > 0,
    blue for x < 0. value = 0 (or NaN) is pure white; |value| >= scale is the full end colour.
    """
    if value is None or not math.isfinite(value) or scale <= 0 or not math.isfinite(scale):
        return ZERO_RGB
    x = max(-1.0, min(1.0, value / scale))
    end = POSITIVE_RGB if x > 0 else NEGATIVE_RGB
    a = abs(x)
    return tuple(round(z + a * (e - z)) for z, e in zip(ZERO_RGB, end, strict=True))  # type: ignore[return-value]


def diverging_css(value: float, scale: float) -> str:
    """A token cell's background: the end colour of `diverging_rgb` at opacity |x| = min(|value| / scale, 1),
    over the page. On white it is `diverging_rgb` (white + |x| (end - white)); on the dark theme zero is the dark
    page, not a bright white box. value = 0 (or NaN) is transparent."""
    if value is None or not math.isfinite(value) or scale <= 0 or not math.isfinite(scale) or value == 0:
        return "transparent"
    x = max(-1.0, min(1.0, value / scale))
    r, g, b = POSITIVE_RGB if x > 0 else NEGATIVE_RGB
    return f"rgba({r},{g},{b},{abs(x):.3f})"


def diverging_color(value: float, scale: float) -> str:
    """CSS colour string of `diverging_rgb`."""
    r, g, b = diverging_rgb(value, scale)
    return f"rgb({r},{g},{b})"


def text_color_for(rgb: tuple[int, int, int]) -> str:
    """Black on light backgrounds, white on dark ones (relative luminance < 0.45)."""
    r, g, b = (c / 255 for c in rgb)
    return "#fff" if 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.45 else "#111"


def auto_scale(values: Sequence[float] | pd.Series) -> float:
    """Half-width of the colour scale: max |value| over finite values, 1.0 when there is none or it is 0."""
    s = pd.Series(values, dtype="float64").abs()
    s = s[s.map(math.isfinite)] if len(s) else s
    m = float(s.max()) if len(s) else 0.0
    return m if m > 0 and math.isfinite(m) else 1.0


def visible_token_html(token: str) -> tuple[str, bool]:
    """Escaped HTML for a token with its whitespace made visible; second value: it ends a line.

    Newlines become `↵` (and the caller breaks the line), tabs `⇥`, carriage returns `␍`, other control and
    invisible format characters their escape (`\x0f`, `\u200b`); a token made only of spaces shows a dim `·`
    per space so it is not an invisible box. Combining marks (Unicode category M*) with no character of the
    token before them to combine with sit on a dim `◌` (MARK_BASE), as Unicode charts draw them: alone they
    have no width.
    """
    if token == "":
        return f'<span class="ws">{EMPTY_TOKEN}</span>', False
    if token.strip(" ") == "":
        return f'<span class="ws">{"·" * len(token)}</span>', False
    parts = []
    based = False  # a character drawn as itself precedes: a combining mark sits on it
    marks = ""  # combining marks with nothing to sit on, drawn together on one ◌
    for ch in token:
        category = unicodedata.category(ch)
        if category.startswith("M") and not based:
            marks += ch
            continue
        parts.append(_on_mark_base(marks))
        marks = ""
        based = category not in ("Cc", "Cf", "Zl", "Zp")  # not drawn as an escape or a symbol (\n, \t, \r are Cc)
        if ch == "\n":
            parts.append('<span class="ws">↵</span>')
        elif ch == "\t":
            parts.append('<span class="ws">⇥</span>')
        elif ch == "\r":
            parts.append('<span class="ws">␍</span>')
        elif not based:  # control / invisible format characters
            parts.append(f'<span class="ws">\\x{ord(ch):02x}</span>' if ord(ch) < 256
                         else f'<span class="ws">\\u{ord(ch):04x}</span>')
        else:
            parts.append(html.escape(ch, quote=True))
    return "".join(parts) + _on_mark_base(marks), token.endswith("\n")


def _on_mark_base(marks: str) -> str:
    """Combining marks with nothing to sit on, drawn on one dim ◌ (MARK_BASE); "" for none."""
    return f'<span class="ws">{MARK_BASE}{html.escape(marks)}</span>' if marks else ""


def _fmt(x: float, signed: bool = False) -> str:
    if x != x or x in (math.inf, -math.inf):  # NaN (GRPO/GDPO runs have no JS) or infinite
        return "n/a"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


JS_SKIPPED_TEXT = "not computed (its group advantage is 0: replay skipped it)"


def _reward_line(reward: str, credit: float, js: float, weight: float, in_span: bool, skipped: bool = False) -> str:
    span = "in span" if in_span else "out of span"
    js_text = JS_SKIPPED_TEXT if skipped else _fmt(js)
    return f"{reward}: credit {_fmt(credit, True)} | JS {js_text} | weight {_fmt(weight)} | {span}"


def skipped_rewards(sample_df: pd.DataFrame) -> set[str]:
    """The rewards whose JS replay skipped for this sample (`distance_skipped`; none in older run stores)."""
    if "distance_skipped" not in sample_df.columns:
        return set()
    return {str(r) for r in sample_df.loc[sample_df["distance_skipped"].astype(bool), "reward"].unique()}


def sample_token_table(sample_df: pd.DataFrame) -> pd.DataFrame:
    """Wide per-token view of one sample: index t; columns token, start, end, token_adv and
    (credit|distance|weight|in_span, reward) pairs. Rewards keep their order of appearance.
    """
    if sample_df.empty:
        return pd.DataFrame(columns=["token", "start", "end", "token_adv"])
    base = sample_df.drop_duplicates("t").set_index("t").sort_index()
    out = base[["token", "start", "end", "token_adv"]].copy()
    cols: dict[tuple[str, str], pd.Series] = {}
    for r, d in sample_df.groupby("reward", sort=False, observed=True):
        d = d.drop_duplicates("t").set_index("t").reindex(out.index)
        for col in ("credit", "distance", "weight"):
            cols[(col, r)] = d[col].astype("float64")
        cols[("in_span", r)] = d["in_span"].fillna(False).astype(bool)
    return pd.concat([out, pd.DataFrame(cols, index=out.index)], axis=1)


def token_arrays(sample_df: pd.DataFrame, names: Sequence[str]) -> dict:
    """Plain lists per token of one sample (fast path of `sample_token_table`): t, token, token_adv, and
    per reward dicts credit/distance/weight/in_span aligned on the sample's token positions."""
    rewards = sample_df["reward"].to_numpy()
    t_all = sample_df["t"].to_numpy()
    first = names[0] if len(names) else None
    base = sample_df[rewards == first] if first is not None else sample_df.drop_duplicates("t")
    order = np.argsort(base["t"].to_numpy(), kind="stable")
    ts = base["t"].to_numpy()[order]
    out: dict = {"t": ts.astype(int).tolist(), "token": base["token"].astype(str).to_numpy()[order].tolist(),
                 "token_adv": base["token_adv"].to_numpy(dtype="float64")[order].tolist(),
                 "credit": {}, "distance": {}, "weight": {}, "in_span": {}}
    for r in names:
        mask = rewards == r
        d_t = t_all[mask]
        o = np.argsort(d_t, kind="stable")
        aligned = len(d_t) == len(ts) and np.array_equal(d_t[o], ts)
        d = sample_df[mask]
        for col, dtype, fill in (("credit", "float64", np.nan), ("distance", "float64", np.nan),
                                 ("weight", "float64", np.nan), ("in_span", bool, False)):
            v = d[col].to_numpy(dtype=dtype)[o]
            if not aligned:  # a reward with missing or extra positions: align on the first reward's tokens
                pos = {int(t): i for i, t in enumerate(d_t[o])}
                v = np.array([v[pos[int(t)]] if int(t) in pos else fill for t in ts], dtype=dtype)
            out[col][r] = v.tolist()
    return out


def _legend_html(scale: float | None, colors: dict[str, str], label: str, empty_token: bool = False) -> str:
    """The colour bar (omitted when `scale` is None: each row states its own), each reward's span colour, and
    what the empty-token mark means when the sample has one."""
    items = []
    if scale is not None:
        lo, hi = diverging_color(-scale, scale), diverging_color(scale, scale)
        items.append(f'<span>{html.escape(label)}: {-scale:+.3g} <span class="cbar" '
                     f'style="background: linear-gradient(to right, {lo}, transparent, {hi});"></span> {scale:+.3g} '
                     f"(the page's colour = 0)</span>")
    else:
        items.append(f"<span>{html.escape(label)}: each row on its own scale, blue &lt; 0 &lt; red (the page's colour = 0)</span>")
    for name, col in colors.items():
        items.append(f'<span><span class="swatch" style="background:{col}"></span>{html.escape(name)} span</span>')
    if empty_token:
        items.append(f'<span><span class="ws">{EMPTY_TOKEN}</span> = a token with no text: the end-of-sequence '
                     "token</span>")
    items.append("<span>hover a token for its numbers; click it to keep them open and copy them</span>")
    return f'<div class="legend">{"".join(items)}</div>'


def _token_cell(text_html: str, value: float, scale: float, bars: Sequence[str | None], tip: str,
                t: int, end_line: bool) -> str:
    # Span bars are <i class="b">: one slot per reward, filled in its colour where the token is in a span.
    # The details are a hidden box shown on hover, and kept open while the token has focus (a click), so that
    # its text can be selected and copied (a title attribute cannot be).
    bar_html = "".join(f'<i class="b" style="background:{c}"></i>' if c else '<i class="b"></i>' for c in bars)
    # white text where the cell is dark on white; below that the page's own text colour, over a faint tint
    dark = " dk" if text_color_for(diverging_rgb(value, scale)) == "#fff" else ""
    cell = (
        f'<span class="tok" data-t="{t}" tabindex="0">'
        f'<span class="tok-text{dark}" style="background:{diverging_css(value, scale)}">{text_html}</span>{bar_html}'
        f'<span class="tip">{tip}</span></span>'
    )
    return cell + ('<span class="br"></span>' if end_line else "")


def token_heatmap_html(
    sample_df: pd.DataFrame,
    reward: str | None = None,
    *,
    mode: str = "single",
    scale: float | None = None,
    reward_names: Sequence[str] | None = None,
    show_prompt: bool = True,
    row_scale: bool = False,
) -> str:
    """HTML heatmap of one sample's response tokens.

    sample_df: credit rows of one (step, sample), all rewards (schema of the run store's credit files).
    mode "single": one row of tokens coloured by `reward`'s credit, or by the total token advantage when
      `reward` is None or `TOTAL_ROW`; under each token, one bar slot per reward, filled in the reward's
      colour where the token is in that verifier's spans.
    mode "rows": one aligned row per reward (coloured by its credit, with its own span bar) plus a last
      row coloured by the total advantage; all rows share one scale. A row's hover shows its own reward.
    scale: half-width of the colour scale; None = max |value| shown (per sample).
    row_scale: rows mode only: each row on its own scale (its largest |value|, stated next to its name), so a
      reward with small credit is not washed out by a larger one; `scale` is then ignored.
    Hover (and focus, kept on click) on every token: a box with the token's repr and total advantage, then per
    reward its credit, JS, weight and in/out of span, as selectable text. An empty token (the end-of-sequence
    token decodes to no text) shows as `∅`, explained in the legend.
    """
    if mode not in ("single", "rows"):
        raise ValueError(f"mode must be 'single' or 'rows', got {mode!r}")
    if sample_df.empty:
        return _CSS + '<div class="mrtpo-hm"><em>No tokens in this sample.</em></div>'
    present = list(dict.fromkeys(sample_df["reward"]))
    names = [r for r in (reward_names or present) if r in present] + [
        r for r in present if r not in (reward_names or [])
    ]
    # the span bars' and swatches' colours, legible on both themes (`span_css`)
    colors = {r: span_css(c) for r, c in reward_colors([*(reward_names or []), *names]).items()}
    arrays = token_arrays(sample_df, names)
    ts, tokens, total = arrays["t"], arrays["token"], arrays["token_adv"]
    credit, js, weight, in_span = arrays["credit"], arrays["distance"], arrays["weight"], arrays["in_span"]

    # Hover lines formatted once per (reward, token), escaped for the title attribute (same text as
    # _reward_line; formatted in bulk because a 256 x 4 sample has ~1000 of them).
    skipped = skipped_rewards(sample_df)
    reward_lines = {r: [html.escape(_reward_line(r, c, j, w, m, r in skipped), quote=True) for c, j, w, m in
                        zip(credit[r], js[r], weight[r], in_span[r], strict=True)] for r in names}
    heads = [html.escape(f"t={t} · token {tok!r}\ntotal advantage {_fmt(a, True)}", quote=True)
             for t, tok, a in zip(ts, tokens, total, strict=True)]

    def tooltip(i: int, rewards: Sequence[str]) -> str:
        return "\n".join([heads[i], *(reward_lines[r][i] for r in rewards)])

    texts = [visible_token_html(tok) for tok in tokens]
    has_empty = any(tok == "" for tok in tokens)

    first = sample_df.iloc[0]
    parts = [_CSS, '<div class="mrtpo-hm">']
    if show_prompt and "prompt" in sample_df.columns:
        parts.append(f'<div class="prompt"><b>Prompt</b><br>{html.escape(str(first["prompt"]))}</div>')

    if mode == "single":
        key = TOTAL_ROW if reward in (None, TOTAL_ROW) else reward
        if key != TOTAL_ROW and key not in names:
            raise ValueError(f"reward {key!r} not in this sample; choose one of {names}")
        values = total if key == TOTAL_ROW else credit[key]
        sc = scale if scale is not None else auto_scale(values)
        label = "total token advantage" if key == TOTAL_ROW else f"credit of {key}"
        parts.append(_legend_html(sc, colors, label, has_empty))
        # One bar slot per reward that has a span in this sample; the gap between wrapped lines is the slots'
        # height (BAR_SLOT_PX each) plus BAR_GAP_PX, so every bar sits nearer its own line than the next one.
        spanned = [r for r in names if np.asarray(in_span[r]).any()]
        gap = BAR_SLOT_PX * len(spanned) + BAR_GAP_PX
        parts.append(f'<div class="row" data-row="{html.escape(key, quote=True)}">'
                     f'<div class="tokens" style="row-gap:{gap}px">')
        for i, t in enumerate(ts):
            bars = [colors[r] if in_span[r][i] else None for r in spanned]
            parts.append(_token_cell(texts[i][0], values[i], sc, bars, tooltip(i, names), t,
                                     texts[i][1]))
        parts.append("</div></div>")
    else:
        # A reward the prompt does not state (score NaN) has no credit and no spans: no row for it.
        scores = sample_df.groupby("reward", sort=False)["score"].first() if "score" in sample_df.columns else None
        stated = [r for r in names if scores is None or pd.notna(scores.get(r))]
        rows = [(r, credit[r], [colors[r] if v else None for v in in_span[r]]) for r in stated]
        rows.append((TOTAL_ROW, total, None))
        allv = [v for _, vals, _ in rows for v in vals]
        sc = scale if scale is not None else auto_scale(allv)
        parts.append(_legend_html(None if row_scale else sc, {r: colors[r] for r in stated}, "credit / advantage",
                                  has_empty))
        for name, vals, bar_colors in rows:
            row_sc = auto_scale(vals) if row_scale else sc
            label = html.escape(name) + (f' <span class="row-scale">(scale ±{row_sc:.3g})</span>' if row_scale else "")
            parts.append(f'<div class="row" data-row="{html.escape(name, quote=True)}">'
                         f'<div class="row-label">{label}</div><div class="tokens">')
            # Each row's hover names only its own reward (the total row: just the total), to keep the page
            # small: a 256-token sample with 4 rewards is 5 x 256 cells.
            row_rewards = [] if name == TOTAL_ROW else [name]
            for i, t in enumerate(ts):
                bars = [bar_colors[i]] if bar_colors is not None else []
                parts.append(_token_cell(texts[i][0], vals[i], row_sc, bars, tooltip(i, row_rewards), t,
                                         texts[i][1]))
            parts.append("</div></div>")
    parts.append("</div>")
    return "".join(parts)


def spans_html(text: str, spans: Sequence[tuple[int, int]], color: str = REWARD_PALETTE[0]) -> str:
    """The text with character ranges `spans` highlighted (outlined box tinted in `color`); all text escaped.

    Spans are (start, end) character offsets, sorted and non-overlapping (as a verifier returns them);
    out-of-range parts are clipped. Newlines are kept (pre-wrap) and also marked with `↵`.
    """
    def esc(s: str) -> str:
        return html.escape(s, quote=True).replace("\n", '<span class="ws">↵</span>\n')

    out, pos, n = [], 0, len(text)
    for i, (a, b) in enumerate(sorted((max(0, int(a)), min(n, int(b))) for a, b in spans)):
        if b <= a or a < pos:
            continue
        out.append(esc(text[pos:a]))
        out.append(f'<span class="vspan" data-span="{i}" title="span {i}: characters {a}-{b}" '
                   f'style="outline:2px solid {color};background:{color}33">{esc(text[a:b])}</span>')
        pos = b
    out.append(esc(text[pos:]))
    return (_CSS + '<div class="mrtpo-hm"><div class="prompt" style="border:1px solid rgba(128,128,128,0.4);'
            'font-family:ui-monospace,monospace">' + "".join(out) + "</div></div>")
