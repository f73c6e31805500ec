"""bench/peer_torch.py: PyTorch on the network an export was made from
(bench/peer_common.py says how).

Debian's torch, torch.set_num_threads(--threads), eval, inference_mode; the
network is rebuilt by the exporting script (same seed, same weights: its make
function) and run on the export's inputs, so its output is checked against the
export's like every other engine's. --net names it (default: the export
directory's name).
"""
import os
import sys

import peer_common as pc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def builder(net):
    """The make(name) -> (module, example input) of the script that exports
    NET, or None when no script defines NET in PyTorch."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import export_torchvision
    if net in export_torchvision.NETWORKS:
        return export_torchvision.make
    import export_detection
    if net in export_detection.NETWORKS:
        return export_detection.make
    if net == "bert":
        try:
            import export_bert
        except ImportError:
            return None
        if hasattr(export_bert, "make"):
            return export_bert.make

        def make_bert(_):
            # export_bert.export()'s construction (the inputs come from the
            # export's files): a drift from it shows as a failed check
            import torch
            torch.manual_seed(export_bert.SEED)
            module = export_bert.BertModel()
            export_bert.init_weights(module, torch.Generator().manual_seed(export_bert.SEED + 1))
            return module.eval(), None
        return make_bert
    return None


def main():
    a = pc.parse_args(__doc__.split("\n\n")[0],
                      lambda ap: ap.add_argument("--net", help="network name"))
    import torch
    torch.set_num_threads(a.threads)
    net = a.net or os.path.basename(os.path.normpath(a.model_dir))
    make = builder(net)
    if make is None:
        pc.fail(f"no PyTorch definition of '{net}'")
    module, _ = make(net)
    ins, outs = pc.test_data(a.model_dir)
    xs = [torch.from_numpy(x.copy()) for _, x in ins]

    def run():
        with torch.inference_mode():
            y = module(*xs)
        return list(y) if isinstance(y, (tuple, list)) else [y]

    chk = pc.check_outputs(a, [y.numpy() for y in run()], ins, outs)
    results, number = pc.time_evaluator(run, a.repeat, a.min_repeat_ms)
    pc.report("torch", torch.__version__, results, number, chk)


if __name__ == "__main__":
    main()
