"""The credit map of schema 2 (`core.run.credit_format`): values round-trip, one sample is read without the
rest of the step, the index comes from the footer, and schema-1 stores (the shipped runs) open as they are."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from helpers import write_schema_1

from core.run import credit_format, credit_write, record
from core.run.store import CREDIT_COLUMNS, RunStore, RunWriter
from core.tools.bench_store import make_record


def _equal(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns) == list(CREDIT_COLUMNS) and len(a) == len(b)
    for col in a.columns:
        if isinstance(a[col].dtype, pd.CategoricalDtype) and isinstance(b[col].dtype, pd.CategoricalDtype):
            x = a[col].cat.rename_categories(a[col].cat.categories.astype(str))  # compare codes, not 655k strings
            y = b[col].cat.remove_unused_categories()
            y = y.cat.rename_categories(y.cat.categories.astype(str))
            y = pd.Categorical(y, categories=x.cat.categories)
            assert (x.cat.codes.to_numpy() == y.codes).all() and (y.codes >= 0).all(), col
            continue
        x, y = a[col].to_numpy(), b[col].to_numpy()
        if x.dtype.kind == "f" or y.dtype.kind == "f":
            assert np.array_equal(x.astype(np.float32), y.astype(np.float32), equal_nan=True), col
        else:
            assert (np.asarray(x, dtype=object) == np.asarray(y, dtype=object)).all(), col


def _written(tmp_path, rec):
    w = RunWriter.create(tmp_path, "r", {"steps": 1, "reward_names": rec.reward_names})
    path = w.write_credit(rec.step, record.credit_step(rec))
    w.append_metrics({"step": rec.step})
    return RunStore(w.path), path


def test_a_gpu_sized_step_writes_and_reads_back_equal(tmp_path):
    rec = make_record(128, 1024, 5)  # 655,360 (sample, reward, token) cells: schema 1 could not write it
    store, path = _written(tmp_path, rec)
    _equal(store.credit(1), record.credit_frame(rec))
    assert pq.ParquetFile(path).metadata.num_row_groups > 1 and store.warnings == []


def test_one_sample_or_reward_is_read_from_its_row_group_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(credit_write, "ROW_GROUP_ROWS", 4096)  # ~3 samples a row group
    rec = make_record(64, 512, 3, group_size=8, seed=1)
    store, path = _written(tmp_path, rec)
    whole = store.credit(1)
    groups = pq.ParquetFile(path).metadata.num_row_groups
    read = []
    real = pq.ParquetFile.read_row_groups
    monkeypatch.setattr(pq.ParquetFile, "read", lambda *a, **k: pytest.fail("a whole-step read"))
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups",
                        lambda self, rgs, *a, **k: read.append(list(rgs)) or real(self, rgs, *a, **k))
    one = store.credit_tokens(1, samples=[37])
    _equal(one, whole[whole["sample"] == 37].reset_index(drop=True))
    pair = store.credit_tokens(1, samples=[37], rewards=[rec.reward_names[2]])
    _equal(pair, whole[(whole["sample"] == 37) & (whole["reward"] == rec.reward_names[2])].reset_index(drop=True))
    assert len(read) == 2 and all(len(r) == 1 for r in read) and groups > 16
    read.clear()
    index = store.credit_index(1)  # the footer alone
    assert read == []
    assert len(index) == 64 * 3 and index["length"].eq(512).all()
    first = index.groupby(["sample", "reward"], sort=False).first().reset_index()
    expect = whole.groupby(["sample", "reward"], sort=False, observed=True).first().reset_index()
    assert np.array_equal(first["score"], expect["score"], equal_nan=True)
    assert (first["applicable"] == expect["score"].notna()).all()
    assert (first["group"] == expect["group"]).all() and (first["prompt_key"] == expect["prompt_key"].astype(str)).all()
    big = whole.assign(c=whole["credit"].abs()).groupby(["sample", "reward"], sort=False, observed=True)["c"].max()
    np.testing.assert_allclose(first["abs_credit_max"], big.to_numpy(), rtol=1e-6)
    np.testing.assert_allclose(index.groupby("sample")["abs_token_adv_max"].first(),
                               whole.groupby("sample")["token_adv"].apply(lambda x: x.abs().max()), rtol=1e-6)


def test_a_long_frame_round_trips_through_the_writer(tmp_path):
    rec = make_record(8, 40, 3, group_size=4, seed=2)
    frame = record.credit_frame(rec)
    frame = frame[frame["t"] < np.where(frame["sample"] % 2 == 0, 40, 25)]  # responses of different lengths
    w = RunWriter.create(tmp_path, "r", {"steps": 1, "reward_names": rec.reward_names})
    w.write_credit(1, frame.reset_index(drop=True))
    w.append_metrics({"step": 1})
    _equal(RunStore(w.path).credit(1), frame.reset_index(drop=True))
    assert RunStore(w.path).credit_index(1)["length"].tolist()[:6] == [40] * 3 + [25] * 3


def test_a_sample_subset_keeps_its_batch_indices(tmp_path):
    rec = make_record(16, 12, 2, group_size=4, seed=3)
    w = RunWriter.create(tmp_path, "r", {"steps": 1, "reward_names": rec.reward_names})
    w.write_credit(1, record.credit_step(rec, samples=[4, 5, 6, 7, 12]))
    w.append_metrics({"step": 1})
    store = RunStore(w.path)
    whole = record.credit_frame(rec)
    _equal(store.credit(1), whole[whole["sample"].isin([4, 5, 6, 7, 12])].reset_index(drop=True))
    assert sorted(set(store.credit_index(1)["sample"])) == [4, 5, 6, 7, 12]


@pytest.mark.parametrize("with_skipped", [True, False])
def test_schema_1_stores_open_as_they_are(tmp_path, with_skipped):
    """Runs written in schema 1 (the shipped runs were, until `mrtpo upgrade`) are read as they are, by every reader;
    the oldest files have no `js_skipped` column (read as False)."""
    rec = make_record(12, 20, 3, group_size=4, seed=6)
    w = RunWriter.create(tmp_path, "r", {"steps": 1, "reward_names": rec.reward_names})
    w.append_metrics({"step": 1})
    frame = record.credit_frame(rec)
    if not with_skipped:
        frame["distance_skipped"] = False
    path = write_schema_1(w.path, frame, with_skipped)
    store = RunStore(w.path)
    assert pq.ParquetFile(path).metadata.metadata[b"mrtpo_schema_version"] == b"1"
    whole = store.credit(1)
    _equal(whole, frame)
    index = store.credit_index(1)
    sample = int(whole["sample"].iloc[-1])
    _equal(store.credit_tokens(1, samples=[sample]), whole[whole["sample"] == sample].reset_index(drop=True))
    assert len(index) == whole.groupby(["sample", "reward"]).ngroups and store.warnings == []
    assert (index["length"] == whole.groupby(["sample", "reward"], sort=False)["t"].size().to_numpy()).all()


def test_the_size_formula_in_the_contract_holds(tmp_path):
    """Rows = sum over stored samples of K x length; the file's rows and the index agree."""
    rec = make_record(12, 30, 4, group_size=4, seed=4)
    store, path = _written(tmp_path, rec)
    assert pq.ParquetFile(path).metadata.num_rows == 12 * 30 * 4 == record.credit_step(rec).n_cells
    assert credit_format.read_index(pq.ParquetFile(path))["rewards"] == rec.reward_names


