"""Token heatmap HTML: escaping, visible whitespace, span overlays, a colour scale centred at 0, hover text."""

from __future__ import annotations

import math
import re
import zlib

import pandas as pd
import pytest

from mrtpo_viz import heatmap
from mrtpo_viz.heatmap import diverging_rgb, reward_colors, spans_html, token_heatmap_html, visible_token_html

REWARDS = ["keywords:existence", "punctuation:no_comma"]
TOKENS = ["Hello", " <script>", "alert(1)", "</script>", ",", "\n", "  ", ' "x" & y']


def sample_frame(credits_a=None, credits_b=None) -> pd.DataFrame:
    """One sample, 8 tokens, 2 rewards; reward a's verifier inspected tokens 1-2, reward b's token 4 (the comma)."""
    n = len(TOKENS)
    credits_a = credits_a if credits_a is not None else [0.5, -1.0, 2.0, 0.0, 0.1, 0.0, -0.2, 0.3]
    credits_b = credits_b if credits_b is not None else [0.0] * n
    spans = {REWARDS[0]: {1, 2}, REWARDS[1]: {4}}
    response = "".join(TOKENS)
    starts = [sum(len(x) for x in TOKENS[:i]) for i in range(n)]
    rows = []
    for k, credits in zip(REWARDS, (credits_a, credits_b), strict=True):
        for t in range(n):
            rows.append(dict(step=1, sample=0, group=0, prompt_key="p<1>", prompt="Say <b>hi</b> & go.",
                             response=response, reward=k, score=1.0, group_adv=0.7, t=t, token_id=t,
                             token=TOKENS[t], start=starts[t], end=starts[t] + len(TOKENS[t]), distance=0.01 * t,
                             weight=1.0 + 0.1 * t, credit=credits[t], in_span=t in spans[k],
                             token_adv=credits_a[t] + credits_b[t]))
    return pd.DataFrame(rows)


def cells(html: str) -> list[str]:
    """The HTML of each token cell, in order (each piece runs up to the next cell)."""
    return html.split('<span class="tok" ')[1:]


def test_colour_scale_is_centred_at_zero_and_symmetric():
    assert diverging_rgb(0.0, 1.0) == (255, 255, 255)
    assert diverging_rgb(float("nan"), 1.0) == (255, 255, 255)
    for x in (0.1, 0.5, 1.0):
        pos, neg = diverging_rgb(x, 1.0), diverging_rgb(-x, 1.0)
        # the same distance from white on both sides; red dominates above 0, blue below
        dist = lambda c: math.dist(c, (255, 255, 255))  # noqa: E731
        assert dist(pos) == pytest.approx(dist(neg) * dist(heatmap.POSITIVE_RGB) / dist(heatmap.NEGATIVE_RGB), rel=0.02)
        assert pos[0] > pos[2] and neg[2] > neg[0]
    assert diverging_rgb(1.0, 1.0) == heatmap.POSITIVE_RGB and diverging_rgb(-5.0, 1.0) == heatmap.NEGATIVE_RGB
    # monotone: larger |value| -> further from white
    assert math.dist(diverging_rgb(0.2, 1.0), (255,) * 3) < math.dist(diverging_rgb(0.6, 1.0), (255,) * 3)


def test_auto_scale_is_max_abs_and_defaults_to_one():
    assert heatmap.auto_scale([0.5, -2.0, float("nan")]) == 2.0
    assert heatmap.auto_scale([0.0, 0.0]) == 1.0
    assert heatmap.auto_scale([]) == 1.0


def test_tokens_are_escaped_never_markup():
    html = token_heatmap_html(sample_frame(), REWARDS[0])
    assert "<script>" not in html and "</script>" not in html.replace("</style>", "")
    assert "&lt;script&gt;" in html and "&lt;/script&gt;" in html
    assert "Say &lt;b&gt;hi&lt;/b&gt; &amp; go." in html  # the prompt too
    assert "&quot;x&quot; &amp; y" in html
    assert "<b>hi</b>" not in html


