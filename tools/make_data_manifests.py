"""Writes data-manifests/3eed_*.csv from 3EED's split files (../shared/fixtures/3eed-splits/).

    python3 tools/make_data_manifests.py [SPLITS_DIR]

Columns: name (the source's own sequence name), dataset_name (3EED's name for it), source_kind,
path (relative to the --data-root given to `boxlayer run`), platform, split.
Waymo v1 files are named `segment-<context>_with_camera_labels.tfrecord`; 3EED's M3ED names
`Outdoor_Day_<x>` are M3ED's `falcon_outdoor_day_<x>` (drone) and `spot_outdoor_day_<x>` (quadruped).
"""
import csv
import pathlib
import sys

repo = pathlib.Path(__file__).resolve().parent.parent
splits = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else repo.parent / "shared" / "fixtures" / "3eed-splits"
out = repo / "data-manifests"
HEADER = ["name", "dataset_name", "source_kind", "path", "platform", "split"]


def names(path: pathlib.Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def waymo_rows() -> list[list[str]]:
    rows = []
    for split in ("train", "val"):
        for ctx in names(splits / f"waymo_{split}.txt"):
            rows.append([ctx, ctx, "waymo-v1", f"waymo/segment-{ctx}_with_camera_labels.tfrecord", "vehicle", split])
    return rows


def m3ed_rows() -> list[list[str]]:
    rows = []
    for prefix, robot, platform in (("drone", "falcon", "drone"), ("quad", "spot", "quadruped")):
        for split in ("train", "val"):
            for name in names(splits / f"{prefix}_{split}.txt"):
                seq = robot + "_" + name.lower()
                rows.append([seq, name, "m3ed", f"m3ed/{seq}/{seq}_data.h5", platform, split])
    return rows


for file_name, rows in (("3eed_waymo.csv", waymo_rows()), ("3eed_m3ed.csv", m3ed_rows())):
    with open(out / file_name, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(HEADER)
        w.writerows(rows)
    print(f"wrote {out / file_name}: {len(rows)} sequences")