def test_the_index_sums_and_the_distance_summary_match_the_tokens(tmp_path):
    rec = make_record(16, 40, 3, group_size=4, seed=5)
    store, _ = _written(tmp_path, rec)
    whole = store.credit(1)
    index = store.credit_index(1)
    w = whole.assign(w_in=whole["weight"] * whole["in_span"], span=whole["in_span"].astype(int))
    g = w.groupby(["sample", "reward"], sort=False, observed=True)
    np.testing.assert_allclose(index["weight_sum"], g["weight"].sum().to_numpy(), rtol=1e-5)
    np.testing.assert_allclose(index["weight_in_span"], g["w_in"].sum().to_numpy(), rtol=1e-5)
    assert (index["span_tokens"].to_numpy() == g["span"].sum().to_numpy()).all()
    assert (index["distance_computed"].to_numpy() == g["distance"].apply(lambda x: x.notna().any()).to_numpy()).all()
    summary = store.credit_summary(1)
    for r in summary.itertuples():
        d = whole.loc[(whole["reward"] == r.reward) & (whole["in_span"] == (r.where == "in")), "distance"].dropna()
        assert r.n == len(d) and r.tokens == ((whole["reward"] == r.reward) & (whole["in_span"] == (r.where == "in"))).sum()
        np.testing.assert_allclose([r.mean, r.median, r.q1, r.max], [d.mean(), d.median(), d.quantile(0.25), d.max()],
                                   rtol=1e-5)
    v1 = RunWriter.create(tmp_path, "v1", {"steps": 1, "reward_names": rec.reward_names})
    v1.append_metrics({"step": 1})
    write_schema_1(v1.path, whole)
    v1 = RunStore(v1.path)  # schema 1: the same index and summary, from the whole file
    pd.testing.assert_frame_equal(v1.credit_summary(1), summary, check_exact=False, rtol=1e-5)
    pd.testing.assert_frame_equal(v1.credit_index(1), index, check_exact=False, rtol=1e-5, check_dtype=False)


