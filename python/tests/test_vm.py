"""Models on kiln's VM from Python (kiln.VMModule): data-dependent shapes, If,
symbolic input dims, benchmark and profile, errors, export to one .so and
kiln.load of it (corrupt sections refused); and torchvision's
SSDlite and Faster R-CNN against PyTorch's detections when their fixtures
are exported. The small
models are built here with onnx.helper and checked against numpy."""
import importlib.util
import os

import numpy as np
import pytest

import kiln

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def model_bytes(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "vm_test", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def positives_model():
    """x [n] -> (x[x > 0], indices of those): Greater, NonZero, Squeeze, Gather."""
    return model_bytes(
        [helper.make_node("Greater", ["x", "zero"], ["gt"]),
         helper.make_node("NonZero", ["gt"], ["nz"]),
         helper.make_node("Squeeze", ["nz", "axis0"], ["idx"]),
         helper.make_node("Gather", ["x", "idx"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None]),
         helper.make_tensor_value_info("idx", TensorProto.INT64, [None])],
        [numpy_helper.from_array(np.zeros((), np.float32), "zero"),
         numpy_helper.from_array(np.array([0], np.int64), "axis0")])


@pytest.fixture(scope="module")
def positives():
    return kiln.compile(positives_model(), num_threads=1)


def batch_model():
    """x [batch, 3], y [batch, 3] -> relu(x + y) @ w: symbolic batch only."""
    w = np.arange(6, dtype=np.float32).reshape(3, 2) / 4 - 0.5
    data = model_bytes(
        [helper.make_node("Add", ["x", "y"], ["s"]),
         helper.make_node("Relu", ["s"], ["r"]),
         helper.make_node("MatMul", ["r", "w"], ["out"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 2])],
        [numpy_helper.from_array(w, "w")])
    return data, w


# ---- data-dependent shapes, If, symbolic dims ---------------------------------

def test_nonzero_gather_against_numpy(positives):
    m = positives
    assert isinstance(m, kiln.VMModule) and m.executor == "vm"
    assert m.input_names == ["x"] and m.output_names == ["y", "idx"]
    assert m.inputs[0].shape == ("n",) and m.inputs[0].dtype == np.float32
    assert m.outputs[1].dtype == np.int64 and m.symbolic
    rng = np.random.default_rng(11)
    for n in (7, 40, 7, 1):
        x = rng.standard_normal(n).astype(np.float32)
        y, idx = m.run(x)
        np.testing.assert_array_equal(idx, np.nonzero(x > 0)[0])
        np.testing.assert_array_equal(y, x[x > 0])
        assert idx.dtype == np.int64 and y.dtype == np.float32
    assert m.num_dynamic_nodes >= 1  # those of the last run's shape class
    # no positive entry: empty outputs, not an error
    y, idx = m.run(x=-np.ones(5, np.float32))
    assert y.shape == (0,) and idx.shape == (0,)
    assert "vm" in repr(m) and "'n'" in repr(m)


def test_if_runs_the_branch_of_the_condition(tmp_path):
    out = helper.make_tensor_value_info("r", TensorProto.FLOAT, [4])
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["r"])], "then", [], [out])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "one"], ["r"])], "else", [], [out])
    data = model_bytes(
        [helper.make_node("If", ["c"], ["z"], then_branch=then_g, else_branch=else_g)],
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(np.array(2, np.float32), "two"),
         numpy_helper.from_array(np.array(1, np.float32), "one")])
    p = tmp_path / "if.onnx"
    p.write_bytes(data)
    m = kiln.compile(str(p), num_threads=1)  # a path, like bytes
    assert isinstance(m, kiln.VMModule)
    x = np.array([1, -2, 3.5, 0], np.float32)
    np.testing.assert_array_equal(m.run(np.array(True), x)[0], x * 2)
    np.testing.assert_array_equal(m.run(False, x)[0], x - 1)  # a Python bool converts
    assert any(s["kind"] == "vm control flow" for s in m.steps)