def test_whitespace_is_visible():
    text, ends_line = visible_token_html("\n")
    assert "↵" in text and ends_line
    assert visible_token_html("  ")[0].count("·") == 2
    assert "⇥" in visible_token_html("\tx")[0]
    assert visible_token_html("\x0fa\u200b")[0] == '<span class="ws">\\x0f</span>a<span class="ws">\\u200b</span>'
    html = token_heatmap_html(sample_frame(), REWARDS[0])
    assert '<span class="br"></span>' in html  # the newline token breaks the line


def test_a_combining_mark_with_nothing_before_it_sits_on_a_dotted_circle():
    # CI, stop 56: the tiny model sampled the token "\u0352" (a combining mark alone): its cell had no width
    assert visible_token_html("\u0352")[0] == '<span class="ws">◌\u0352</span>'
    assert visible_token_html("\u0301\u0302a\u0303")[0] == '<span class="ws">◌\u0301\u0302</span>a\u0303'
    assert visible_token_html("e\u0301")[0] == "e\u0301"  # a mark after its letter is drawn on it
    assert visible_token_html("\n\u0301")[0] == '<span class="ws">↵</span><span class="ws">◌\u0301</span>'


def test_one_cell_per_token_coloured_by_the_chosen_reward():
    df = sample_frame()
    html = token_heatmap_html(df, REWARDS[0], scale=2.0)
    cs = cells(html)
    assert len(cs) == len(TOKENS)
    # token 2 has credit +2 = the scale: full red; token 1 has -1: half blue; token 3 has 0: white
    assert "background:rgba({},{},{},1.000)".format(*heatmap.POSITIVE_RGB) in cs[2]
    assert "background:transparent" in cs[3]  # zero is the page's colour (light and dark theme)
    assert f"background:{heatmap.diverging_css(-1.0, 2.0)}" in cs[1] and heatmap.diverging_css(-1.0, 2.0).endswith(",0.500)")
    # the legend states the scale
    assert "-2" in html and "+2" in html


def test_span_overlays_in_each_rewards_colour():
    df = sample_frame()
    colors = reward_colors(REWARDS)
    html = token_heatmap_html(df, REWARDS[0], reward_names=REWARDS)
    cs = cells(html)
    for t, cell in enumerate(cs):
        # one bar slot per reward under each token, filled where the token is in that verifier's spans
        assert cell.count('<i class="b"') == len(REWARDS)
        assert (f"background:{colors[REWARDS[0]]}" in cell) == (t in {1, 2})
        assert (f"background:{colors[REWARDS[1]]}" in cell) == (t == 4)
    # the legend names each reward's span colour
    for r in REWARDS:
        assert f"background:{colors[r]}" in html.split('<div class="row"')[0] and f"{r} span" in html


def test_hover_shows_token_credit_js_weight_and_span():
    html = token_heatmap_html(sample_frame(), REWARDS[0])
    title = re.search(r'data-t="2" tabindex="0">.*?<span class="tip">([^<]*)</span>', html).group(1)
    assert "token &#x27;alert(1)&#x27;" in title
    assert "keywords:existence: credit +2.0000 | JS 0.0200 | weight 1.2000 | in span" in title
    assert "punctuation:no_comma: credit +0.0000 | JS 0.0200 | weight 1.2000 | out of span" in title


def test_rows_view_has_one_row_per_reward_plus_total_on_one_scale():
    df = sample_frame(credits_b=[0.0, 0.0, 0.0, 0.0, -4.0, 0.0, 0.0, 0.0])
    html = token_heatmap_html(df, mode="rows", reward_names=REWARDS)
    rows = re.findall(r'data-row="([^"]+)"', html)
    assert rows == [*REWARDS, heatmap.TOTAL_ROW]
    assert len(cells(html)) == 3 * len(TOKENS)
    # shared scale = max |value| over all rows = 4 (reward b's comma), so reward a's +2 is half red
    row_a = html.split('data-row="keywords:existence"')[1].split('data-row=')[0]
    assert f"background:{heatmap.diverging_css(2.0, 4.0)}" in row_a


