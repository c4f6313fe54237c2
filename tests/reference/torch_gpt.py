"""Explicit PyTorch reference implementation of Loom's GPT model.

This module is the "ground truth" that Loom's C++ trainer is checked against
(see check_reference.py) and the model used by the PyTorch side of the
benchmark (bench/torch_train_step.py).  It deliberately spells every
operation out instead of relying on a model library, so that the math the
C++ side must reproduce is visible in one place:

  * GPT-2 style pre-LN transformer with learned positional embeddings,
  * causal multi-head attention with an explicit mask,
  * GELU (tanh approximation) MLP with a 4x expansion,
  * output projection tied to the token embedding (no bias),
  * mean cross-entropy over all B*T tokens,
  * torch.optim.AdamW with decay only on tensors of rank >= 2.

It also contains a tiny dependency-free safetensors reader/writer, because
the `safetensors` Python package is not available in the test environment.
"""

import json
import math
import struct
from collections import OrderedDict

import numpy as np
import torch
import torch.nn.functional as F

LAYER_NORM_EPS = 1e-5

# ---------------------------------------------------------------------------
# safetensors I/O
# ---------------------------------------------------------------------------

# safetensors dtype tag -> little-endian numpy dtype.
_ST_TO_NP = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
# numpy dtype (native byte order) -> safetensors dtype tag, for writing.
_NP_TO_ST = {np.dtype(v.newbyteorder("=")): k for k, v in _ST_TO_NP.items()}

# Upper bound on the JSON header, to fail fast on files that are not
# safetensors at all instead of trying to allocate garbage sizes.
_MAX_HEADER_BYTES = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    """Raised when a file is not a well-formed safetensors file."""


def read_safetensors(path, with_metadata=False):
    """Read every tensor of a safetensors file into numpy arrays.

    Returns an ordered dict name -> np.ndarray (in header order, each array
    an independent, writable copy in native byte order).  BF16 tensors are
    widened to float32 since numpy has no bfloat16.  With
    with_metadata=True, returns (tensors, metadata) where metadata is the
    optional "__metadata__" str->str dict (empty if absent).
    """
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise SafetensorsError(f"{path}: file too short ({len(blob)} bytes)")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if header_len > min(_MAX_HEADER_BYTES, len(blob) - 8):
        raise SafetensorsError(
            f"{path}: header length {header_len} exceeds file size")
    try:
        header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: invalid JSON header: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")

    data = memoryview(blob)[8 + header_len:]
    metadata = header.pop("__metadata__", None) or {}
    tensors = OrderedDict()
    for name, info in header.items():
        try:
            tag = info["dtype"]
            shape = tuple(int(d) for d in info["shape"])
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError(f"{path}: malformed header entry for "
                                   f"tensor '{name}'") from None
        if not 0 <= begin <= end <= len(data):
            raise SafetensorsError(
                f"{path}: tensor '{name}' data_offsets [{begin}, {end}] "
                f"outside data section of {len(data)} bytes")
        count = int(np.prod(shape, dtype=np.int64))
        if tag == "BF16":
            # bfloat16 is the upper half of a float32: shift into place.
            itemsize, np_dtype = 2, np.dtype("<u2")
        elif tag in _ST_TO_NP:
            np_dtype = _ST_TO_NP[tag]
            itemsize = np_dtype.itemsize
        else:
            raise SafetensorsError(
                f"{path}: tensor '{name}' has unsupported dtype '{tag}'")
        if end - begin != count * itemsize:
            raise SafetensorsError(
                f"{path}: tensor '{name}' has {end - begin} bytes, expected "
                f"{count * itemsize} for {tag}{list(shape)}")
        arr = np.frombuffer(data[begin:end], dtype=np_dtype, count=count)
        if tag == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        else:
            arr = arr.astype(np_dtype.newbyteorder("="), copy=True)
        tensors[name] = arr.reshape(shape)
    if with_metadata:
        return tensors, dict(metadata)
    return tensors