def test_symbolic_batch_at_two_sizes(tmp_path):
    data, w = batch_model()
    m = kiln.compile(data, num_threads=1, cache_dir=str(tmp_path / "cache"))
    assert isinstance(m, kiln.VMModule) and m.symbolic
    assert m.inputs[0].shape == ("batch", 3) and m.outputs[0].shape == (None, 2)
    rng = np.random.default_rng(12)
    for n in (2, 5, 2, 5):
        x, y = (rng.standard_normal((n, 3)).astype(np.float32) for _ in range(2))
        out = m.run(x, y)[0]
        assert out.shape == (n, 2)
        np.testing.assert_allclose(out, np.maximum(x + y, 0) @ w, rtol=1e-5, atol=1e-6)
    # its items are computed apart: batch 2 is one chunk, 5 is 4 + 1, so one
    # specialization per chunk extent (2, 4, 1), reused after
    assert m.num_specializations == 3
    assert m.batch_chunks == 2 and m.batch_chunks_why == ""
    assert m.static_part == "compiled"


# ---- one .so: export, then kiln.load without the .onnx ----------------------------

def reshape_nonzero_model():
    """x [6] -> r = relu(x * w) (static; w read only there) -> y = Reshape(r,
    shape) -> (y + b, NonZero(y)): a run-time shape and a data-dependent op."""
    w = np.array([1, -2, 3, -4, 5, -6], np.float32)
    data = model_bytes(
        [helper.make_node("Mul", ["x", "w"], ["m"]),
         helper.make_node("Relu", ["m"], ["r"]),
         helper.make_node("Reshape", ["r", "shape"], ["y"]),
         helper.make_node("Add", ["y", "b"], ["z"]),
         helper.make_node("NonZero", ["y"], ["nz"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("nz", TensorProto.INT64, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([10], np.float32), "b")])
    return data, w


def test_export_then_load_runs_without_the_onnx(tmp_path):
    data, w = reshape_nonzero_model()
    src = tmp_path / "m.onnx"
    src.write_bytes(data)
    m = kiln.compile(str(src), num_threads=1)
    assert isinstance(m, kiln.VMModule) and m.static_part == "compiled"
    so = tmp_path / "m.so"
    assert m.export(so) == str(so)
    src.unlink()
    loaded = kiln.load(so, num_threads=1)
    assert isinstance(loaded, kiln.VMModule) and loaded.static_part == "compiled"
    assert loaded.input_names == ["x", "shape"] and loaded.output_names == ["z", "nz"]
    x = np.array([1, 1, 1, -1, 0.5, 1], np.float32)
    for shape in ([2, 3], [3, 2], [6, 1], [2, 3]):
        sh = np.array(shape, np.int64)
        z, nz = loaded.run(x, sh)
        r = np.maximum(x * w, 0).reshape(shape)
        np.testing.assert_array_equal(z, r + 10)
        np.testing.assert_array_equal(nz, np.array(np.nonzero(r)))
        for a, b in zip(m.run(x, sh), (z, nz)):  # the .onnx VM's outputs
            np.testing.assert_array_equal(a, b)
    # exporting a loaded one copies its .so
    again = tmp_path / "again.so"
    loaded.export(again)
    np.testing.assert_array_equal(kiln.load(again).run(x, np.array([3, 2], np.int64))[0],
                                  np.maximum(x * w, 0).reshape(3, 2) + 10)


def test_export_if_and_bytes_models(tmp_path):
    out = helper.make_tensor_value_info("r", TensorProto.FLOAT, [4])
    then_g = helper.make_graph([helper.make_node("Mul", ["a", "a"], ["r"])], "then", [], [out])
    else_g = helper.make_graph([helper.make_node("Neg", ["a"], ["r"])], "else", [], [out])
    data = model_bytes(
        [helper.make_node("Abs", ["x"], ["a"]),
         helper.make_node("If", ["c"], ["z"], then_branch=then_g, else_branch=else_g)],
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4])])
    m = kiln.compile(data, num_threads=1)  # bytes export too
    so = m.export(tmp_path / "if.so")
    loaded = kiln.load(so)
    x = np.array([1, -2, 3.5, 0], np.float32)
    np.testing.assert_array_equal(loaded.run(True, x)[0], np.abs(x) ** 2)
    np.testing.assert_array_equal(loaded.run(False, x)[0], -np.abs(x))
    assert any(s["kind"] == "vm control flow" for s in loaded.steps)
    p = loaded.profile(runs=2, warmup=1, bench=False, peak_gflops=10, inputs=[True, x])
    assert "from the .so" in p.data["configuration"]["target"]