def test_fixed_scale_changes_colours_auto_scale_does_not():
    df = sample_frame()
    auto = token_heatmap_html(df, REWARDS[0])
    fixed = token_heatmap_html(df, REWARDS[0], scale=10.0)
    assert cells(auto)[2] != cells(fixed)[2]
    assert f"background:{heatmap.diverging_css(2.0, 10.0)}" in cells(fixed)[2]


def test_total_advantage_colouring_and_unknown_reward():
    html = token_heatmap_html(sample_frame(), None)
    assert "total token advantage" in html
    with pytest.raises(ValueError, match="not in this sample"):
        token_heatmap_html(sample_frame(), "nope")
    with pytest.raises(ValueError, match="mode"):
        token_heatmap_html(sample_frame(), mode="grid")


def test_empty_sample_says_so():
    assert "No tokens" in token_heatmap_html(sample_frame().iloc[0:0])


def test_reward_with_missing_positions_is_aligned_not_shifted():
    df = sample_frame()
    df = df[~((df["reward"] == REWARDS[1]) & (df["t"] == 2))]  # reward b lacks token 2
    arrays = heatmap.token_arrays(df, REWARDS)
    assert math.isnan(arrays["credit"][REWARDS[1]][2]) and arrays["in_span"][REWARDS[1]][4] is True
    assert arrays["credit"][REWARDS[0]][2] == 2.0


def test_token_arrays_match_the_wide_table():
    df = sample_frame().sample(frac=1.0, random_state=0)  # row order must not matter
    arrays = heatmap.token_arrays(df, REWARDS)
    wide = heatmap.sample_token_table(df)
    assert arrays["token"] == wide["token"].tolist()
    for r in REWARDS:
        assert arrays["credit"][r] == pytest.approx(wide[("credit", r)].tolist())
        assert arrays["in_span"][r] == wide[("in_span", r)].tolist()


def test_spans_html_highlights_escaped_ranges():
    text = "a <b> b, c\nd"
    html = spans_html(text, [(2, 5), (7, 8)], "#123456")
    boxes = re.findall(r'<span class="vspan"[^>]*>(.*?)</span>', html)
    assert boxes == ["&lt;b&gt;", ","]
    assert "outline:2px solid #123456" in html and "<b>" not in html
    assert "↵" in html
    assert spans_html("abc", [(5, 9)]).count('class="vspan"') == 0  # out of range: nothing highlighted


def test_rows_view_leaves_out_rewards_the_prompt_does_not_state():
    df = sample_frame()
    df.loc[df["reward"] == REWARDS[1], "score"] = float("nan")  # reward b does not apply to this prompt
    rows = re.findall(r'data-row="([^"]+)"', token_heatmap_html(df, mode="rows", reward_names=REWARDS))
    assert rows == [REWARDS[0], heatmap.TOTAL_ROW]


def test_hover_says_when_replay_skipped_a_rewards_js():
    df = sample_frame()
    skipped = df["reward"] == REWARDS[1]
    df["distance_skipped"] = skipped
    df.loc[skipped, ["distance", "weight", "credit", "group_adv"]] = [float("nan"), 1.0, 0.0, 0.0]
    title = re.search(r'data-t="2" tabindex="0">.*?<span class="tip">([^<]*)</span>',
                      token_heatmap_html(df, REWARDS[0])).group(1)
    assert "keywords:existence: credit +2.0000 | JS 0.0200" in title
    assert "punctuation:no_comma: credit +0.0000 | JS not computed (its group advantage is 0" in title
    # older run stores have no distance_skipped column: NaN JS reads n/a
    older = sample_frame().assign(distance=float("nan"))
    assert "JS n/a" in token_heatmap_html(older, REWARDS[0])


def test_rows_view_with_a_scale_per_row():
    df = sample_frame(credits_b=[0.0, 0.0, 0.0, 0.0, -4.0, 0.0, 0.0, 0.0])
    html = token_heatmap_html(df, mode="rows", reward_names=REWARDS, row_scale=True)
    row_a = html.split('data-row="keywords:existence"')[1].split('data-row=')[0]
    # reward a's own largest |credit| is 2: its +2 token is full red, not half red as on the shared scale of 4
    assert f"background:{heatmap.diverging_css(2.0, 2.0)}" in row_a
    assert "(scale ±2)" in row_a and "(scale ±4)" in html
    assert "each row on its own scale" in html


