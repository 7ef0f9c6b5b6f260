#!/usr/bin/env python3
"""NumPy's side of the `.npy` reader's cross-check (tests/pcd_npy_sources.rs).

`write DIR N` writes arrays whose point i is x = 0.5 i, y = -i, z = 0.25 i, intensity = i % 7,
ring = i % 64 in the layouts the reader takes: plain.npy (N×4 <f4), fortran.npy (N×3 <f8,
Fortran order), big.npy (N×3 >f4), structured.npy (x, y, z <f4, 4 padding bytes, intensity
<f4, ring |u1, t <i8), wide.npy (N×7 <f4). `check FILE N` loads a file the Rust writer wrote
(N×5: x y z intensity ring) and exits non-zero unless it holds those values.
"""
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("numpy is not installed: run `pip install -r tools/requirements-test.txt`")


def columns(n):
    i = np.arange(n, dtype=np.float64)
    return 0.5 * i, -i, 0.25 * i, i % 7, i % 64


def write(folder, n):
    x, y, z, intensity, ring = columns(n)
    np.save(f"{folder}/plain.npy", np.stack([x, y, z, intensity], axis=1).astype("<f4"))
    np.save(f"{folder}/fortran.npy", np.asfortranarray(np.stack([x, y, z], axis=1).astype("<f8")))
    np.save(f"{folder}/big.npy", np.stack([x, y, z], axis=1).astype(">f4"))
    dtype = np.dtype(
        {
            "names": ["x", "y", "z", "intensity", "ring", "t"],
            "formats": ["<f4", "<f4", "<f4", "<f4", "u1", "<i8"],
            "offsets": [0, 4, 8, 16, 20, 24],
            "itemsize": 32,
        }
    )
    s = np.zeros(n, dtype=dtype)
    s["x"], s["y"], s["z"], s["intensity"], s["ring"], s["t"] = x, y, z, intensity, ring, np.arange(n)
    np.save(f"{folder}/structured.npy", s)
    np.save(f"{folder}/wide.npy", np.zeros((n, 7), dtype="<f4"))


def check(path, n):
    a = np.load(path)
    assert a.dtype == np.dtype("<f4") and a.shape == (n, 5) and a.flags.c_contiguous, (a.dtype, a.shape)
    for k, column in enumerate(columns(n)):
        assert np.array_equal(a[:, k], column.astype("<f4")), f"column {k} differs"
    print(f"ok {path}: {a.shape}")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    (write if sys.argv[1] == "write" else check)(sys.argv[2], int(sys.argv[3]))