def test_a_corrupt_vm_section_is_an_error(tmp_path):
    data, _ = reshape_nonzero_model()
    so = tmp_path / "m.so"
    kiln.compile(data, num_threads=1).export(so)
    raw = bytearray(so.read_bytes())
    at = raw.find(b"KILNVM\r\n")
    assert at > 0
    bad = bytearray(raw)
    bad[at + 60] ^= 0xFF  # a byte of the descriptor
    (tmp_path / "bad.so").write_bytes(bad)
    with pytest.raises(kiln.KilnError, match="checksum mismatch"):
        kiln.load(tmp_path / "bad.so")
    (tmp_path / "cut.so").write_bytes(raw[:at + 20])
    with pytest.raises(kiln.KilnError, match="shared object"):
        kiln.load(tmp_path / "cut.so")


# ---- benchmark and profile ----------------------------------------------------

def test_benchmark_time_evaluator_semantics(positives):
    x = np.random.default_rng(13).standard_normal(64).astype(np.float32)
    r = positives.benchmark(number=3, repeat=4, inputs=[x])
    assert isinstance(r, kiln.BenchmarkResult)
    assert r.number == 3 and r.repeat == 4 and len(r.results) == 4
    assert r.threads == positives.num_threads == 1
    assert 0 < r.min <= r.median <= r.max and r.min <= r.mean <= r.max
    assert "BenchmarkResult(min=" in repr(r) and "Execution time summary" in str(r)
    # min_repeat_ms grows number as kiln_module_bench does
    assert positives.benchmark(number=1, repeat=2, min_repeat_ms=5).number > 1
    # the inputs stay those given: the next run without inputs is not needed
    np.testing.assert_array_equal(positives.run(x)[1], np.nonzero(x > 0)[0])


def test_profile_has_the_vm_rows(positives):
    x = np.random.default_rng(14).standard_normal(64).astype(np.float32)
    p = positives.profile(runs=5, warmup=1, bench_number=1, bench_repeat=2, peak_gflops=10,
                          inputs=[x])
    cfg = p.data["configuration"]
    assert cfg["executor"] == "vm" and cfg["target"].startswith("vm:")
    rows = {r.op: r for r in p.rows}
    assert rows["NonZero"].layouts == "vm kernel"
    assert rows["vm"].layouts == "vm"  # the VM's own step
    assert all(r.duration_us is not None and r.duration_us >= 0 for r in p.rows)
    t = p.table()
    assert "NonZero" in t and "Total" in t
    assert p.total_us > 0


# ---- errors -------------------------------------------------------------------

def test_vm_errors_raise_with_kilns_message(positives, tmp_path):
    m = positives
    with pytest.raises(kiln.KilnError, match="dtype float64") as e:
        m.run(np.zeros(3))
    assert e.value.status == "type mismatch"
    with pytest.raises(kiln.KilnError, match=r"shape \[2, 3\]") as e:
        m.run(np.zeros((2, 3), np.float32))
    assert e.value.status == "shape mismatch"
    with pytest.raises(kiln.KilnError, match="no fixed shape"):
        m.default_inputs()
    with pytest.raises(kiln.KilnError, match="symbolic or unknown dim") as e:
        m.export(tmp_path / "m.so")  # a .so holds one input-shape class
    assert e.value.status == "unsupported"
    # two inputs that name 'batch' with different extents: kiln's message
    data, _ = batch_model()
    b = kiln.compile(data, num_threads=1)
    with pytest.raises(kiln.KilnError, match="'batch'") as e:
        b.run(np.zeros((2, 3), np.float32), np.zeros((3, 3), np.float32))
    assert e.value.status == "shape mismatch"
    # the static path refuses what only the VM runs when asked to
    with pytest.raises(kiln.KilnError) as e:
        kiln.compile(positives_model(), executor="graph")
    assert e.value.status == "unsupported"
    with pytest.raises(kiln.KilnError, match="executor"):
        kiln.compile(positives_model(), executor="jit")
    with pytest.raises(kiln.KilnError, match="zoo"):
        kiln.compile("mlp", executor="vm")
    with pytest.raises(kiln.KilnError):
        kiln.compile(b"not a model", executor="vm")
    with pytest.raises(kiln.KilnError):
        kiln.compile(data, target="no-such-isa").run(np.zeros((1, 3), np.float32),
                                                     np.zeros((1, 3), np.float32))
    # the model still works after every refusal; a closed one raises
    assert m.run(np.ones(2, np.float32))[0].shape == (2,)
    b.close()
    with pytest.raises(kiln.KilnError, match="closed"):
        b.run(np.zeros((1, 3), np.float32), np.zeros((1, 3), np.float32))
    b.close()


