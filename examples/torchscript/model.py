"""A small decoder written in plain PyTorch, in the pieces a torchscript job
trains: byte-level tokens with learned positions, pre-norm blocks of causal
self-attention and a GELU MLP, a head, and the next-token loss.

    scripts/export-torchscript examples/torchscript/model.py \\
        --out examples/torchscript/model
    chimera run -f examples/torchscript/job.yaml

The sizes here are the job's spec.model: numLayers, hiddenSize, vocabSize
and seqLength must match them.
"""

import math

import torch
import torch.nn.functional as F

VOCAB = 256  # byte-level text
HIDDEN = 64
HEADS = 4
LAYERS = 8
CONTEXT = 32


class Embedding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(VOCAB, HIDDEN)
        self.positions = torch.nn.Embedding(CONTEXT, HIDDEN)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.size(1), device=tokens.device)
        return self.tokens(tokens) + self.positions(positions)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # TorchScript reads attributes, not the module's globals.
        self.hidden = HIDDEN
        self.heads = HEADS
        self.scale = 1 / math.sqrt(HIDDEN // HEADS)
        self.attention_norm = torch.nn.LayerNorm(HIDDEN)
        self.qkv = torch.nn.Linear(HIDDEN, 3 * HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, HIDDEN)
        self.mlp_norm = torch.nn.LayerNorm(HIDDEN)
        self.up = torch.nn.Linear(HIDDEN, 4 * HIDDEN)
        self.down = torch.nn.Linear(4 * HIDDEN, HIDDEN)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = x.shape
        q, k, v = self.qkv(x).split(self.hidden, dim=2)
        # [batch, heads, tokens, head size]
        q = q.view(batch, tokens, self.heads, -1).transpose(1, 2)
        k = k.view(batch, tokens, self.heads, -1).transpose(1, 2)
        v = v.view(batch, tokens, self.heads, -1).transpose(1, 2)
        scores = q @ k.transpose(2, 3) * self.scale
        future = torch.ones(tokens, tokens, dtype=torch.bool,
                            device=x.device).triu(1)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        mixed = (weights @ v).transpose(1, 2).reshape(batch, tokens,
                                                      self.hidden)
        return self.out(mixed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x))
        return x + self.down(F.gelu(self.up(self.mlp_norm(x))))


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(HIDDEN)
        self.logits = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(self.norm(x))


class Loss(torch.nn.Module):
    def forward(self, logits: torch.Tensor,
                targets: torch.Tensor) -> torch.Tensor:
        # Summed over the tokens: the pipeline divides by the batch's count.
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                               reduction="sum")


def chimera_model():
    torch.manual_seed(1)
    return {"embedding": Embedding(),
            "blocks": [Block() for _ in range(LAYERS)],
            "head": Head(), "loss": Loss()}
