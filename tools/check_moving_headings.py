#!/usr/bin/env python3
"""Heading accuracy of a box layer on the truth's moving vehicles: an independent check of the
tracker's headings from motion (docs/tracking.md).

For each frame, each true vehicle moving faster than --min-speed (the simulator's
`*_boxes_gt.parquet`, `velocity_in_world_mps`) is matched to the nearest vehicle box of each
`boxes.parquet` within 2 m (BEV centre, sensor frame); the share of matched boxes whose heading
is within 30° of the truth, and within 30° of it turned round, is printed per file.

    python3 tools/check_moving_headings.py --truth logs/sim_seed5000_boxes_gt.parquet \
        --boxes off/vehicle/sim_seed5000/boxes.parquet on/vehicle/sim_seed5000/boxes.parquet
"""
import argparse
import collections

import numpy as np
import pyarrow.parquet as pq


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--truth", required=True, help="the simulator's *_boxes_gt.parquet")
    ap.add_argument("--boxes", required=True, nargs="+", help="boxes.parquet files of one sequence")
    ap.add_argument("--min-speed", type=float, default=1.0, help="m/s")
    ap.add_argument("--match", type=float, default=2.0, help="BEV centre distance (m)")
    args = ap.parse_args()

    gt = pq.read_table(args.truth, columns=["frame_index", "class", "box_in_sensor", "velocity_in_world_mps"])
    truth = collections.defaultdict(list)
    for frame, cls, box, v in zip(*(gt.column(i).to_pylist() for i in range(4))):
        if cls == "vehicle" and np.hypot(v[0], v[1]) > args.min_speed:
            truth[frame].append(box)
    for path in args.boxes:
        t = pq.read_table(path, columns=["frame_index", "class", "box_sensor"])
        boxes = collections.defaultdict(list)
        for frame, cls, box in zip(*(t.column(i).to_pylist() for i in range(3))):
            if cls == "vehicle":
                boxes[frame].append(box)
        matched = right = turned = 0
        for frame, true_boxes in truth.items():
            for g in true_boxes:
                dist = [np.hypot(b[0] - g[0], b[1] - g[1]) for b in boxes[frame]]
                if not dist or min(dist) > args.match:
                    continue
                b = boxes[frame][int(np.argmin(dist))]
                off = abs((b[6] - g[6] + np.pi) % (2 * np.pi) - np.pi)
                matched += 1
                right += off <= np.radians(30)
                turned += off >= np.radians(150)
        share = lambda n: 100.0 * n / max(matched, 1)
        print(f"{path}: {matched} matched, heading right {share(right):.1f} %, turned round {share(turned):.1f} %")


if __name__ == "__main__":
    main()
