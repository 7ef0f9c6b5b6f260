#!/usr/bin/env python3
"""Vertical offsets of a box layer against the simulator's truth, by range (docs/pipeline.md,
"Vertical placement"): each row box of SHARDS/<platform>/<sequence>/boxes.parquet is matched to
the nearest truth box of its class in its frame (bird's-eye distance < 1 m for vehicles, 0.4 m
for pedestrians, in the frame's normalized frame) and its centre height minus the truth's is
reported (median, and the 90th percentile of its size), with pyarrow and numpy only.

    python3 tools/vertical_offsets.py LOGS SHARDS [SHARDS ...]

LOGS holds `<platform>/<sequence>_boxes_gt.parquet` as `boxlayer demo` writes it; each SHARDS
folder is one run's output over the same logs (e.g. with and without `stages.ground_contact`).
"""
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

RANGES = [(0, 20), (20, 35), (35, 80)]


def offsets(logs, shards, platform, sequence):
    truth = pq.read_table(Path(logs) / platform / f"{sequence}_boxes_gt.parquet",
                          columns=["frame_index", "class", "box_in_sensor"]).to_pydict()
    by_frame = defaultdict(list)
    for f, c, b in zip(truth["frame_index"], truth["class"], truth["box_in_sensor"]):
        by_frame[f].append((c, b))
    seq = Path(shards) / platform / sequence
    rows = pq.read_table(seq / "boxes.parquet", columns=["frame_index", "class", "box_sensor"]).to_pydict()
    frames = pq.read_table(seq / "frames.parquet", columns=["frame_index", "normalized_from_sensor"]).to_pydict()
    norm = {f: np.array(m, dtype=float).reshape(4, 4)
            for f, m in zip(frames["frame_index"], frames["normalized_from_sensor"]) if m is not None}
    out = defaultdict(list)
    for f, c, b in zip(rows["frame_index"], rows["class"], rows["box_sensor"]):
        if c not in ("vehicle", "pedestrian") or f not in norm or f not in by_frame:
            continue
        m = norm[f]
        tb = np.array([t for _, t in by_frame[f]])
        tc = np.array([k for k, _ in by_frame[f]])
        t_centres = (m[:3, :3] @ tb[:, :3].T).T + m[:3, 3]
        centre = m[:3, :3] @ np.array(b[:3]) + m[:3, 3]
        d = np.hypot(t_centres[:, 0] - centre[0], t_centres[:, 1] - centre[1])
        d[tc != c] = np.inf
        j = int(np.argmin(d))
        if d[j] < (1.0 if c == "vehicle" else 0.4):
            out[c].append((float(np.hypot(b[0], b[1])), centre[2] - t_centres[j, 2]))
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    logs, runs = sys.argv[1], sys.argv[2:]
    for platform in ("vehicle", "drone", "quadruped"):
        truth_files = sorted((Path(logs) / platform).glob("*_boxes_gt.parquet"))
        for tf in truth_files:
            sequence = tf.name[: -len("_boxes_gt.parquet")]
            per_run = [offsets(logs, r, platform, sequence) for r in runs]
            for cls in ("vehicle", "pedestrian"):
                for lo, hi in RANGES + [(0, 1e9)]:
                    cells = []
                    for o in per_run:
                        a = np.array([dz for r, dz in o[cls] if lo <= r < hi])
                        cells.append("-" if a.size == 0 else
                                     f"{np.median(a):+.2f} / {np.percentile(np.abs(a), 90):.2f} ({a.size})")
                    span = "all" if hi > 1e8 else f"{lo}-{hi} m"
                    print(f"| {platform} | {cls} | {span} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