def test_a_static_model_opens_on_the_vm_when_asked():
    x = np.random.default_rng(15).standard_normal(6).astype(np.float32)
    data = model_bytes([helper.make_node("Relu", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])])
    assert isinstance(kiln.compile(data), kiln.Module)
    m = kiln.compile(data, executor="vm", num_threads=1)
    assert isinstance(m, kiln.VMModule) and m.num_dynamic_nodes == 0
    np.testing.assert_array_equal(m.run(x)[0], np.maximum(x, 0))
    assert m.benchmark(repeat=2).repeat == 2  # default inputs: the shape is fixed


# ---- torchvision's detection networks against PyTorch ---------------------------

DETECTION_NETS = ["ssdlite320_mobilenet_v3_large", "fasterrcnn_mobilenet_v3_large_320_fpn"]


def _detection_dir(net):
    """scripts/export_detection.py's export of net, where
    tests/models/detection.sh puts it ($KILN_FIXTURES, else
    ~/.cache/kiln/fixtures/detection: python/pytest runs with an XDG_CACHE_HOME
    of its own), when complete (export.version is written last); and the
    kiln cache beside it, where that test's `kiln run` compiled the static
    part and the heavy per-class nodes (cold: minutes; cached: SSDlite 1 s,
    Faster R-CNN 3 s in all), or None."""
    base = os.environ.get("KILN_FIXTURES")
    cache = None
    if not base:
        cache = os.path.join(os.path.expanduser("~"), ".cache", "kiln")
        base = os.path.join(cache, "fixtures", "detection")
    d = os.path.join(base, net)
    return (d, cache) if os.path.exists(os.path.join(d, "export.version")) else (None, None)


def _compare_detection():
    spec = importlib.util.spec_from_file_location(
        "compare_detection", os.path.join(ROOT, "scripts", "compare_detection.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("net", DETECTION_NETS)
def test_detection_network_matches_pytorch(net):
    d, cache = _detection_dir(net)
    if not d:
        pytest.skip(f"no {net} export (tests/models/detection.sh or "
                    "scripts/export_detection.py makes it)")
    cmp = _compare_detection()
    m = kiln.compile(os.path.join(d, "model.onnx"), num_threads=2, cache_dir=cache)
    assert isinstance(m, kiln.VMModule) and m.static_part == "compiled"
    sets = sorted(s for s in os.listdir(d) if s.startswith("test_data_set_"))
    assert sets
    for s in sets:
        x = cmp.read_tensor(os.path.join(d, s, "input_0.pb"))
        want = [cmp.read_tensor(os.path.join(d, s, f"output_{i}.pb")) for i in range(3)]
        boxes, scores, labels = m.run(x)
        assert boxes.shape == (len(scores), 4) and labels.dtype == np.int64
        res = cmp.compare((boxes, scores, labels), want,
                          box_atol=cmp.BOX_ATOL_OF_SIZE * max(x.shape[-2:]), score_thresh=0.01)
        assert res["ok"], f"{s}: {res['message']}"
    # the profile: the static part's compiled kernels and the VM's rows
    p = m.profile(runs=2, warmup=1, bench=False, peak_gflops=100, inputs=[x])
    kinds = {r.layouts for r in p.rows}
    assert "vm" in kinds and kinds & {"vm kernel", "vm converted", "vm control flow"}
    assert any(r.hash for r in p.rows)  # compiled kernels have a workload hash


@pytest.mark.parametrize("net", DETECTION_NETS[:1])
def test_detection_network_through_one_so(net, tmp_path):
    """kiln.compile, export, kiln.load: the .so's detections equal the .onnx VM's."""
    d, cache = _detection_dir(net)
    if not d:
        pytest.skip(f"no {net} export (tests/models/detection.sh or "
                    "scripts/export_detection.py makes it)")
    cmp = _compare_detection()
    m = kiln.compile(os.path.join(d, "model.onnx"), num_threads=2, cache_dir=cache)
    so = m.export(tmp_path / "det.so")
    loaded = kiln.load(so, num_threads=2)
    assert isinstance(loaded, kiln.VMModule) and loaded.static_part == "compiled"
    x = cmp.read_tensor(os.path.join(d, "test_data_set_0", "input_0.pb"))
    for a, b in zip(m.run(x), loaded.run(x)):
        np.testing.assert_array_equal(a, b)
