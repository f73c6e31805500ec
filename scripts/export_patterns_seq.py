"""Exports small sequence models nobody's issue names (a 2-layer LSTM language
model, a BiLSTM tagger, a 2-layer GRU, a GPT-2-style decoder stack, a
wav2vec2-style Conv1d feature extractor, a dilated causal TCN) with random
weights from a fixed seed and PyTorch's outputs, in the ONNX conformance
layout (DIR/NAME/model.onnx, DIR/NAME/test_data_set_0/input_K.pb,
output_K.pb), for `kiln check` and bench/peer_ort.py (docs/SWEEP.md, "The
pattern sweep"). Never commit the exports.

usage: /usr/bin/python3 scripts/export_patterns_seq.py [DIR] [NAME...]
       (DIR default ~/.cache/kiln/fixtures/patterns/seq)
"""
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
    "~/.cache/kiln/fixtures/patterns/seq")
ONLY = set(sys.argv[2:])


# 1. LSTM language model -------------------------------------------------------
class LstmLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5000, 256)
        self.lstm = nn.LSTM(256, 512, num_layers=2, batch_first=True)
        self.head = nn.Linear(512, 5000)

    def forward(self, ids):
        y, _ = self.lstm(self.emb(ids))
        return self.head(y)


# 2. BiLSTM tagger -------------------------------------------------------------
class BiLstmTagger(nn.Module):
    def __init__(self, vocab=5000, tags=20):
        super().__init__()
        self.emb = nn.Embedding(vocab, 128)
        self.lstm = nn.LSTM(128, 256, num_layers=1, bidirectional=True, batch_first=True)
        self.head = nn.Linear(512, tags)

    def forward(self, ids):
        y, _ = self.lstm(self.emb(ids))
        return F.log_softmax(self.head(y), dim=-1)


