"""PyTorch reference of Loom's Llama family, written the usual way (autograd).

RMSNorm, SwiGLU MLP, rotary positions in the rotate-half form (Hugging Face's
LlamaRotaryEmbedding / apply_rotary_pos_emb), grouped-query attention through
repeat_kv, no biases, untied lm_head unless tie_embeddings. Parameters carry
Loom's canonical names (model/layout.h): the k and v projections are one
[2*KV*hd, C] "attn.kv" matrix (k rows first) and the gate and up projections
one [2F, C] "mlp.c_fc" matrix (gate rows first).

config: the GPT keys ("vocab", "max_seq", "layers", "heads", "hidden") plus
"kv_heads", "ffn_hidden", "rope_theta", "norm_eps", "tie_embeddings", and
optionally "rope_scaling" (Llama 3.1's: factor, low_freq_factor,
high_freq_factor, original_max_seq).
"""

import math
from collections import OrderedDict

import numpy as np
import torch
import torch.nn.functional as F

import torch_gpt


def parse_config(config):
    vocab, max_seq, layers, heads, hidden = torch_gpt.parse_config(config)
    kv = int(config["kv_heads"])
    ffn = int(config["ffn_hidden"])
    if kv <= 0 or heads % kv:
        raise ValueError(f"kv_heads ({kv}) must divide heads ({heads})")
    if ffn <= 0:
        raise ValueError(f"ffn_hidden must be positive, got {ffn}")
    return (vocab, max_seq, layers, heads, hidden, kv, ffn,
            float(config["rope_theta"]), float(config["norm_eps"]),
            bool(config["tie_embeddings"]))


def rotary_frequencies(hd, theta, scaling=None):
    """theta^(-2j/hd) for j < hd/2, float64; with `scaling` (a dict of factor, low_freq_factor,
    high_freq_factor, original_max_seq: Llama 3.1's "llama3" rope_scaling) each frequency is
    judged by its wavelength 2 pi / f against the original context: short wavelengths (under
    original / high_freq_factor) stay, long ones (over original / low_freq_factor) are slowed
    by the factor, and the band between blends the two by where the wavelength lies in it."""
    freqs = [theta ** (-j / hd) for j in range(0, hd, 2)]
    if scaling:
        factor = float(scaling["factor"])
        low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        context = float(scaling["original_max_seq"])
        scaled = []
        for f in freqs:
            wavelength = 2 * math.pi / f
            if wavelength < context / high:
                scaled.append(f)
            elif wavelength > context / low:
                scaled.append(f / factor)
            else:
                blend = (context / wavelength - low) / (high - low)
                scaled.append(blend * f + (1 - blend) * f / factor)
        freqs = scaled
    return torch.tensor(freqs, dtype=torch.float64)


def expected_shapes(config):
    """Ordered dict name -> shape: Loom's Llama parameters in storage order."""
    vocab, _, layers, heads, c, kv, ffn, _, _, tied = parse_config(config)
    hd = c // heads
    shapes = OrderedDict([("wte", (vocab, c))])
    for layer in range(layers):
        p = f"h.{layer}."
        shapes[p + "ln_1.weight"] = (c,)
        shapes[p + "attn.q.weight"] = (heads * hd, c)
        shapes[p + "attn.kv.weight"] = (2 * kv * hd, c)
        shapes[p + "attn.c_proj.weight"] = (c, heads * hd)
        shapes[p + "ln_2.weight"] = (c,)
        shapes[p + "mlp.c_fc.weight"] = (2 * ffn, c)
        shapes[p + "mlp.c_proj.weight"] = (c, ffn)
    shapes["ln_f.weight"] = (c,)
    if not tied:
        shapes["lm_head.weight"] = (vocab, c)
    return shapes


class RMSNorm(torch.nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(torch.nn.Module):
    def __init__(self, hidden, heads, kv_heads, theta, scaling=None):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, hidden // heads
        self.inv_freq = rotary_frequencies(self.hd, theta, scaling)
        self.q = torch.nn.Linear(hidden, heads * self.hd, bias=False)
        self.kv = torch.nn.Linear(hidden, 2 * kv_heads * self.hd, bias=False)
        self.c_proj = torch.nn.Linear(heads * self.hd, hidden, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        hd = self.hd
        q = self.q(x).view(b, t, self.heads, hd).transpose(1, 2)
        k, v = self.kv(x).split(self.kv_heads * hd, dim=2)
        k = k.view(b, t, self.kv_heads, hd).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, hd).transpose(1, 2)
        freqs = torch.outer(torch.arange(t, dtype=torch.float64), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads          # repeat_kv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        future = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = F.softmax(att.masked_fill(future, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, self.heads * hd)
        return self.c_proj(y)


class MLP(torch.nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.ffn = ffn
        self.c_fc = torch.nn.Linear(hidden, 2 * ffn, bias=False)
        self.c_proj = torch.nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        gate, up = self.c_fc(x).split(self.ffn, dim=-1)
        return self.c_proj(F.silu(gate) * up)


class Block(torch.nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn, theta, eps, scaling=None):
        super().__init__()
        self.ln_1 = RMSNorm(hidden, eps)
        self.attn = Attention(hidden, heads, kv_heads, theta, scaling)
        self.ln_2 = RMSNorm(hidden, eps)
        self.mlp = MLP(hidden, ffn)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Llama(torch.nn.Module):
    """The model; named_parameters() yields Loom's names in Loom's order."""

    def __init__(self, config, tensors, dtype=torch.float32):
        super().__init__()
        (self.vocab, self.max_seq, layers, heads, hidden, kv, ffn, theta, eps,
         self.tied) = parse_config(config)
        self.wte = torch.nn.Parameter(torch.empty(self.vocab, hidden))
        scaling = config.get("rope_scaling")
        self.h = torch.nn.ModuleList(Block(hidden, heads, kv, ffn, theta, eps, scaling)
                                     for _ in range(layers))
        self.ln_f = RMSNorm(hidden, eps)
        if not self.tied:
            self.lm_head = torch.nn.Linear(hidden, self.vocab, bias=False)
        self.to(dtype)
        torch_gpt.GPT.load_tensors(self, tensors)

    @property
    def dtype(self):
        return self.wte.dtype

    def named_params(self):
        return OrderedDict(self.named_parameters())

    def adamw_param_groups(self, weight_decay):
        return torch_gpt.GPT.adamw_param_groups(self, weight_decay)

    def forward(self, idx, targets=None):
        idx = idx.long()
        x = self.wte[idx]
        for block in self.h:
            x = block(x)
        head = self.wte if self.tied else self.lm_head.weight
        logits = self.ln_f(x) @ head.t()
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                               targets.long().reshape(-1))
        return logits, loss
