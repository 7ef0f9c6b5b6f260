#!/usr/bin/env python3
"""Independent reference for boxlayer's weighted Gaussian KDE (tests/fuse_kde_crosscheck.rs calls it).

Reads a JSON list of cases, each {"data": [[...], ...] (n points of d values), "weights": [...] or
null, "bw": "scott" | "silverman" | number, "points": [[...], ...]}, builds
scipy.stats.gaussian_kde(data.T, bw_method=bw, weights=weights) and writes, per case, scipy's
neff, factor, kernel covariance, the density at the given points and at every data point, the
index of the data point with the highest density and, for 1-D data, the location of the
density's global maximum between the smallest and largest sample (a 20001-point grid, then a
bounded scalar minimisation around the best grid point). A case whose covariance scipy cannot
factor is reported as {"singular": true}.

Usage: python3 tools/kde_crosscheck.py --cases CASES.json --out OUT.json
"""

import argparse
import json
import sys

try:
    import numpy as np
    from scipy import optimize, stats
except ImportError:  # pragma: no cover - reported to the Rust test
    sys.exit("kde_crosscheck.py: numpy/scipy are not installed (pip install -r tools/requirements-test.txt)")


def peak_1d(kde, lo, hi):
    grid = np.linspace(lo, hi, 20001)
    density = kde(grid)
    k = int(np.argmax(density))
    step = grid[1] - grid[0]
    a, b = max(lo, grid[k] - step), min(hi, grid[k] + step)
    res = optimize.minimize_scalar(lambda x: -kde([x])[0], bounds=(a, b), method="bounded",
                                   options={"xatol": 1e-12 * max(1.0, hi - lo)})
    return float(res.x) if -res.fun >= density[k] else float(grid[k])


def run_case(case):
    data = np.asarray(case["data"], dtype=float)
    weights = None if case["weights"] is None else np.asarray(case["weights"], dtype=float)
    try:
        kde = stats.gaussian_kde(data.T, bw_method=case["bw"], weights=weights)
    except np.linalg.LinAlgError:
        return {"singular": True}
    points = np.asarray(case["points"], dtype=float)
    at_data = kde(data.T)
    out = {
        "singular": False,
        "neff": float(kde.neff),
        "factor": float(kde.factor),
        "covariance": kde.covariance.tolist(),
        "density": kde(points.T).tolist(),
        "density_at_data": at_data.tolist(),
        "argmax": int(np.argmax(at_data)),
    }
    if data.shape[1] == 1:
        out["peak"] = peak_1d(kde, float(data.min()), float(data.max()))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.cases) as f:
        cases = json.load(f)
    with open(args.out, "w") as f:
        json.dump({"scipy": __import__("scipy").__version__, "results": [run_case(c) for c in cases]}, f)


if __name__ == "__main__":
    main()
