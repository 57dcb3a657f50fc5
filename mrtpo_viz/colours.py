"""Perceptual colour distance for choosing the app's palettes: sRGB -> CIELAB, CIEDE2000, simulated colour-vision
deficiency (Machado et al. 2009) and a palette's smallest pairwise distance. Tests hold the palettes
(`heatmap.REWARD_PALETTE`, `figures.style.RUN_PALETTE`) to a threshold with these; docs/METHOD.md, "Palettes".

Pure Python (no NumPy needed). Never imports torch or streamlit.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

# Machado, Oliveira & Fernandes (2009), "A physiologically-based model for simulation of color vision
# deficiency", the severity-1.0 matrices, applied to linear RGB.
CVD_MATRICES: dict[str, tuple[tuple[float, float, float], ...]] = {
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602),
                   (0.004733, 0.691367, 0.303900)),
}
_WHITE_D65 = (0.95047, 1.0, 1.08883)


def hex_rgb(colour: str) -> tuple[int, int, int]:
    """'#rrggbb' -> (r, g, b) in 0..255."""
    h = colour.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def _linear(c: float) -> float:
    """sRGB companding undone: c in [0, 1] -> linear light (IEC 61966-2-1)."""
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _gamma(c: float) -> float:
    c = min(1.0, max(0.0, c))
    return 12.92 * c if c <= 0.0031308 else 1.055 * c ** (1 / 2.4) - 0.055


def srgb_to_lab(rgb: Sequence[float]) -> tuple[float, float, float]:
    """sRGB (0..255) -> CIELAB (D65): linearise, XYZ by the sRGB matrix, then L = 116 f(Y/Yn) - 16,
    a = 500 (f(X/Xn) - f(Y/Yn)), b = 200 (f(Y/Yn) - f(Z/Zn)), f(t) = t^(1/3) above (6/29)^3, else
    t / (3 (6/29)^2) + 4/29."""
    r, g, b = (_linear(c / 255) for c in rgb)
    xyz = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b, 0.2126729 * r + 0.7151522 * g + 0.0721750 * b,
           0.0193339 * r + 0.1191920 * g + 0.9503041 * b)
    d = 6 / 29

    def f(t: float) -> float:
        return t ** (1 / 3) if t > d ** 3 else t / (3 * d * d) + 4 / 29

    fx, fy, fz = (f(v / w) for v, w in zip(xyz, _WHITE_D65, strict=True))
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def simulate_cvd(rgb: Sequence[float], kind: str) -> tuple[int, int, int]:
    """The sRGB colour (0..255) a dichromat of `kind` (protanopia, deuteranopia, tritanopia) sees for `rgb`:
    Machado 2009's matrix on linear RGB, clipped to the gamut, companded back."""
    m = CVD_MATRICES[kind]
    lin = [_linear(c / 255) for c in rgb]
    out = [sum(m[i][j] * lin[j] for j in range(3)) for i in range(3)]
    return tuple(round(255 * _gamma(c)) for c in out)  # type: ignore[return-value]