def test_bench_store_prints_a_row_per_size_and_refuses_bad_sizes(capsys):
    """`mrtpo bench store` at a small size: a table row with every column measured; a bad size is one line,
    exit 2."""
    from core.tools import bench_store

    assert bench_store.main(["--sizes", "8x16x2"]) == 0
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if line.startswith("| 8x16x2")]
    assert len(row) == 1 and " - " not in row[0] and "Error" not in row[0]
    assert bench_store.main(["--sizes", "8x16"]) == 2
    assert "is not samples x tokens x rewards" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.subprocess
def test_bench_store_pages_prints_every_page_of_a_200_step_run(capsys):
    """`mrtpo bench store --pages` at a small size writes a 200-step run and prints a row per page with its server
    seconds, memory and Parquet rows read: the sample pages read one step's row group (here the whole small step),
    the others no credit rows at all."""
    from core.tools import bench_store

    assert bench_store.main(["--sizes", "8x16x2", "--pages"]) == 0
    out = capsys.readouterr().out
    titles = set(bench_store.PAGE_TITLES.values())
    lines = [line.split(" | ") for line in out.splitlines() if line.startswith("| 8x16x2 | ")]
    rows = {cells[1]: cells for cells in lines if cells[1] in titles}
    assert set(rows) == titles and len(rows) == 5, out
    for title, cells in rows.items():
        assert all(c.strip() not in ("-", "") for c in cells[2:6]), cells  # seconds and memory measured
        read = int(cells[6].replace(",", ""))
        assert read == (8 * 16 * 2 if title in ("Token credit", "JS divergence") else 0), (title, read)
    (run,) = [cells for cells in lines if len(cells) == 6]  # the run's row: written, on disk, index, sample, heatmap
    assert run[4].endswith("(32)")  # one sample's read: its 16 tokens x 2 rewards


# ------------------------------------------------------------------- schema 3: credit and token text given back


def test_credit_scales_by_hand():
    """credit = weight x c per (sample, reward) in float32; a pair with no such c makes the whole step store credit."""
    w = np.array([[[0.5, 2.0, 0.0], [1.0, 1.0, 1.0]]], dtype=np.float32)  # (S=1, K=2, T=3)
    c = np.array([[np.float32(0.3), np.float32(-1.7)]], dtype=np.float32)
    credit = w * c[:, :, None]
    cells = np.ones(w.shape, dtype=bool)
    scale = credit_format.credit_scales(w, credit, cells)
    assert scale is not None and scale.dtype == np.float32
    assert np.array_equal(w * scale[:, :, None], credit)
    assert scale[0, 1] == np.float32(-1.7)  # weight 1: the scale is the credit itself
    # all weights 0 and credit 0: scale 0; a pair that is not weight x one number: None
    zero = credit_format.credit_scales(np.zeros((1, 1, 3), np.float32), np.zeros((1, 1, 3), np.float32),
                                       np.ones((1, 1, 3), bool))
    assert zero is not None and zero[0, 0] == 0
    bad = credit.copy()
    bad[0, 0, 1] += 0.25
    assert credit_format.credit_scales(w, bad, cells) is None
    # the cells past a sample's length are not looked at; NaN credit where the weight is NaN is kept
    short = cells.copy()
    short[0, 0, 2] = False
    odd = credit.copy()
    odd[0, 0, 2] = 99.0
    assert credit_format.credit_scales(w, odd, short) is not None
    wn = w.copy()
    wn[0, 1, 0] = np.nan
    assert credit_format.credit_scales(wn, wn * c[:, :, None], cells) is not None