# 3. GRU ----------------------------------------------------------------------
class GruSeq(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(80, 256, num_layers=2, batch_first=True)
        self.head = nn.Linear(256, 32)

    def forward(self, x):
        y, _ = self.gru(x)
        return self.head(y[:, -1, :])


# 4. GPT-2 style decoder ------------------------------------------------------
class Block(nn.Module):
    def __init__(self, d, h, T):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.act = nn.GELU(approximate="tanh")
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        hd = C // self.h
        q = q.view(B, T, self.h, hd).transpose(1, 2)
        k = k.view(B, T, self.h, hd).transpose(1, 2)
        v = v.view(B, T, self.h, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        x = x + self.fc2(self.act(self.fc(self.ln2(x))))
        return x


class Gpt2Stack(nn.Module):
    def __init__(self, vocab=5000, d=256, h=4, T=96, n=4):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(T, d)
        self.blocks = nn.ModuleList([Block(d, h, T) for _ in range(n)])
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied
        with torch.no_grad():
            self.wte.weight.normal_(0, 0.02)
            self.wpe.weight.normal_(0, 0.01)

    def forward(self, ids):
        T = ids.shape[1]
        pos = torch.arange(T, dtype=torch.long, device=ids.device).unsqueeze(0)
        x = self.wte(ids) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return self.head(self.lnf(x))


# 5. wav2vec2-style conv feature extractor ------------------------------------
class Conv1dAudio(nn.Module):
    def __init__(self):
        super().__init__()
        ks = [10, 3, 3, 3, 3, 2, 2]
        ss = [5, 2, 2, 2, 2, 2, 2]
        convs = []
        cin = 1
        for i, (k, s) in enumerate(zip(ks, ss)):
            convs.append(nn.Conv1d(cin, 512, k, stride=s, bias=False))
            cin = 512
        self.convs = nn.ModuleList(convs)
        self.gn = nn.GroupNorm(512, 512, affine=True)
        self.ln = nn.LayerNorm(512)
        self.proj = nn.Linear(512, 256)

    def forward(self, wav):
        x = wav.unsqueeze(1)  # [B, 1, L]
        for i, c in enumerate(self.convs):
            x = c(x)
            if i == 0:
                x = self.gn(x)
            x = F.gelu(x)
        x = x.transpose(1, 2)  # [B, T, 512]
        return self.proj(self.ln(x))


# 6. TCN ----------------------------------------------------------------------
class TcnBlock(nn.Module):
    def __init__(self, cin, cout, k, dil):
        super().__init__()
        self.pad = (k - 1) * dil
        self.c1 = nn.utils.weight_norm(nn.Conv1d(cin, cout, k, padding=self.pad, dilation=dil))
        self.c2 = nn.utils.weight_norm(nn.Conv1d(cout, cout, k, padding=self.pad, dilation=dil))
        self.down = nn.Conv1d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        y = F.relu(self.c1(x)[:, :, :-self.pad])
        y = F.relu(self.c2(y)[:, :, :-self.pad])
        res = x if self.down is None else self.down(x)
        return F.relu(y + res)


class Tcn(nn.Module):
    def __init__(self):
        super().__init__()
        chans = [64, 128, 128, 128, 128]
        self.blocks = nn.ModuleList(
            [TcnBlock(chans[i], chans[i + 1], 3, 2 ** i) for i in range(4)])
        for b in self.blocks:
            nn.utils.remove_weight_norm(b.c1)
            nn.utils.remove_weight_norm(b.c2)
        self.head = nn.Conv1d(128, 10, 1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def models():
    yield "lstm_lm", LstmLM, lambda: [torch.randint(0, 5000, (1, 64), dtype=torch.int64)], 13
    yield "bilstm_tagger", BiLstmTagger, lambda: [torch.randint(0, 5000, (1, 50), dtype=torch.int64)], 13
    yield "gru_seq", GruSeq, lambda: [torch.randn(1, 100, 80)], 13
    yield "gpt2_block_stack", Gpt2Stack, lambda: [torch.randint(0, 5000, (1, 96), dtype=torch.int64)], 13
    yield "conv1d_audio", Conv1dAudio, lambda: [torch.randn(1, 16000)], 13
    yield "tcn", Tcn, lambda: [torch.randn(1, 64, 400)], 13


def export(name, cls, mk_inputs, opset):
    torch.manual_seed(0)
    m = cls().eval()
    ins = mk_inputs()
    with torch.no_grad():
        outs = m(*ins)
    if not isinstance(outs, (tuple, list)):
        outs = [outs]
    for o in outs:
        a = o.numpy()
        assert np.isfinite(a).all(), f"{name}: non-finite output"
        assert a.std() > 1e-3, f"{name}: degenerate output std {a.std()}"
    d = os.path.join(OUT, name)
    td = os.path.join(d, "test_data_set_0")
    os.makedirs(td, exist_ok=True)
    in_names = [f"input_{i}" for i in range(len(ins))]
    out_names = [f"output_{i}" for i in range(len(outs))]
    torch.onnx.export(m, tuple(ins), os.path.join(d, "model.onnx"), opset_version=opset,
                      input_names=in_names, output_names=out_names, do_constant_folding=True)
    onnx.checker.check_model(os.path.join(d, "model.onnx"))
    for i, (n, t) in enumerate(zip(in_names, ins)):
        with open(os.path.join(td, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy(), n).SerializeToString())
    for i, (n, t) in enumerate(zip(out_names, outs)):
        with open(os.path.join(td, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy(), n).SerializeToString())
    ops = sorted({n.op_type for n in onnx.load(os.path.join(d, "model.onnx")).graph.node})
    print(f"{name}: outs {[tuple(o.shape) for o in outs]} std "
          f"{[float(o.std()) for o in outs]} ops {ops}")


if __name__ == "__main__":
    for name, cls, mk, opset in models():
        if not ONLY or name in ONLY:
            export(name, cls, mk, opset)
