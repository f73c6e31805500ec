#!/usr/bin/python3
"""Exports a BERT-base encoder to ONNX with reference inputs and outputs.

The module is our own, with Hugging Face BertModel's structure and parameter
names (embeddings with word, position and token-type tables and LayerNorm; 12
layers of self-attention with the extended additive mask (1 - mask) * -10000,
intermediate dense + exact GELU, output dense; no pooler): no transformers
package, no downloads. Weights are drawn from a fixed seed with Hugging Face's
init (normal, std 0.02; LayerNorm weight 1, bias 0, perturbed a little so that
they are exercised). The layout is the ONNX conformance suite's:

    OUTDIR/bert/model.onnx
    OUTDIR/bert/test_data_set_0/input_0.pb    input_ids, int64 [1, 128]
    OUTDIR/bert/test_data_set_0/input_1.pb    attention_mask, int64 [1, 128]
    OUTDIR/bert/test_data_set_0/output_0.pb   last_hidden_state, from PyTorch

The mask has the last 28 positions masked out, so masking is exercised.
A model already exported (by this version of the script) is skipped; the files
are large: never commit them.

Usage: /usr/bin/python3 scripts/export_bert.py [OUTDIR] [--opset N] [--force]
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn

SEED = 20241111
EXPORT_VERSION = "1"
SEQ, DIM, HEADS, FF, VOCAB, MAX_POS, LAYERS = 128, 768, 12, 3072, 30522, 512, 12
EPS = 1e-12


class Embeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, DIM)
        self.position_embeddings = nn.Embedding(MAX_POS, DIM)
        self.token_type_embeddings = nn.Embedding(2, DIM)
        self.LayerNorm = nn.LayerNorm(DIM, eps=EPS)
        self.register_buffer("position_ids", torch.arange(MAX_POS).expand((1, -1)))
        self.register_buffer("token_type_ids", torch.zeros((1, MAX_POS), dtype=torch.long))

    def forward(self, input_ids):
        n = input_ids.shape[1]
        x = self.word_embeddings(input_ids)
        x = x + self.token_type_embeddings(self.token_type_ids[:, :n])
        x = x + self.position_embeddings(self.position_ids[:, :n])
        return self.LayerNorm(x)


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.query = nn.Linear(DIM, DIM)
        self.key = nn.Linear(DIM, DIM)
        self.value = nn.Linear(DIM, DIM)

    def heads(self, x):
        return x.view(x.shape[0], x.shape[1], HEADS, DIM // HEADS).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(DIM // HEADS)
        p = torch.softmax(s + mask, dim=-1)
        ctx = torch.matmul(p, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.shape[0], ctx.shape[1], DIM)


class DenseNorm(nn.Module):
    """BertSelfOutput / BertOutput: dense, residual add, LayerNorm."""

    def __init__(self, n_in):
        super().__init__()
        self.dense = nn.Linear(n_in, DIM)
        self.LayerNorm = nn.LayerNorm(DIM, eps=EPS)

    def forward(self, x, residual):
        return self.LayerNorm(self.dense(x) + residual)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.self = SelfAttention()
        self.output = DenseNorm(DIM)

    def forward(self, x, mask):
        return self.output(self.self(x, mask), x)


class Intermediate(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(DIM, FF)

    def forward(self, x):
        return nn.functional.gelu(self.dense(x))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = Attention()
        self.intermediate = Intermediate()
        self.output = DenseNorm(FF)

    def forward(self, x, mask):
        x = self.attention(x, mask)
        return self.output(self.intermediate(x), x)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.ModuleList([Layer() for _ in range(LAYERS)])

    def forward(self, x, mask):
        for lay in self.layer:
            x = lay(x, mask)
        return x


class BertModel(nn.Module):
    """Hugging Face BertModel(add_pooling_layer=False), inference."""

    def __init__(self):
        super().__init__()
        self.embeddings = Embeddings()
        self.encoder = Encoder()

    def forward(self, input_ids, attention_mask):
        m = attention_mask[:, None, None, :].to(torch.float32)
        m = (1.0 - m) * -10000.0
        return self.encoder(self.embeddings(input_ids), m)


def init_weights(net, gen):
    with torch.no_grad():
        for mod in net.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                mod.weight.normal_(0.0, 0.02, generator=gen)
                if isinstance(mod, nn.Linear):
                    mod.bias.uniform_(-0.02, 0.02, generator=gen)
            elif isinstance(mod, nn.LayerNorm):
                mod.weight.uniform_(0.9, 1.1, generator=gen)
                mod.bias.uniform_(-0.05, 0.05, generator=gen)


def make(_name="bert"):
    """The seeded module in eval mode and its example inputs (input_ids,
    attention_mask with the last 28 positions masked): what export() writes
    and bench/peer_torch.py times."""
    torch.manual_seed(SEED)
    net = BertModel()
    init_weights(net, torch.Generator().manual_seed(SEED + 1))
    net.eval()
    gen = torch.Generator().manual_seed(SEED + 2)
    ids = torch.randint(0, VOCAB, (1, SEQ), generator=gen, dtype=torch.long)
    mask = torch.ones((1, SEQ), dtype=torch.long)
    mask[:, SEQ - 28:] = 0
    return net, (ids, mask)


def export(outdir, opset, force):
    dst = os.path.join(outdir, "bert")
    data_dir = os.path.join(dst, "test_data_set_0")
    model_path = os.path.join(dst, "model.onnx")
    out_path = os.path.join(data_dir, "output_0.pb")
    version_path = os.path.join(dst, "export.version")
    cached = open(version_path).read().strip() if os.path.exists(version_path) else ""
    if (not force and cached == EXPORT_VERSION and os.path.exists(model_path)
            and os.path.exists(out_path)):
        print(f"bert: cached in {dst}")
        return
    os.makedirs(data_dir, exist_ok=True)
    t0 = time.time()
    net, (ids, mask) = make()
    with torch.no_grad():
        y = net(ids, mask)
    y_np = y.numpy().astype(np.float32)
    if not np.isfinite(y_np).all() or float(y_np.std()) < 1e-3:
        raise SystemExit("bert: the reference output is degenerate")
    tmp = model_path + ".tmp"
    torch.onnx.export(net, (ids, mask), tmp, opset_version=opset,
                      input_names=["input_ids", "attention_mask"],
                      output_names=["last_hidden_state"], do_constant_folding=True)
    onnx.checker.check_model(tmp)
    for i, (name, t) in enumerate((("input_ids", ids), ("attention_mask", mask))):
        with open(os.path.join(data_dir, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy(), name).SerializeToString())
    with open(out_path + ".tmp", "wb") as f:
        f.write(numpy_helper.from_array(y_np, "last_hidden_state").SerializeToString())
    os.replace(tmp, model_path)
    os.replace(out_path + ".tmp", out_path)
    with open(version_path, "w") as f:
        f.write(EXPORT_VERSION + "\n")
    ops = sorted({n.op_type for n in onnx.load(model_path, load_external_data=False).graph.node})
    print(f"bert: exported to {dst} in {time.time() - t0:.0f}s (opset {opset}, output "
          f"{list(y_np.shape)}, std {float(y_np.std()):.3f}; ops: {' '.join(ops)})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?", default="fixtures")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--force", action="store_true", help="re-export a cached model")
    args = ap.parse_args()
    torch.set_num_threads(1)
    export(args.outdir, args.opset, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
