"""The PyTorch peer of dtrain's `gpt` model for bench/lm_vs_pytorch.py: a GPT-2-style causal
language model as nanoGPT builds it, written from the architecture, with nanoGPT's names (so that
its state dict names are dtrain's safetensors names: transformer.h.0.attn.c_attn.weight ...),
GPT-2's initialisation, and nanoGPT's AdamW grouping and learning-rate schedule; Lion (which
PyTorch lacks) as its paper's reference code computes it, with the same grouping.

    model = GPT(vocab=65, block=64, n_layer=4, n_head=4, n_embd=128)
    opt = adamw(model, lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
    lr = cosine_lr(it, lr=1e-3, min_lr=1e-4, warmup=100, iterations=2000)
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    """LayerNorm over the last axis, eps 1e-5, with an optional bias (torch 1.13's nn.LayerNorm
    always has one; GPT configs turn it off with `bias: false`)."""

    def __init__(self, width, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: one fused projection to q, k, v (c_attn, C → 3C), the
    masked softmax of q·kᵀ/√d per head (explicitly: F.scaled_dot_product_attention arrived in
    torch 2.0; newer torch takes its fused kernel), the heads side by side, c_proj (C → C)."""

    def __init__(self, block, n_head, n_embd, dropout, bias):
        super().__init__()
        assert n_embd % n_head == 0, "n_embd must be a multiple of n_head"
        self.n_head, self.dropout = n_head, dropout
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.fused = hasattr(F, "scaled_dot_product_attention")
        if not self.fused:  # lower triangle: position t sees positions <= t
            self.register_buffer("mask", torch.tril(torch.ones(block, block, dtype=torch.bool))
                                 .view(1, 1, block, block), persistent=False)

    def forward(self, x):
        n, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        # [N, T, C] → [N, heads, T, C/heads]
        q, k, v = (z.view(n, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training
                                               else 0.0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
            att = self.attn_dropout(F.softmax(att, dim=-1))
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(n, t, c)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """c_fc (C → 4C), GELU (the exact, erf form), c_proj (4C → C), dropout."""

    def __init__(self, n_embd, dropout, bias):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, block, n_head, n_embd, dropout, bias):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, bias)
        self.attn = CausalSelfAttention(block, n_head, n_embd, dropout, bias)
        self.ln_2 = LayerNorm(n_embd, bias)
        self.mlp = MLP(n_embd, dropout, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Token + learned position embedding, dropout, n_layer blocks, ln_f, lm_head (no bias; its
    weight is wte's with tie_weights). Token ids [N, T] in, logits [N, T, vocab] out."""

    def __init__(self, vocab, block, n_layer, n_head, n_embd, dropout=0.0, bias=True,
                 tie_weights=True):
        super().__init__()
        self.block = block
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n_embd),
            wpe=nn.Embedding(block, n_embd),
            drop=nn.Dropout(dropout),
            h=nn.ModuleList(Block(block, n_head, n_embd, dropout, bias) for _ in range(n_layer)),
            ln_f=LayerNorm(n_embd, bias)))
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        if tie_weights:
            self.lm_head.weight = self.transformer.wte.weight
        # GPT-2's initialisation: every linear and embedding weight N(0, 0.02), biases 0, and
        # the projections into the residual stream (c_proj) N(0, 0.02/√(2·n_layer)), one per
        # residual addition, so that the stream's variance does not grow with depth.
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def forward(self, ids):
        t = ids.size(1)
        assert t <= self.block, f"sequence of {t} tokens, block is {self.block}"
        pos = torch.arange(t, dtype=torch.long, device=ids.device)
        x = self.transformer.drop(self.transformer.wte(ids) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def adamw(model, lr, betas, eps, weight_decay):
    """torch.optim.AdamW with weight decay on the parameters of two or more axes (the matrices
    and embeddings) and none on biases and LayerNorm gains, as nanoGPT groups them."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), eps=eps)


class Lion(torch.optim.Optimizer):
    """Lion (Chen et al. 2023, its Program 1) with torch._foreach ops, as a user without a Lion in
    PyTorch writes it: w ← w·(1 − lr·wd) − lr·sign(β1·m + (1 − β1)·g); m ← β2·m + (1 − β2)·g."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            moments = [self.state[p].setdefault("exp_avg", torch.zeros_like(p)) for p in params]
            lr, (beta1, beta2), wd = group["lr"], group["betas"], group["weight_decay"]
            if wd:
                torch._foreach_mul_(params, 1 - lr * wd)
            update = torch._foreach_mul(moments, beta1)
            torch._foreach_add_(update, grads, alpha=1 - beta1)
            torch._foreach_add_(params, [u.sign_() for u in update], alpha=-lr)
            torch._foreach_mul_(moments, beta2)
            torch._foreach_add_(moments, grads, alpha=1 - beta2)


def lion(model, lr, betas, weight_decay):
    """Lion with adamw()'s grouping: weight decay on the parameters of two or more axes only."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return Lion(groups, lr=lr, betas=betas)


def cosine_lr(it, lr, min_lr, warmup, iterations):
    """nanoGPT's get_lr for iteration `it` (0-based): linear warm-up lr·(it+1)/(warmup+1), then
    a cosine from lr down to min_lr at `iterations` (nanoGPT's lr_decay_iters = max_iters), then
    min_lr."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > iterations:
        return min_lr
    ratio = (it - warmup) / max(1, iterations - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)
