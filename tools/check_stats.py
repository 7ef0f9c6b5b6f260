#!/usr/bin/env python3
"""Independent check of `boxlayer stats --json` (docs/stats.md).

Usage: tools/check_stats.py OUT_DIR STATS_JSON

Recomputes every statistic from the shards under OUT_DIR with pyarrow and numpy alone (no
boxlayer code): finds the complete sequence folders (`boxes.parquet` and `_SUCCESS`, not
`.partial`/`.old`) and the incomplete ones, reads each folder's platform from `manifest.json`,
then the frames, boxes, tracks and the sampled frames' kept points, and compares with the JSON:
counts, histograms and class/flag/status/origin tables exactly, means and fractions to 1e-9.
Prints each mismatch by its JSON path and exits 1 if there is any.
"""

import json
import math
import os
import sys

import numpy as np
import pyarrow.parquet as pq

TOLERANCE = 1e-9
RHO_BINS, THETA_BINS, ELEVATION_BINS = 9, 18, 36
OBJECT_LABELS = ["0", "1-3", "4-6", "7-9", "10-12", "13+"]
POINT_LABELS = ["0-99", "100-299", "300-499", "500-699", "700-899", "900+"]
TRACK_LABELS = ["1", "2-4", "5-9", "10-19", "20-49", "50+"]


def subdirs(path):
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    return [os.path.join(path, n) for n in names if os.path.isdir(os.path.join(path, n))]


def has(path, name):
    return os.path.isfile(os.path.join(path, name))


def temporary(path):
    name = os.path.basename(os.path.normpath(path))
    return name.endswith(".partial") or name.endswith(".old")


def complete(path):
    return has(path, "boxes.parquet") and has(path, "_SUCCESS") and not temporary(path)


def incomplete(path):
    name = os.path.basename(os.path.normpath(path))
    return name.endswith(".partial") or (has(path, "boxes.parquet") and not has(path, "_SUCCESS"))


def walk(path, keep):
    """Folders at or under `path` (two levels) that `keep` accepts, not descending into sequences."""
    if complete(path):
        return [path] if keep is complete else []
    if keep(path):
        return [path]
    out = []
    for a in subdirs(path):
        if complete(a) or incomplete(a):
            if keep(a):
                out.append(a)
            continue
        out.extend(b for b in subdirs(a) if keep(b))
    return out


def platform_of(seq):
    try:
        with open(os.path.join(seq, "manifest.json")) as f:
            manifest = json.load(f)
        if "platform" in manifest:
            return manifest["platform"]
    except FileNotFoundError:
        pass
    return os.path.basename(os.path.dirname(os.path.normpath(seq)))


def binned(values, width, bins):
    return np.clip(np.floor(values / width), 0, bins - 1).astype(np.int64)


def object_bin(n):
    return 0 if n == 0 else 5 if n >= 13 else (n - 1) // 3 + 1