def write_safetensors(path, tensors, metadata=None):
    """Write a dict name -> array-like (numpy or torch) as safetensors.

    Tensors are stored in the dict's order, each in its own dtype (which must
    be one of the dtypes in _ST_TO_NP; convert beforehand if needed).  The
    header is padded with spaces so the data section starts 8-byte aligned,
    as the reference implementation does.
    """
    header = OrderedDict()
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks = []
    offset = 0
    for name, value in tensors.items():
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
        arr = np.asarray(value)
        native = arr.dtype.newbyteorder("=")
        if native not in _NP_TO_ST:
            raise SafetensorsError(
                f"cannot write tensor '{name}' of dtype {arr.dtype}")
        raw = np.ascontiguousarray(arr, dtype=native.newbyteorder("<")) \
            .tobytes()
        header[name] = {
            "dtype": _NP_TO_ST[native],
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        chunks.append(raw)
        offset += len(raw)
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for raw in chunks:
            f.write(raw)


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------

CONFIG_KEYS = ("vocab", "max_seq", "layers", "heads", "hidden")


def parse_config(config):
    """Validate a model config dict and return (V, max_seq, L, H, C)."""
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise KeyError(f"model config is missing keys: {', '.join(missing)}")
    vocab, max_seq, layers, heads, hidden = (int(config[k])
                                             for k in CONFIG_KEYS)
    if min(vocab, max_seq, layers, heads, hidden) <= 0:
        raise ValueError(f"model config values must be positive: {config}")
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) not divisible by heads ({heads})")
    return vocab, max_seq, layers, heads, hidden


def expected_shapes(config):
    """Ordered dict of every parameter name -> shape for a config.

    This is the canonical parameter naming and order shared with Loom.
    """
    vocab, max_seq, layers, _, c = parse_config(config)
    shapes = OrderedDict([("wte", (vocab, c)), ("wpe", (max_seq, c))])
    for layer in range(layers):
        p = f"h.{layer}."
        shapes[p + "ln_1.weight"] = (c,)
        shapes[p + "ln_1.bias"] = (c,)
        shapes[p + "attn.c_attn.weight"] = (3 * c, c)
        shapes[p + "attn.c_attn.bias"] = (3 * c,)
        shapes[p + "attn.c_proj.weight"] = (c, c)
        shapes[p + "attn.c_proj.bias"] = (c,)
        shapes[p + "ln_2.weight"] = (c,)
        shapes[p + "ln_2.bias"] = (c,)
        shapes[p + "mlp.c_fc.weight"] = (4 * c, c)
        shapes[p + "mlp.c_fc.bias"] = (4 * c,)
        shapes[p + "mlp.c_proj.weight"] = (c, 4 * c)
        shapes[p + "mlp.c_proj.bias"] = (c,)
    shapes["ln_f.weight"] = (c,)
    shapes["ln_f.bias"] = (c,)
    return shapes


def gpt2_init(config, seed=0):
    """GPT-2 style initial weights as a dict name -> float32 np.ndarray.

    Embeddings and Linear weights ~ N(0, 0.02); the residual output
    projections (attn.c_proj, mlp.c_proj) ~ N(0, 0.02 / sqrt(2 * layers));
    biases 0; LayerNorm weight 1, bias 0.
    """
    layers = parse_config(config)[2]
    gen = torch.Generator().manual_seed(seed)
    proj_std = 0.02 / math.sqrt(2 * layers)
    tensors = OrderedDict()
    for name, shape in expected_shapes(config).items():
        if name.endswith(".bias"):
            t = torch.zeros(shape)
        elif "ln_" in name:                     # LayerNorm weight
            t = torch.ones(shape)
        else:
            std = proj_std if name.endswith("c_proj.weight") else 0.02
            t = torch.randn(shape, generator=gen) * std
        tensors[name] = t.numpy().astype(np.float32)
    return tensors


