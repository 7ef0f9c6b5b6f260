"""Writes the tiny ONNX models the Rust tests run (tests/fixtures/*.onnx).

    python3 tools/make_test_models.py

affine.onnx: y = x · W + b with x f32 [N, 3] (N dynamic), W = [[1,2],[3,4],[5,6]], b = [0.5, -1];
the test computes the same product by hand, so a wrong load or a wrong layout fails it.
"""
import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def affine() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32), "W")
    b = numpy_helper.from_array(np.array([0.5, -1.0], dtype=np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        "affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
        initializer=[w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="boxlayer-tools")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    onnx.save(affine(), OUT / "affine.onnx")
    print(f"wrote {OUT / 'affine.onnx'}")
