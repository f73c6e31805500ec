"""bench/peer_ort.py: ONNX Runtime on one export (bench/peer_common.py says how).

CPU execution provider, ORT_ENABLE_ALL, intra-op threads = --threads, one
inter-op thread, sequential execution; the session's defaults otherwise (its
thread pool spins between runs, as a user's does). Inputs and outputs are bound
once (I/O binding), so a timed run is one run_with_iobinding call.
"""
import os

import peer_common as pc


def main():
    a = pc.parse_args(__doc__.split("\n\n")[0])
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    try:
        sess = ort.InferenceSession(os.path.join(a.model_dir, "model.onnx"), so,
                                    providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 (ORT raises its own types)
        pc.fail(f"{a.model_dir}: {e}")
    ins, outs = pc.test_data(a.model_dir)
    feeds = pc.feeds_by_name([i.name for i in sess.get_inputs()], ins)
    names = [o.name for o in sess.get_outputs()]
    if len(names) != len(outs):
        pc.fail(f"{a.model_dir}: the model has {len(names)} outputs, the export {len(outs)} files")
    # Inputs and outputs bound once (I/O binding, outputs preallocated with the
    # export's shapes), so a timed run is one call with no conversions: the
    # Python cost per run is as small as the API allows. An output whose shape
    # the model leaves open (a detection count) is bound to the CPU device
    # instead: ORT allocates it in each run, as it must.
    import numpy as np
    binding = sess.io_binding()
    for name, x in feeds.items():
        binding.bind_cpu_input(name, x)
    fixed = all(isinstance(d, int) for o in sess.get_outputs() for d in o.shape)
    if fixed:
        ys = [ort.OrtValue.ortvalue_from_numpy(np.empty_like(w)) for _, w in outs]
        for name, y in zip(names, ys):
            binding.bind_ortvalue_output(name, y)
    else:
        for name in names:
            binding.bind_output(name, "cpu")
    sess.run_with_iobinding(binding)
    got = [y.numpy() for y in ys] if fixed else binding.copy_outputs_to_cpu()
    chk = pc.check_outputs(a, got, ins, outs)
    results, number = pc.time_evaluator(lambda: sess.run_with_iobinding(binding), a.repeat,
                                        a.min_repeat_ms)
    pc.report("ort", ort.__version__, results, number, chk)


if __name__ == "__main__":
    main()