class CausalSelfAttention(torch.nn.Module):
    """Multi-head causal self-attention with a fused q|k|v projection."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = torch.nn.Linear(hidden, 3 * hidden)
        self.c_proj = torch.nn.Linear(hidden, hidden)

    def forward(self, x):
        b, t, c = x.shape
        hd = c // self.heads
        # Columns of c_attn's output are [q | k | v], each C wide; inside each
        # of them head h owns columns h*hd .. (h+1)*hd-1.
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2)
                   for z in (q, k, v))                       # [B, H, T, hd]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)      # [B, H, T, T]
        # Mask out keys j > i (the future) before the softmax.
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(future, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)       # merge heads
        return self.c_proj(y)


class MLP(torch.nn.Module):
    """Position-wise feed-forward block: C -> 4C -> GELU(tanh) -> C."""

    def __init__(self, hidden):
        super().__init__()
        self.c_fc = torch.nn.Linear(hidden, 4 * hidden)
        self.c_proj = torch.nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(torch.nn.Module):
    """Pre-LN transformer block."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)
        self.attn = CausalSelfAttention(hidden, heads)
        self.ln_2 = torch.nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)
        self.mlp = MLP(hidden)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(torch.nn.Module):
    """GPT-2 style language model with tied input/output embeddings.

    config:  dict with "vocab", "max_seq", "layers", "heads", "hidden"
             (extra keys are ignored).
    tensors: dict name -> array-like holding every parameter named as in
             expected_shapes(); values are copied and cast to `dtype`.
    dtype:   torch.float32 or torch.float64.

    The submodule layout is chosen so that named_parameters() yields exactly
    the canonical names ("wte", "h.0.attn.c_attn.weight", ...).
    """

    def __init__(self, config, tensors, dtype=torch.float32):
        super().__init__()
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"unsupported dtype {dtype}")
        (self.vocab, self.max_seq, layers, heads,
         hidden) = parse_config(config)
        self.wte = torch.nn.Parameter(torch.empty(self.vocab, hidden))
        self.wpe = torch.nn.Parameter(torch.empty(self.max_seq, hidden))
        self.h = torch.nn.ModuleList(Block(hidden, heads)
                                     for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)
        self.to(dtype)
        self.load_tensors(tensors)

    def load_tensors(self, tensors):
        """Copy every parameter from a dict name -> array-like."""
        params = self.named_params()
        missing = [n for n in params if n not in tensors]
        if missing:
            raise KeyError(f"missing parameter tensors: {', '.join(missing)}")
        with torch.no_grad():
            for name, p in params.items():
                src = torch.as_tensor(np.asarray(tensors[name]))
                if tuple(src.shape) != tuple(p.shape):
                    raise ValueError(
                        f"tensor '{name}' has shape {list(src.shape)}, "
                        f"expected {list(p.shape)}")
                p.copy_(src.to(p.dtype))

    @property
    def dtype(self):
        return self.wte.dtype

    def named_params(self):
        """Ordered dict canonical name -> Parameter."""
        return OrderedDict(self.named_parameters())

    def adamw_param_groups(self, weight_decay):
        """AdamW param groups: decay tensors of rank >= 2 only.

        That is wte, wpe and every Linear weight; biases and LayerNorm
        weights/biases get no weight decay.
        """
        decay = [p for p in self.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.parameters() if p.dim() < 2]
        return [{"params": decay, "weight_decay": weight_decay},
                {"params": no_decay, "weight_decay": 0.0}]

    def forward(self, idx, targets=None):
        """idx: int tensor [B, T].  Returns logits [B, T, V], and the mean
        cross-entropy loss over all B*T positions if targets are given."""
        _, t = idx.shape
        if t > self.max_seq:
            raise ValueError(f"sequence length {t} > max_seq {self.max_seq}")
        idx = idx.long()
        x = self.wte[idx] + self.wpe[:t]
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.t()
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                               targets.long().reshape(-1))
        return logits, loss


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------

def make_optimizer(model, lr, betas, eps, weight_decay):
    """torch.optim.AdamW over model.adamw_param_groups()."""
    return torch.optim.AdamW(model.adamw_param_groups(weight_decay), lr=lr,
                             betas=tuple(betas), eps=eps)


def train_steps(model, inputs, targets, steps, lr, betas, eps, weight_decay,
                grad_clip, autocast_bf16=False):
    """Run `steps` full training steps on one fixed batch.

    Each step: zero grads, forward, loss, backward, (after step 1: snapshot
    the gradients, before clipping), clip_grad_norm_ to grad_clip if
    grad_clip > 0, AdamW step with constant hyper-parameters.

    autocast_bf16: run the forward under torch.autocast("cpu", bfloat16)
    (the model must be float32): PyTorch's CPU mixed precision, the
    counterpart of Loom's `precision: bf16`.

    Returns (losses, grads, final):
      losses: list of python floats, the loss of each step before its update;
      grads:  dict name -> np.ndarray, step-1 gradients (unclipped);
      final:  dict name -> np.ndarray, parameters after the last step.
    """
    inputs = torch.as_tensor(np.asarray(inputs)).long()
    targets = torch.as_tensor(np.asarray(targets)).long()
    params = model.named_params()
    optimizer = make_optimizer(model, lr, betas, eps, weight_decay)
    losses, grads = [], {}
    model.train()
    for step in range(1, steps + 1):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=autocast_bf16):
            _, loss = model(inputs, targets)
        loss.backward()
        losses.append(loss.item())
        if step == 1:
            grads = {n: p.grad.detach().numpy().copy()
                     for n, p in params.items()}
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
    final = {n: p.detach().numpy().copy() for n, p in params.items()}
    return losses, grads, final
