"""A small model in pieces for scripts/export-torchscript, and pieces that
break the TorchScript modules' contract, one function each (--function)."""

import torch
import torch.nn.functional as F

VOCAB = 16
HIDDEN = 8
BLOCKS = 3


class Embedding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(VOCAB, HIDDEN)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.tokens(tokens)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(HIDDEN)
        self.mlp = torch.nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.mlp(self.norm(x)))


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.out = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(x)


class Loss(torch.nn.Module):
    def forward(self, logits: torch.Tensor,
                targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                               reduction="sum")


class PooledBlock(Block):
    """Returns [batch, hidden]: the tokens averaged away."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x).mean(dim=1)


class OneHotEmbedding(torch.nn.Module):
    """No parameters: nothing of it trains."""

    def __init__(self):
        super().__init__()
        self.width = HIDDEN

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.one_hot(tokens, self.width).double()


class PerTokenLoss(Loss):
    """Every token's loss, not their sum."""

    def forward(self, logits: torch.Tensor,
                targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                               reduction="none")


def chimera_model(blocks: int = BLOCKS):
    torch.manual_seed(0)
    return {"embedding": Embedding(),
            "blocks": [Block() for _ in range(blocks)],
            "head": Head(), "loss": Loss()}


def eight_blocks():
    """The model for pipelines of up to eight stages."""
    return chimera_model(8)


def with_pooled_block():
    pieces = chimera_model()
    pieces["blocks"][1] = PooledBlock()
    return pieces


def with_one_hot_embedding():
    pieces = chimera_model()
    pieces["embedding"] = OneHotEmbedding()
    return pieces


def with_per_token_loss():
    pieces = chimera_model()
    pieces["loss"] = PerTokenLoss()
    return pieces


if __name__ == "__main__":
    # scripted_model.py CLASS PATH: one piece, scripted and saved as it is,
    # for pieces scripts/export-torchscript refuses.
    import sys
    torch.jit.script(globals()[sys.argv[1]]()).save(sys.argv[2])
