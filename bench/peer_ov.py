"""bench/peer_ov.py: OpenVINO on one export (bench/peer_common.py says how).

CPU device, PERFORMANCE_HINT LATENCY, INFERENCE_NUM_THREADS = --threads,
NUM_STREAMS 1, and INFERENCE_PRECISION_HINT f32 unless --precision default
(then OpenVINO picks: bf16 where the CPU has AMX or AVX-512 BF16; the JSON
says which precision it chose). One infer request, synchronous, inputs and
outputs shared with numpy (no copies).
"""
import os

import peer_common as pc


def main():
    a = pc.parse_args(__doc__.split("\n\n")[0], lambda ap: ap.add_argument(
        "--precision", choices=["f32", "default"], default="f32"))
    import openvino as ov
    core = ov.Core()
    cfg = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": a.threads, "NUM_STREAMS": 1}
    if a.precision == "f32":
        cfg["INFERENCE_PRECISION_HINT"] = "f32"
    try:
        compiled = core.compile_model(os.path.join(a.model_dir, "model.onnx"), "CPU", cfg)
    except Exception as e:  # noqa: BLE001 (OpenVINO raises RuntimeError and its own types)
        pc.fail(f"{a.model_dir}: {e}")
    ins, outs = pc.test_data(a.model_dir)
    feeds = pc.feeds_by_name([p.get_any_name() for p in compiled.inputs], ins)
    req = compiled.create_infer_request()

    def run():
        res = req.infer(feeds)
        return [res[o] for o in compiled.outputs]

    chk = pc.check_outputs(a, run(), ins, outs)
    # shared inputs and outputs: no copies in a timed run
    results, number = pc.time_evaluator(
        lambda: req.infer(feeds, share_inputs=True, share_outputs=True), a.repeat, a.min_repeat_ms)
    props = {}
    for k in ("INFERENCE_PRECISION_HINT", "INFERENCE_NUM_THREADS", "NUM_STREAMS"):
        v = compiled.get_property(k)
        props[k] = v.get_type_name() if hasattr(v, "get_type_name") else str(v)
    pc.report("ov" if a.precision == "f32" else "ov-default", ov.__version__.split("-")[0],
              results, number, chk, properties=props)


if __name__ == "__main__":
    main()