def test_the_trainers_credit_is_weight_times_the_pairs_scale_bitwise():
    """`mrtpo_token_advantages` rounds credit once after the pair's scale, so the writer never stores it."""
    import torch

    from core.algos.advantages import mrtpo_token_advantages

    g = torch.Generator().manual_seed(0)
    rewards = torch.randint(0, 2, (16, 4), generator=g).float()
    rewards[:4, 3] = float("nan")
    weights = torch.rand(16, 4, 50, generator=g) * 5
    weights[:, :, 40:] = 0.0
    for w_k in (None, [1.0, 0.5, 2.0, 0.3]):
        _, credit = mrtpo_token_advantages(rewards, weights, group_size=4, weights=w_k)
        w, cr = weights.numpy(), credit.numpy()
        scale = credit_format.credit_scales(w, cr, np.ones(w.shape, bool))
        assert scale is not None and np.array_equal(w * scale[:, :, None], cr)


def test_tokens_are_slices_needs_contiguous_ranges_and_the_same_text():
    rec = make_record(4, 10, 2, group_size=2, seed=6)
    cs = record.credit_step(rec)
    assert credit_format.tokens_are_slices(cs)
    gap = record.credit_step(rec)
    gap.start = gap.start.copy()
    gap.start[3] += 1  # a range that does not start where the one before ended
    gap.token = list(gap.token)
    gap.token[3] = gap.token[3][1:]
    assert not credit_format.tokens_are_slices(gap)
    other = record.credit_step(rec)
    other.token = list(other.token)
    other.token[5] = "X" * len(other.token[5])  # same length, other text
    assert not credit_format.tokens_are_slices(other)


def test_schema_3_leaves_out_what_it_gives_back_and_keeps_what_it_cannot(tmp_path):
    rec = make_record(8, 30, 3, group_size=4, seed=7)
    store, path = _written(tmp_path, rec)
    names = pq.ParquetFile(path).schema_arrow.names
    assert "credit" not in names and "token" not in names and "start" not in names and "credit_scale" in names
    assert pq.ParquetFile(path).metadata.metadata[b"mrtpo_schema_version"] == b"3"
    _equal(store.credit(1), record.credit_frame(rec))
    _equal(store.credit_tokens(1, samples=[5], rewards=[rec.reward_names[1]]),
           record.credit_frame(rec).query(f"sample == 5 and reward == '{rec.reward_names[1]}'").reset_index(drop=True))
    # credit that is not weight x one number per pair, token text that is not the response's slice: both stored
    odd = record.credit_frame(rec)
    odd["credit"] = odd["credit"] + np.float32(0.001) * odd["t"].astype(np.float32)
    odd["token"] = odd["token"].astype(str).str.upper()
    w = RunWriter.create(tmp_path, "odd", {"steps": 1, "reward_names": rec.reward_names})
    path = w.write_credit(1, odd)
    w.append_metrics({"step": 1})
    assert {"credit", "token", "start"} <= set(pq.ParquetFile(path).schema_arrow.names)
    _equal(RunStore(w.path).credit(1), odd)