def ciede2000(lab1: Sequence[float], lab2: Sequence[float]) -> float:
    """CIEDE2000 colour difference (Sharma, Wu & Dalal 2005, "The CIEDE2000 color-difference formula:
    implementation notes, supplementary test data, and mathematical observations"), kL = kC = kH = 1:

        C*_i = sqrt(a_i^2 + b_i^2),  Cbar = (C*_1 + C*_2) / 2,  G = 0.5 (1 - sqrt(Cbar^7 / (Cbar^7 + 25^7)))
        a'_i = (1 + G) a_i,  C'_i = sqrt(a'_i^2 + b_i^2),  h'_i = atan2(b_i, a'_i) mod 360 (0 where C'_i = 0)
        dL' = L_2 - L_1,  dC' = C'_2 - C'_1,
        dh' = h'_2 - h'_1 wrapped into [-180, 180] (0 where C'_1 C'_2 = 0),  dH' = 2 sqrt(C'_1 C'_2) sin(dh'/2)
        L'bar = (L_1 + L_2) / 2,  C'bar = (C'_1 + C'_2) / 2,
        h'bar = the mean hue (h'_1 + h'_2)/2, +180 when |h'_1 - h'_2| > 180 (mod 360); h'_1 + h'_2 where C'_1 C'_2 = 0
        T = 1 - 0.17 cos(h'bar - 30) + 0.24 cos(2 h'bar) + 0.32 cos(3 h'bar + 6) - 0.20 cos(4 h'bar - 63)
        dtheta = 30 exp(-((h'bar - 275) / 25)^2),  R_C = 2 sqrt(C'bar^7 / (C'bar^7 + 25^7))
        S_L = 1 + 0.015 (L'bar - 50)^2 / sqrt(20 + (L'bar - 50)^2),  S_C = 1 + 0.045 C'bar,  S_H = 1 + 0.015 C'bar T
        R_T = -sin(2 dtheta) R_C
        dE00 = sqrt((dL'/S_L)^2 + (dC'/S_C)^2 + (dH'/S_H)^2 + R_T (dC'/S_C)(dH'/S_H))

    Angles in degrees. Checked against the paper's 34 test pairs (tests/test_colours.py).

    >>> round(ciede2000((50, 2.6772, -79.7751), (50, 0, -82.7485)), 4)
    2.0425
    """
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    cbar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(cbar ** 7 / (cbar ** 7 + 25 ** 7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    dlp, dcp = l2 - l1, c2p - c1p
    if c1p * c2p == 0:
        dhp = 0.0
    else:
        dhp = h2p - h1p
        if dhp > 180:
            dhp -= 360
        elif dhp < -180:
            dhp += 360
    dhp_big = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dhp) / 2)
    lbar, cbarp = (l1 + l2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        hbar = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        hbar = (h1p + h2p) / 2
    else:
        hbar = (h1p + h2p + 360) / 2 if h1p + h2p < 360 else (h1p + h2p - 360) / 2
    t = (1 - 0.17 * math.cos(math.radians(hbar - 30)) + 0.24 * math.cos(math.radians(2 * hbar))
         + 0.32 * math.cos(math.radians(3 * hbar + 6)) - 0.20 * math.cos(math.radians(4 * hbar - 63)))
    dtheta = 30 * math.exp(-(((hbar - 275) / 25) ** 2))
    rc = 2 * math.sqrt(cbarp ** 7 / (cbarp ** 7 + 25 ** 7))
    sl = 1 + 0.015 * (lbar - 50) ** 2 / math.sqrt(20 + (lbar - 50) ** 2)
    sc, sh = 1 + 0.045 * cbarp, 1 + 0.015 * cbarp * t
    rt = -math.sin(math.radians(2 * dtheta)) * rc
    x, y, z = dlp / sl, dcp / sc, dhp_big / sh
    return math.sqrt(x * x + y * y + z * z + rt * y * z)


def min_distance(palette: Sequence[str], cvd: str | None = None) -> tuple[float, tuple[str, str]]:
    """The smallest CIEDE2000 distance between two colours of `palette` ('#rrggbb'), as seen with normal vision
    (`cvd` None) or by a dichromat of kind `cvd`, and the pair that has it."""
    def lab(c: str) -> tuple[float, float, float]:
        rgb = hex_rgb(c)
        return srgb_to_lab(simulate_cvd(rgb, cvd) if cvd else rgb)

    labs = {c: lab(c) for c in palette}
    return min((ciede2000(labs[p], labs[q]), (p, q)) for p, q in itertools.combinations(palette, 2))


# WCAG 2.1 success criterion 1.4.11 (non-text contrast): a graphical object, such as a span bar under the tokens,
# needs a contrast ratio of at least 3:1 against the colour it is drawn on.
NON_TEXT_CONTRAST = 3.0
# The page background of Streamlit 1.67's light and dark themes (the app's `stApp` element in Chromium;
# tests/test_browser_pages.py reads them from the page).
PAGE_BACKGROUNDS = {"light": (255, 255, 255), "dark": (23, 22, 20)}


def relative_luminance(rgb: Sequence[float]) -> float:
    """WCAG 2.x relative luminance of an sRGB colour (0..255): 0.2126 R + 0.7152 G + 0.0722 B of linear light."""
    r, g, b = (_linear(c / 255) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(rgb1: Sequence[float], rgb2: Sequence[float]) -> float:
    """WCAG 2.x contrast ratio (L1 + 0.05) / (L2 + 0.05), L1 the lighter colour's relative luminance: 1 to 21.

    >>> round(contrast_ratio((255, 255, 255), (0, 0, 0)), 1)
    21.0
    """
    hi, lo = sorted((relative_luminance(rgb1), relative_luminance(rgb2)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def with_contrast(colour: str, background: Sequence[float], minimum: float = NON_TEXT_CONTRAST) -> str:
    """`colour` ('#rrggbb') where its `contrast_ratio` against `background` (0..255) is at least `minimum`; else the
    first of its shades that is: mixed with black (on a light background) or white (on a dark one) in sRGB, in
    steps of 1/64, so the hue stays and only the lightness moves away from the page's.

    >>> with_contrast("#0072B2", (255, 255, 255))  # passes as it is
    '#0072B2'
    >>> with_contrast("#F0E442", (255, 255, 255))  # yellow on white: 1.3:1, a darker yellow
    '#9E962B'
    """
    rgb = hex_rgb(colour)
    towards = 0.0 if relative_luminance(background) > 0.18 else 255.0  # 0.18: where black and white contrast alike
    for step in range(65):
        t = step / 64
        mixed = tuple(round(c + (towards - c) * t) for c in rgb)
        if contrast_ratio(mixed, background) >= minimum:
            return colour if step == 0 else "#{:02X}{:02X}{:02X}".format(*mixed)
    return "#{:02X}{:02X}{:02X}".format(*(int(towards),) * 3)
