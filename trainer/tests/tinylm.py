"""A tiny causal language model over the real vocabulary, for the tests."""

import torch

import context  # noqa: F401  (trainer/ on sys.path)
from codapipe_trainer.data import START_TOKEN

# VOCAB is the size of Qwen2.5's tokenizer (151643 regular tokens and the
# special ones): every simulated token id and START_TOKEN are below it.
VOCAB = 151665
assert START_TOKEN < VOCAB


class TinyLM(torch.nn.Module):
    """Embedding (dim 16) -> one GRU layer (dim 16) -> logits over vocab (default VOCAB) token ids."""

    def __init__(self, seed: int, dim: int = 16, hidden: int = 16, vocab: int = VOCAB):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.embed = torch.nn.Embedding(vocab, dim)
        self.gru = torch.nn.GRU(dim, hidden, batch_first=True)
        self.head = torch.nn.Linear(hidden, vocab)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)

    def hidden(self, tokens: torch.Tensor) -> torch.Tensor:
        """The last hidden states, [B, T, hidden]."""
        h, _ = self.gru(self.embed(tokens))
        return h

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits over the vocabulary at every position, [B, T, vocab]."""
        return self.head(self.hidden(tokens))
