#!/usr/bin/env python3
"""Independent reference for boxlayer's detection AP (tests/eval_crosscheck.rs calls it).

Reads two JSON-lines box lists (docs/eval.md) whose boxes are all axis-aligned (yaw = pitch =
roll = 0), computes BEV and 3D IoU in closed form with numpy, matches greedily per frame and class
(predictions by falling score, each taking the unmatched GT box of highest IoU with IoU > threshold;
an ignored GT box is taken only when no counted one qualifies, and then the prediction is not
counted), and writes AP (40-point and all-point) overall and per BEV range bin, with and without
ignoring zero-point GT boxes, as JSON.

Usage: python3 tools/eval_crosscheck.py --gt GT.jsonl --pred PRED.jsonl --out OUT.json
"""

import argparse
import json
import sys

try:
    import numpy as np
except ImportError:  # pragma: no cover - reported to the Rust test
    sys.exit("eval_crosscheck.py: numpy is not installed (run `make setup` or pip install -r tools/requirements-test.txt)")

CLASS_NAMES = {"vehicle": "vehicle", "car": "vehicle", "truck": "vehicle", "bus": "vehicle",
               "othervehicle": "vehicle", "pedestrian": "pedestrian", "cyclist": "cyclist", "unknown": "unknown"}
THRESHOLDS = {"vehicle": [0.7, 0.5], "pedestrian": [0.5, 0.25], "cyclist": [0.5, 0.25]}
RANGE_EDGES = [0.0, 30.0, 50.0]


def read_boxes(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            d = json.loads(line)
            v = d["box"]
            if len(v) == 9 and (v[7] != 0 or v[8] != 0) or len(v) >= 7 and v[6] != 0:
                sys.exit(f"{path}: line {n}: only axis-aligned boxes are supported here")
            rows.append({
                "key": (d["sequence"], d["frame"]),
                "box": np.array(v[:6], dtype=np.float64),
                "cls": CLASS_NAMES[d["class"]],
                "score": float(d.get("score", 1.0)),
                "points": d.get("num_points"),
            })
    return rows


def iou_matrix(preds, gts, kind):
    """IoU of every prediction (rows) with every GT box (columns), axis-aligned closed form."""
    if len(preds) == 0 or len(gts) == 0:
        return np.zeros((len(preds), len(gts)))
    p = np.stack([r["box"] for r in preds])
    g = np.stack([r["box"] for r in gts])
    p_lo, p_hi = p[:, None, :3] - p[:, None, 3:6] / 2, p[:, None, :3] + p[:, None, 3:6] / 2
    g_lo, g_hi = g[None, :, :3] - g[None, :, 3:6] / 2, g[None, :, :3] + g[None, :, 3:6] / 2
    overlap = np.clip(np.minimum(p_hi, g_hi) - np.maximum(p_lo, g_lo), 0.0, None)
    axes = 2 if kind == "bev" else 3
    inter = np.prod(overlap[..., :axes], axis=-1)
    vol_p = np.prod(p[:, None, 3:3 + axes], axis=-1)
    vol_g = np.prod(g[None, :, 3:3 + axes], axis=-1)
    union = vol_p + vol_g - inter
    return np.where(inter > 0, inter / union, 0.0)


def ap_from(scored, num_gt):
    """(R40 AP, all-point AP) from [(score, is_tp)]; equal scores form one curve point."""
    if num_gt == 0:
        return None, None
    if not scored:
        return 0.0, 0.0
    scores = np.array([s for s, _ in scored])
    tps = np.array([t for _, t in scored], dtype=np.int64)
    order = np.argsort(-scores, kind="stable")
    scores, tps = scores[order], tps[order]
    tp_cum = np.cumsum(tps)
    fp_cum = np.cumsum(1 - tps)
    last_of_group = np.append(scores[1:] != scores[:-1], True)
    tp_pts, fp_pts = tp_cum[last_of_group], fp_cum[last_of_group]
    precision = tp_pts / (tp_pts + fp_pts)
    recall = tp_pts / num_gt
    envelope = np.maximum.accumulate(precision[::-1])[::-1]
    all_points = float(np.sum(np.diff(np.concatenate([[0.0], recall])) * envelope))
    r40 = 0.0
    for i in range(1, 41):
        reached = tp_pts * 40 >= i * num_gt
        if reached.any():
            r40 += float(envelope[np.argmax(reached)])
    return r40 / 40.0, all_points


def group(rows):
    """(frame key, class) -> rows, in input order."""
    out = {}
    for r in rows:
        out.setdefault((r["key"], r["cls"]), []).append(r)
    return out


def evaluate(gts, preds, cls, kind, thr, ignore_zero, gt_in, pred_in):
    scored, num_gt = [], 0
    keys = sorted({k for k, c in list(gts) + list(preds) if c == cls})
    for key in keys:
        g = gts.get((key, cls), [])
        p = preds.get((key, cls), [])
        ignored = [not gt_in(r) or (ignore_zero and r["points"] == 0) for r in g]
        num_gt += sum(1 for i in ignored if not i)
        ious = iou_matrix(p, g, kind)
        taken = [False] * len(g)
        for pi in np.argsort(-np.array([r["score"] for r in p]), kind="stable"):
            chosen = None
            for want_ignored in (False, True):
                cand = [(ious[pi, gi], -gi) for gi in range(len(g))
                        if not taken[gi] and ignored[gi] == want_ignored and ious[pi, gi] > thr]
                if cand:
                    chosen = (-max(cand)[1], want_ignored)
                    break
            if chosen is None:
                if pred_in(p[pi]):
                    scored.append((p[pi]["score"], False))
            else:
                taken[chosen[0]] = True
                if not chosen[1]:
                    scored.append((p[pi]["score"], True))
    r40, allp = ap_from(scored, num_gt)
    return {"num_gt": num_gt, "num_pred": len(scored), "ap_r40": r40, "ap_all_points": allp}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gt", required=True)
    ap.add_argument("--pred", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    gts, preds = group(read_boxes(args.gt)), group(read_boxes(args.pred))
    results = []
    everything = lambda r: True
    for ignore_zero in (False, True):
        for cls, thresholds in THRESHOLDS.items():
            for kind in ("bev", "three_d"):
                for thr in thresholds:
                    row = {"ignore_zero_point_gt": ignore_zero, "class": cls, "iou_kind": kind, "threshold": thr,
                           **evaluate(gts, preds, cls, kind, thr, ignore_zero, everything, everything)}
                    bins = []
                    for i, lo in enumerate(RANGE_EDGES):
                        hi = RANGE_EDGES[i + 1] if i + 1 < len(RANGE_EDGES) else float("inf")
                        inside = lambda r, lo=lo, hi=hi: lo <= float(np.hypot(r["box"][0], r["box"][1])) < hi
                        bins.append(evaluate(gts, preds, cls, kind, thr, ignore_zero, inside, inside))
                    row["range_bins"] = bins
                    results.append(row)
    with open(args.out, "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main()