def _as_schema_2(path: Path) -> None:
    """Rewrite a schema-3 file as schema 2 wrote it: `credit`, `token` and `start` stored, no `credit_scale`."""
    import pyarrow as pa

    pf = pq.ParquetFile(path)
    meta = dict(pf.metadata.metadata)
    long = credit_format.read_long(pf, 1)
    tab = pf.read()
    first = (tab["reward"].cast(pa.string()).to_numpy(zero_copy_only=False) == meta_rewards(meta)[0])
    tab = tab.drop(["credit_scale"]).append_column("credit", pa.array(long["credit"].to_numpy(np.float32)))
    tab = tab.append_column("token", pa.array(np.where(first, long["token"].astype(str), None).tolist(), pa.string()))
    tab = tab.append_column("start", pa.array(long["start"].to_numpy(np.int32), mask=~first))
    meta[b"mrtpo_schema_version"] = b"2"
    meta[credit_format.INDEX_KEY] = json.dumps(credit_format.unpack_index(meta[credit_format.INDEX_KEY])).encode()
    with pq.ParquetWriter(path, tab.schema, store_schema=False) as out:
        out.write_table(tab)
        out.add_key_value_metadata(meta)


def meta_rewards(meta: dict) -> list[str]:
    return credit_format.unpack_index(meta[credit_format.INDEX_KEY])["rewards"]


def test_schema_2_files_open_as_they_are(tmp_path):
    """Runs written before schema 3 (schema 2: credit, token text and start on every file) read the same."""
    rec = make_record(8, 20, 3, group_size=4, seed=8)
    store, path = _written(tmp_path, rec)
    _as_schema_2(path)
    pf = pq.ParquetFile(path)
    assert pf.metadata.metadata[b"mrtpo_schema_version"] == b"2" and "credit" in pf.schema_arrow.names
    store = RunStore(store.path)
    _equal(store.credit(1), record.credit_frame(rec))
    _equal(store.credit_tokens(1, samples=[3]), record.credit_frame(rec).query("sample == 3").reset_index(drop=True))
    assert len(store.credit_index(1)) == 8 * 3 and store.warnings == []


def test_check_index_takes_a_written_index_and_refuses_each_field_out_of_shape_or_range(tmp_path):
    """Issue 45: the footer index is checked before any reader builds from it (`credit_format.check_index`)."""
    from mrtpo_viz.tools.synthetic import synthetic_credit_frame

    w = RunWriter.create(tmp_path, "r", {"steps": 1, "reward_names": ["a", "b"]})
    path = w.write_credit(1, synthetic_credit_frame(1, 8, 6, ["a", "b"], 4, 0, True))
    pf = pq.ParquetFile(path)
    good = credit_format.read_index(pf)
    rows, groups = pf.metadata.num_rows, pf.metadata.num_row_groups
    assert credit_format.check_index(good, rows, groups) is good
    bad = {
        "sample is a bool": {"sample": [True, *good["sample"][1:]]},
        "length past the file's rows": {"length": [rows + 1, *good["length"][1:]]},
        "row group past the file's": {"row_group": [groups, *good["row_group"][1:]]},
        "a group of 2**31": {"group": [2**31, *good["group"][1:]]},
        "one sample fewer in prompt_key": {"prompt_key": good["prompt_key"][1:]},
        "score row of K - 1": {"score": [good["score"][0][1:], *good["score"][1:]]},
        "score of 10**400": {"score": [[10**400] * 2, *good["score"][1:]]},
        "weight_sum infinite": {"weight_sum": [[float("inf")] * 2, *good["weight_sum"][1:]]},
        "span_tokens negative": {"span_tokens": [[-1, 0], *good["span_tokens"][1:]]},
        "distance_skipped a number": {"distance_skipped": [[0, 1], *good["distance_skipped"][1:]]},
        "distance_summary a list": {"distance_summary": [1, 2]},
        "a statistic as text": {"distance_summary": {"a": {"in": {"n": "3"}}}},
        "rewards repeated": {"rewards": ["a", "a"]},
    }
    taken = []
    for case, change in bad.items():
        try:
            credit_format.check_index({**good, **change}, rows, groups)
            taken.append(case)
        except credit_format.BadIndex:
            pass
    assert not taken
    for value in (b"zstd:-5:AAAA", b"zstd:999999999999:AAAA", b"[" * 100_000, b"[" + b"9" * 5000 + b"]"):
        with pytest.raises(credit_format.BadIndex):
            credit_format.unpack_index(value)
