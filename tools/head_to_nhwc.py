#!/usr/bin/env python3
"""Turns a split pillar model's head graph that takes the BEV canvas as NCHW `[1, C, ny, nx]`
into one that takes it as NHWC `[1, ny, nx, C]`: a Transpose (perm 0, 3, 1, 2) in front of the
unchanged graph. Weights and outputs stay as they are.

Why: boxlayer scatters each pillar's C features onto the canvas (src/detect/scatter.rs). In NHWC a
pillar's features are one contiguous run, so the scatter touches only the occupied cells' memory
instead of every plane's cache lines. The Transpose is not free — the bundled heads run about
1 ms (3-4 %) longer on one CPU thread — but the scatter saves 1.6-2.2 ms, so a sweep gets faster
(docs/benchmarks.md, "NHWC canvas"). The manifest then says `[scatter] layout = "nhwc"`.

    python3 tools/head_to_nhwc.py detectors/NAME/head.onnx detectors/NAME/head.onnx --check

`--check` runs both graphs in ONNX Runtime on a random sparse canvas and requires the same
outputs (it needs `onnxruntime` and `numpy`).
"""

import argparse
import sys

import onnx
from onnx import helper


def to_nhwc(model: onnx.ModelProto) -> onnx.ModelProto:
    graph = model.graph
    if len(graph.input) != 1:
        sys.exit(f"expected one graph input, found {len(graph.input)}")
    source = graph.input[0]
    dims = source.type.tensor_type.shape.dim
    if len(dims) != 4:
        sys.exit(f"input {source.name!r} has rank {len(dims)}, expected 4 (NCHW)")
    name = source.name
    inner = f"{name}_nchw"
    for node in graph.node:
        for k, value in enumerate(node.input):
            if value == name:
                node.input[k] = inner
    n, c, h, w = (d.dim_value if d.HasField("dim_value") else d.dim_param for d in dims)
    new_input = helper.make_tensor_value_info(name, source.type.tensor_type.elem_type, [n, h, w, c])
    transpose = helper.make_node("Transpose", [name], [inner], name=f"{name}_nhwc_to_nchw", perm=[0, 3, 1, 2])
    graph.node.insert(0, transpose)
    graph.input.remove(source)
    graph.input.insert(0, new_input)
    onnx.checker.check_model(model)
    return model


def check(before: onnx.ModelProto, after: onnx.ModelProto) -> None:
    import numpy as np
    import onnxruntime as ort

    dims = [d.dim_value for d in before.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(7)
    canvas = np.zeros(dims, dtype=np.float32)
    occupied = rng.random((dims[2], dims[3])) < 0.25
    canvas[0][:, occupied] = rng.standard_normal((dims[1], int(occupied.sum()))).astype(np.float32)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    run = lambda m, x: ort.InferenceSession(m.SerializeToString(), options).run(None, {m.graph.input[0].name: x})
    for a, b, out in zip(run(before, canvas), run(after, np.ascontiguousarray(canvas.transpose(0, 2, 3, 1))), before.graph.output):
        worst = float(np.max(np.abs(a - b)))
        print(f"{out.name}: max |NCHW − NHWC| = {worst:.3g}")
        if worst > 1e-4 * max(1.0, float(np.max(np.abs(a)))):
            sys.exit(f"output {out.name} differs by {worst}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--check", action="store_true", help="compare both graphs in ONNX Runtime")
    args = parser.parse_args()
    before = onnx.load(args.source)
    after = to_nhwc(onnx.load(args.source))
    if args.check:
        check(before, after)
    onnx.save(after, args.target)
    print(f"wrote {args.target}")


if __name__ == "__main__":
    main()
