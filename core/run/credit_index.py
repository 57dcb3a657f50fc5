"""The credit file's index in its footer (schema 3: zstd-compressed JSON; schema 2: JSON): packed, unpacked and
checked before a reader trusts it (BadIndex)."""

from __future__ import annotations

import base64
import json
import math

import pyarrow as pa

from core.run.schema import SUMMARY_STATS

ZSTD_INDEX = b"zstd:"  # schema 3's index: b"zstd:<JSON bytes>:<base64 of the zstd-compressed JSON>"


def pack_index(index: dict) -> bytes:
    """The index as the metadata value of schema 3: its JSON compressed with zstd, in base64 behind b"zstd:" and
    the JSON's length (a real step's JSON of 21 KB takes 5.5 KB; the metadata stays text)."""
    raw = json.dumps(index, separators=(",", ":")).encode()
    return ZSTD_INDEX + str(len(raw)).encode() + b":" + base64.b64encode(pa.compress(raw, codec="zstd", asbytes=True))


MAX_INDEX_BYTES = 64 * 2**20  # the most JSON a footer's index may declare (a real step's: 21 KB; 64 MiB is ~1M pairs)


class BadIndex(ValueError):
    """A step's footer index that cannot be trusted: not decodable, not of the index's shape, or a value out of
    range (the readers skip the step with one warning naming the file; docs/CONTRACTS.md, "Credit map, schema 3")."""


def unpack_index(value: bytes) -> dict:
    """`pack_index` undone; plain JSON (schema 2's index) read as it is. BadIndex when it is neither, when the
    declared JSON length is not a whole number of at most MAX_INDEX_BYTES (nothing larger is allocated), or when the
    JSON nests too deep to parse."""
    if value.startswith(ZSTD_INDEX):
        size, _, data = value[len(ZSTD_INDEX):].partition(b":")
        if not size.isdigit() or int(size) > MAX_INDEX_BYTES:
            raise BadIndex(f"the index declares {size[:20].decode(errors='replace')!r} bytes of JSON; "
                           f"at most {MAX_INDEX_BYTES} are read")
        try:
            value = pa.decompress(base64.b64decode(data, validate=True), decompressed_size=int(size), codec="zstd",
                                  asbytes=True)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise BadIndex(f"the index does not decompress ({exc})") from None
    try:
        index = json.loads(value)
    except RecursionError:
        raise BadIndex("the index nests too deep to be an index") from None
    except ValueError as exc:  # not JSON, not UTF-8, or an integer of more than 4300 digits
        raise BadIndex(f"the index is not JSON ({exc})") from None
    return index


def _ints_in(values: list, lo: int, hi: int) -> bool:
    """Every value a whole number (not a bool) in [lo, hi)."""
    return not values or ({type(v) for v in values} == {int} and lo <= min(values) and max(values) < hi)


def _numbers(values: list) -> bool:
    """Every value null or a finite number (an int within float's range; a bool is not a number)."""
    types = {type(v) for v in values}
    if not types <= {int, float, type(None)}:
        return False
    ints = [v for v in values if type(v) is int] if int in types else []
    floats = [v for v in values if type(v) is float] if float in types else []
    return (not ints or -2**1000 < min(ints) and max(ints) < 2**1000) and all(map(math.isfinite, floats))


def _int_list(index: dict, name: str, n: int | None, lo: int, hi: int) -> list:
    values = index.get(name)
    if not isinstance(values, list) or (n is not None and len(values) != n):
        raise BadIndex(f"index field {name!r} is not a list of {n if n is not None else 'some'} values")
    if not _ints_in(values, lo, hi):
        raise BadIndex(f"index field {name!r} holds a value that is not a whole number in [{lo}, {hi})")
    return values


def _matrix(index: dict, name: str, S: int, K: int, kind: str) -> None:
    """index[name] is S rows of K values: "number" (finite int/float, or null), "int" (whole, 0 <= v < 2**31) or
    "bool"."""
    rows = index.get(name)
    if not isinstance(rows, list) or len(rows) != S or not all(type(r) is list and len(r) == K for r in rows):
        raise BadIndex(f"index field {name!r} is not {S} rows of {K} values")
    flat = [v for r in rows for v in r]
    if kind == "bool":
        ok = not flat or {type(v) for v in flat} == {bool}
    elif kind == "int":
        ok = _ints_in(flat, 0, 2**31)
    else:
        ok = _numbers(flat)
    if not ok:
        raise BadIndex(f"index field {name!r} holds a value that is not a {kind} in range")


def check_index(index, num_rows: int, num_row_groups: int) -> dict:
    """The index when it is of `_index`'s shape with values in range, else BadIndex naming the first field that is
    not: `rewards` K distinct strings; `sample`, `group`, `prompt_key`, `length`, `row_group`, `abs_token_adv_max`
    S values each (sample and group whole numbers in [0, 2**31) and [-2**31, 2**31), a length at most the file's
    `num_rows`, a row group below `num_row_groups`); the per-pair fields S rows of K; `distance_summary` reward ->
    "in" / "out" -> SUMMARY_STATS numbers (or null). So nothing a reader builds from it is larger than the file."""
    if not isinstance(index, dict):
        raise BadIndex("the index is not a JSON object")
    names = index.get("rewards")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise BadIndex("index field 'rewards' is not a list of distinct names")
    S = len(_int_list(index, "sample", None, 0, 2**31))
    K = len(names)
    _int_list(index, "group", S, -2**31, 2**31)
    _int_list(index, "length", S, 0, num_rows + 1)
    _int_list(index, "row_group", S, 0, max(num_row_groups, 1))
    keys = index.get("prompt_key")
    if not isinstance(keys, list) or len(keys) != S or not all(isinstance(k, str) for k in keys):
        raise BadIndex(f"index field 'prompt_key' is not a list of {S} strings")
    adv = index.get("abs_token_adv_max")
    if not isinstance(adv, list) or len(adv) != S or not _numbers(adv):
        raise BadIndex(f"index field 'abs_token_adv_max' is not a list of {S} numbers")
    for name in ("score", "group_adv", "abs_credit_max", "weight_sum", "weight_in_span"):
        _matrix(index, name, S, K, "number")
    _matrix(index, "span_tokens", S, K, "int")
    _matrix(index, "distance_skipped", S, K, "bool")
    _matrix(index, "distance_computed", S, K, "bool")
    summary = index.get("distance_summary")
    if not isinstance(summary, dict) or not all(
            isinstance(parts, dict) and all(w in ("in", "out") and isinstance(st, dict) and set(st) <= set(SUMMARY_STATS)
                                            and _numbers(list(st.values())) for w, st in parts.items())
            for parts in summary.values()):
        raise BadIndex("index field 'distance_summary' is not reward -> in / out -> statistics")
    return index