def test_hover_details_are_selectable_text_kept_open_on_click():
    html = token_heatmap_html(sample_frame(), REWARDS[0])
    assert 'title="' not in html  # a native tooltip cannot be selected or copied
    assert html.count('tabindex="0"') == html.count('<span class="tip">') == len(TOKENS)
    css = html.split("</style>")[0]
    assert ".tok:hover .tip, .mrtpo-hm .tok:focus .tip { display: block; }" in css and "user-select: text" in css
    assert "t=2 · token" in html


def test_colours_work_on_dark_and_light_themes():
    # regression: the heatmap's text was #111 everywhere, unreadable on Streamlit's dark theme
    css = token_heatmap_html(sample_frame(), REWARDS[0]).split("</style>")[0]
    block = re.search(r"\.mrtpo-hm \{([^}]*)\}", css).group(1)
    assert "color: inherit" in block  # legend, labels and prompt take the page's text colour
    # a token cell's background is translucent over the page (zero: the page itself), so its text is the page's
    # own colour, white only on strong credit (`.dk`)
    assert re.search(r"\.tok-text \{[^}]*color: inherit", css) and ".dk { color: #fff; }" in css
    assert "#f3f3f3" not in css and "background:#fff;" not in spans_html("abc", [(0, 1)])


def test_the_empty_end_of_sequence_token_is_explained():
    df = sample_frame()
    assert "end-of-sequence" not in token_heatmap_html(df, REWARDS[0])
    df.loc[df["t"] == 7, "token"] = ""
    html = token_heatmap_html(df, REWARDS[0])
    assert f'<span class="ws">{heatmap.EMPTY_TOKEN}</span>' in cells(html)[7]
    assert "a token with no text: the end-of-sequence token" in html


STUDY_REWARDS = ("task:arithmetic", "change_case:english_lowercase", "startend:end_checker", "keywords:existence",
                 "keywords:forbidden_words", "punctuation:no_comma", "detectable_content:postscript",
                 "length_constraints:number_words", "detectable_format:title", "startend:start_checker")


def _lab(hex_color: str) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB hex colour."""
    c = [int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    c = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
    xyz = (0.4124 * c[0] + 0.3576 * c[1] + 0.1805 * c[2]) / 0.95047, 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2], \
        (0.0193 * c[0] + 0.1192 * c[1] + 0.9505 * c[2]) / 1.08883
    f = [v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def test_reward_colours_are_distinct_within_a_view_and_the_same_in_every_order():
    # regression (issue 26 bug 2): with 10 rewards two pairs shared a colour (position modulo an 8-colour palette)
    colors = reward_colors(STUDY_REWARDS)
    assert list(colors) == list(STUDY_REWARDS) and len(set(colors.values())) == 10
    assert reward_colors(STUDY_REWARDS[::-1]) == colors  # the order a page lists them in does not matter
    # a reward whose own colour no other reward of the view wants has it in every view (every run, every page)
    def own(r):
        return heatmap.REWARD_PALETTE[zlib.crc32(r.encode()) % len(heatmap.REWARD_PALETTE)]

    for view in (STUDY_REWARDS, REWARDS, STUDY_REWARDS[:3], ("keywords:existence", "custom:mine")):
        wanted = [own(r) for r in view]
        got = reward_colors(view)
        assert len(set(got.values())) == len(set(view))
        assert all(got[r] == own(r) for r in view if wanted.count(own(r)) == 1)
    # as many distinct colours as the palette has, then they repeat
    many = [f"custom:r{i}" for i in range(len(heatmap.REWARD_PALETTE) + 3)]
    assert len(set(reward_colors(many[:-3]).values())) == len(heatmap.REWARD_PALETTE)
    assert len(reward_colors(many)) == len(many)
