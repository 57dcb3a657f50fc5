"""Palettes chosen for distinguishability: CIEDE2000 checked against Sharma et al.'s published test pairs, and the
reward and run palettes' smallest pairwise distance, also under simulated colour-vision deficiency."""

from __future__ import annotations

import pytest

from mrtpo_viz import colours
from mrtpo_viz.figures.style import RUN_PALETTE
from mrtpo_viz.heatmap import REWARD_PALETTE

# Sharma, Wu & Dalal (2005), Table 1: (L1, a1, b1), (L2, a2, b2), dE00.
SHARMA_PAIRS = [
    ((50.0000, 2.6772, -79.7751), (50.0000, 0.0000, -82.7485), 2.0425),
    ((50.0000, 3.1571, -77.2803), (50.0000, 0.0000, -82.7485), 2.8615),
    ((50.0000, 2.8361, -74.0200), (50.0000, 0.0000, -82.7485), 3.4412),
    ((50.0000, -1.3802, -84.2814), (50.0000, 0.0000, -82.7485), 1.0000),
    ((50.0000, -1.1848, -84.8006), (50.0000, 0.0000, -82.7485), 1.0000),
    ((50.0000, -0.9009, -85.5211), (50.0000, 0.0000, -82.7485), 1.0000),
    ((50.0000, 0.0000, 0.0000), (50.0000, -1.0000, 2.0000), 2.3669),
    ((50.0000, -1.0000, 2.0000), (50.0000, 0.0000, 0.0000), 2.3669),
    ((50.0000, 2.4900, -0.0010), (50.0000, -2.4900, 0.0009), 7.1792),
    ((50.0000, 2.4900, -0.0010), (50.0000, -2.4900, 0.0010), 7.1792),
    ((50.0000, 2.4900, -0.0010), (50.0000, -2.4900, 0.0011), 7.2195),
    ((50.0000, 2.4900, -0.0010), (50.0000, -2.4900, 0.0012), 7.2195),
    ((50.0000, -0.0010, 2.4900), (50.0000, 0.0009, -2.4900), 4.8045),
    ((50.0000, -0.0010, 2.4900), (50.0000, 0.0010, -2.4900), 4.8045),
    ((50.0000, -0.0010, 2.4900), (50.0000, 0.0011, -2.4900), 4.7461),
    ((50.0000, 2.5000, 0.0000), (50.0000, 0.0000, -2.5000), 4.3065),
    ((50.0000, 2.5000, 0.0000), (73.0000, 25.0000, -18.0000), 27.1492),
    ((50.0000, 2.5000, 0.0000), (61.0000, -5.0000, 29.0000), 22.8977),
    ((50.0000, 2.5000, 0.0000), (56.0000, -27.0000, -3.0000), 31.9030),
    ((50.0000, 2.5000, 0.0000), (58.0000, 24.0000, 15.0000), 19.4535),
    ((50.0000, 2.5000, 0.0000), (50.0000, 3.1736, 0.5854), 1.0000),
    ((50.0000, 2.5000, 0.0000), (50.0000, 3.2972, 0.0000), 1.0000),
    ((50.0000, 2.5000, 0.0000), (50.0000, 1.8634, 0.5757), 1.0000),
    ((50.0000, 2.5000, 0.0000), (50.0000, 3.2592, 0.3350), 1.0000),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ((63.0109, -31.0961, -5.8663), (62.8187, -29.7946, -4.0864), 1.2630),
    ((61.2901, 3.7196, -5.3901), (61.4292, 2.2480, -4.9620), 1.8731),
    ((35.0831, -44.1164, 3.7933), (35.0232, -40.0716, 1.5901), 1.8645),
    ((22.7233, 20.0904, -46.6940), (23.0331, 14.9730, -42.5619), 2.0373),
    ((36.4612, 47.8580, 18.3852), (36.2715, 50.5065, 21.2231), 1.4146),
    ((90.8027, -2.0831, 1.4410), (91.1528, -1.6435, 0.0447), 1.4441),
    ((90.9257, -0.5406, -0.9208), (88.6381, -0.8985, -0.7239), 1.5381),
    ((6.7747, -0.2908, -2.4247), (5.8714, -0.0985, -2.2286), 0.6377),
    ((2.0776, 0.0795, -1.1350), (0.9033, -0.0636, -0.5514), 0.9082),
]


@pytest.mark.parametrize(("lab1", "lab2", "expected"), SHARMA_PAIRS)
def test_ciede2000_matches_sharmas_test_pairs(lab1, lab2, expected):
    assert colours.ciede2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)
    assert colours.ciede2000(lab2, lab1) == pytest.approx(expected, abs=1e-4)  # symmetric


def test_lab_and_cvd_simulation_on_known_colours():
    assert colours.srgb_to_lab((255, 255, 255)) == pytest.approx((100, 0, 0), abs=0.01)
    assert colours.srgb_to_lab((255, 0, 0)) == pytest.approx((53.24, 80.09, 67.20), abs=0.05)
    # a dichromat sees grey as grey (the matrices' rows sum to 1) and red and green far closer than normal vision
    assert colours.simulate_cvd((128, 128, 128), "deuteranopia") == pytest.approx((128, 128, 128), abs=1)
    red, green = (213, 94, 0), (0, 158, 115)
    normal = colours.ciede2000(colours.srgb_to_lab(red), colours.srgb_to_lab(green))
    for kind in ("protanopia", "deuteranopia"):
        seen = colours.ciede2000(*(colours.srgb_to_lab(colours.simulate_cvd(c, kind)) for c in (red, green)))
        assert seen < normal


# Measured before issue 46: rewards 12.65 (normal), 2.53 / 1.37 / 5.83 (deuteranopia / protanopia / tritanopia);
# runs 9.37 (normal), 1.43 / 2.04 / 4.95.
@pytest.mark.parametrize(("palette", "members", "normal", "dichromat"), [(REWARD_PALETTE, 10, 14.0, 10.0),
                                                                       (RUN_PALETTE, 8, 17.0, 13.0)])
def test_palettes_keep_their_colours_apart_also_for_colour_blind_eyes(palette, members, normal, dichromat):
    assert len(palette) >= members and len(set(palette)) == len(palette)
    assert colours.min_distance(palette)[0] >= normal, colours.min_distance(palette)
    for kind in colours.CVD_MATRICES:
        assert colours.min_distance(palette, kind)[0] >= dichromat, (kind, colours.min_distance(palette, kind))


@pytest.mark.parametrize("page", [(255, 255, 255), (14, 17, 23)])  # Streamlit's light and dark backgrounds
def test_every_palette_colour_stands_out_from_both_page_backgrounds(page):
    for c in (*REWARD_PALETTE, *RUN_PALETTE):
        assert colours.ciede2000(colours.srgb_to_lab(colours.hex_rgb(c)), colours.srgb_to_lab(page)) >= 20, c