def point_bins(p):
    return np.where(p < 100, 0, np.where(p >= 900, 5, (p - 100) // 200 + 1))


def track_bins(n):
    edges = [(1, 0), (4, 1), (9, 2), (19, 3), (49, 4)]
    out = np.full(len(n), 5, dtype=np.int64)
    for upper, b in reversed(edges):
        out[n <= upper] = b
    return out


def sample_positions(n, k):
    if n <= k:
        return list(range(n))
    if k == 0:
        return []
    if k == 1:
        return [0]
    out = []
    for i in range(k):
        p = i * (n - 1) // (k - 1)
        if not out or out[-1] != p:
            out.append(p)
    return out


def new_acc():
    return {
        "sequences": 0, "frames": 0, "boxes": 0, "tracks": 0,
        "objects_sum": 0, "objects": np.zeros(6, np.int64),
        "points_sum": 0, "points": np.zeros(6, np.int64),
        "polar": np.zeros((RHO_BINS, THETA_BINS), np.int64), "non_finite": 0,
        "frames_with_points": 0, "frames_used": 0, "points_used": 0, "points_skipped": 0,
        "elevation": np.zeros(ELEVATION_BINS, np.int64),
        "boxes_by_class": {}, "tracks_by_class": {},
        "track_sum": 0, "track_lengths": np.zeros(6, np.int64),
        "flags": {}, "review_status": {}, "origin": {},
    }


def add_counts(into, keys):
    for k in keys:
        into[k] = into.get(k, 0) + 1


def merge(a, b):
    for k, v in b.items():
        if isinstance(v, dict):
            for kk, vv in v.items():
                a[k][kk] = a[k].get(kk, 0) + vv
        else:
            a[k] = a[k] + v


def sequence_acc(seq, point_frames):
    acc = new_acc()
    acc["sequences"] = 1
    frames = pq.read_table(os.path.join(seq, "frames.parquet")).to_pydict()
    boxes = pq.read_table(os.path.join(seq, "boxes.parquet")).to_pydict()
    tracks = pq.read_table(os.path.join(seq, "tracks.parquet")).to_pydict()
    n_boxes = len(boxes["frame_index"])
    acc["frames"] = len(frames["frame_index"])
    acc["boxes"] = n_boxes
    acc["tracks"] = len(tracks["track_id"])

    per_frame = {}
    for f in boxes["frame_index"]:
        per_frame[f] = per_frame.get(f, 0) + 1
    for f in frames["frame_index"]:
        n = per_frame.get(f, 0)
        acc["objects_sum"] += n
        acc["objects"][object_bin(n)] += 1

    inside = np.asarray(boxes["num_points_inside"], dtype=np.int64)
    acc["points_sum"] = int(inside.sum())
    np.add.at(acc["points"], point_bins(inside), 1)

    rho = np.asarray(boxes["bev_range_m"], dtype=np.float64)
    pitch = np.asarray(boxes["relative_pitch_rad"], dtype=np.float64)
    finite = np.isfinite(rho) & np.isfinite(pitch)
    acc["non_finite"] = int((~finite).sum())
    r = binned(rho[finite], 10.0, RHO_BINS)
    t = binned(pitch[finite] * 180.0 / math.pi + 90.0, 10.0, THETA_BINS)
    np.add.at(acc["polar"], (r, t), 1)

    add_counts(acc["boxes_by_class"], boxes["class"])
    add_counts(acc["review_status"], boxes["review_status"])
    add_counts(acc["origin"], boxes["origin"])
    for flags in boxes["flags"]:
        add_counts(acc["flags"], sorted(set(flags or [])))

    lengths = np.asarray(tracks["num_boxes"], dtype=np.int64)
    acc["track_sum"] = int(lengths.sum())
    np.add.at(acc["track_lengths"], track_bins(lengths), 1)
    add_counts(acc["tracks_by_class"], tracks["class"])

    # Point elevation: evenly spaced frames with kept points, rotated by normalized_from_sensor.
    kept = [
        (fi, m, pf)
        for fi, m, k, pf in zip(
            frames["frame_index"], frames["normalized_from_sensor"], frames["num_points_kept"], frames["points_file"]
        )
        if k > 0 and pf is not None
    ]
    kept.sort(key=lambda x: x[0])
    acc["frames_with_points"] = len(kept)
    chosen = [kept[i] for i in sample_positions(len(kept), point_frames)]
    acc["frames_used"] = len(chosen)
    by_file = {}
    for fi, m, pf in chosen:
        by_file.setdefault(pf, []).append((fi, m))
    for pf, wanted in sorted(by_file.items()):
        table = pq.read_table(os.path.join(seq, pf), columns=["frame_index", "x_sensor_m", "y_sensor_m", "z_sensor_m"])
        fidx = table.column("frame_index").to_numpy()
        xs = table.column("x_sensor_m").to_numpy().astype(np.float64)
        ys = table.column("y_sensor_m").to_numpy().astype(np.float64)
        zs = table.column("z_sensor_m").to_numpy().astype(np.float64)
        for fi, m in wanted:
            sel = fidx == fi
            x, y, z = xs[sel], ys[sel], zs[sel]
            skip = ~(np.isfinite(x) & np.isfinite(y) & np.isfinite(z)) | ((x == 0) & (y == 0) & (z == 0))
            x, y, z = x[~skip], y[~skip], z[~skip]
            if m is not None:
                gx = m[0] * x + m[1] * y + m[2] * z
                gy = m[4] * x + m[5] * y + m[6] * z
                gz = m[8] * x + m[9] * y + m[10] * z
            else:
                gx, gy, gz = x, y, z
            elevation = np.arctan2(gz, np.hypot(gx, gy)) * 180.0 / math.pi
            ok = np.isfinite(elevation)
            acc["points_skipped"] += int(skip.sum() + (~ok).sum())
            acc["points_used"] += int(ok.sum())
            np.add.at(acc["elevation"], binned(elevation[ok] + 90.0, 5.0, ELEVATION_BINS), 1)
    return acc


def histogram(labels, counts):
    return {"labels": labels, "counts": [int(c) for c in counts]}


def fraction(count, total):
    return None if total == 0 else count / total


def mean(total, n):
    return None if n == 0 else total / n


def expected_stats(acc):
    rho_labels = [f"{10 * i}-{10 * i + 10}" for i in range(RHO_BINS - 1)] + [f"{10 * (RHO_BINS - 1)}+"]
    theta_labels = [f"{-90 + 10 * i}..{-80 + 10 * i}" for i in range(THETA_BINS)]
    elevation_labels = [f"{-90 + 5 * i}..{-85 + 5 * i}" for i in range(ELEVATION_BINS)]
    boxes = acc["boxes"]
    return {
        "sequences": acc["sequences"],
        "frames": acc["frames"],
        "boxes": boxes,
        "tracks": acc["tracks"],
        "objects_per_frame": {
            "mean": mean(acc["objects_sum"], acc["frames"]),
            "histogram": histogram(OBJECT_LABELS, acc["objects"]),
        },
        "points_per_box": {
            "mean": mean(acc["points_sum"], boxes),
            "histogram": histogram(POINT_LABELS, acc["points"]),
            "below_100": int(acc["points"][0]),
            "below_100_fraction": fraction(int(acc["points"][0]), boxes),
            "at_least_900": int(acc["points"][5]),
            "at_least_900_fraction": fraction(int(acc["points"][5]), boxes),
        },
        "target_polar": {
            "rho_labels": rho_labels,
            "theta_labels": theta_labels,
            "counts": [[int(c) for c in row] for row in acc["polar"]],
            "non_finite": acc["non_finite"],
        },
        "point_elevation": {
            "frames_with_points": acc["frames_with_points"],
            "frames_used": acc["frames_used"],
            "points_used": acc["points_used"],
            "points_skipped": acc["points_skipped"],
            "histogram": histogram(elevation_labels, acc["elevation"]),
        },
        "boxes_by_class": acc["boxes_by_class"],
        "tracks_by_class": acc["tracks_by_class"],
        "track_lengths": {
            "mean": mean(acc["track_sum"], acc["tracks"]),
            "histogram": histogram(TRACK_LABELS, acc["track_lengths"]),
        },
        "flags": {k: {"count": v, "fraction": fraction(v, boxes)} for k, v in acc["flags"].items()},
        "review_status": acc["review_status"],
        "origin": acc["origin"],
    }


def compare(path, expected, actual, problems):
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            problems.append(f"{path}: expected an object, found {actual!r}")
            return
        for k in sorted(set(expected) | set(actual)):
            if k not in actual:
                problems.append(f"{path}.{k}: missing (expected {expected[k]!r})")
            elif k not in expected:
                problems.append(f"{path}.{k}: unexpected (found {actual[k]!r})")
            else:
                compare(f"{path}.{k}", expected[k], actual[k], problems)
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            problems.append(f"{path}: expected {expected!r}, found {actual!r}")
            return
        for i, (e, a) in enumerate(zip(expected, actual)):
            compare(f"{path}[{i}]", e, a, problems)
    elif isinstance(expected, float):
        if not isinstance(actual, (int, float)) or isinstance(actual, bool) or abs(actual - expected) > TOLERANCE:
            problems.append(f"{path}: expected {expected!r}, found {actual!r}")
    elif expected is None or isinstance(expected, (int, str, bool)):
        if type(actual) is not type(expected) or actual != expected:
            problems.append(f"{path}: expected {expected!r}, found {actual!r}")
    else:
        problems.append(f"{path}: cannot compare {type(expected).__name__}")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir, json_path = sys.argv[1], sys.argv[2]
    with open(json_path) as f:
        stats = json.load(f)
    point_frames = stats["point_frames"]
    sequences = walk(out_dir, complete)
    skipped = walk(out_dir, incomplete)
    per_platform = {}
    total = new_acc()
    for seq in sequences:
        acc = sequence_acc(seq, point_frames)
        merge(per_platform.setdefault(platform_of(seq), new_acc()), acc)
        merge(total, acc)
    expected = {
        "input": stats.get("input"),
        "point_frames": point_frames,
        "incomplete_skipped": len(skipped),
        "platforms": {p: expected_stats(a) for p, a in per_platform.items()},
        "all": expected_stats(total),
    }
    problems = []
    compare("$", expected, stats, problems)
    for p in problems:
        print(f"mismatch: {p}")
    if problems:
        print(f"{json_path}: {len(problems)} mismatches against {out_dir}", file=sys.stderr)
        return 1
    print(
        f"{json_path}: every statistic matches ({len(sequences)} sequences, {total['frames']} frames, "
        f"{total['boxes']} boxes, {total['points_used']} points; {len(skipped)} incomplete folders skipped)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
