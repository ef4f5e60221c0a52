"""The decoupled-GRPO loss on stored candidates (docs/grpo.md, "The loss").

For candidate i with completion tokens t = 1..T_i, advantage A_i and loss
weight w_i:

    r_it = exp(logp_theta(y_it) - logp_behaviour(y_it))
    s_it = min(r_it * A_i, clip(r_it, 1 - eps_low, 1 + eps_high) * A_i)
    k_it = exp(logp_ref - logp_theta) - (logp_ref - logp_theta) - 1   (k3)
    l_it = -s_it + beta * k_it
    L_i  = (1 / T_i) * sum_t l_it                      (token mean per candidate)
    L    = sum_i w_i * L_i / sum_i w_i                 (weighted mean over candidates)

The sums over i run over the batch's candidates except those of zero-variance
groups (advantage 0: no signal, and no KL either), so adding them to a batch
changes neither the loss nor its gradient. Candidates with finish_reason
"length" are kept as they are (truncated="keep", the default) or left out of
both sums too (truncated="drop"). A batch with no candidate left has loss 0.
"""

import dataclasses
from typing import Optional

import torch

from .data import Batch


@dataclasses.dataclass
class GRPOLossConfig:
    """Options of grpo_loss."""

    eps_low: float = 0.2
    eps_high: float = 0.2
    beta: float = 0.0  # coefficient of the k3 KL to the reference policy
    truncated: str = "keep"  # "keep" | "drop": candidates that stopped at the length limit

    def __post_init__(self):
        if self.truncated not in ("keep", "drop"):
            raise ValueError("truncated=%r, want 'keep' or 'drop'" % self.truncated)


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Log-probabilities of tokens[:, 1:] under logits[:, :-1]: [B, T-1]."""
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    return logp.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)


def completion_logprobs(hidden: torch.Tensor, head, batch: Batch) -> torch.Tensor:
    """Log-probabilities of the completion tokens, [B, T-1] like token_logprobs (0 off the mask).

    hidden is the model's last hidden states of batch.tokens ([B, T, H]) and head its output
    layer ([M, H] -> [M, vocab]); the output layer runs only at the M completion positions, so
    long prompts cost no [T, vocab] logits.
    """
    b, t = batch.mask.nonzero(as_tuple=True)
    logits = head(hidden[b, t])
    lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, batch.tokens[b, t + 1].unsqueeze(-1)).squeeze(-1)
    return torch.zeros(batch.mask.shape, dtype=lp.dtype).index_put((b, t), lp)


def grpo_loss(
    logp_new: torch.Tensor,
    batch: Batch,
    config: Optional[GRPOLossConfig] = None,
    logp_ref: Optional[torch.Tensor] = None,
):
    """The loss of a batch and per-candidate statistics.

    logp_new is the trained policy's log-probabilities of the batch's tokens
    ([B, T-1], token_logprobs); logp_ref the reference policy's, needed when
    config.beta > 0. Returns (loss, stats): stats holds the per-candidate
    losses L_i ("per_candidate"), the weights used ("weights") and the share
    of completion tokens whose ratio was clipped ("clip_fraction").
    """
    cfg = config or GRPOLossConfig()
    mask = batch.mask.to(torch.float64)
    new = logp_new.to(torch.float64)
    ratio = torch.exp(new - batch.behaviour_logprobs) * mask + (1 - mask)
    adv = batch.advantages.unsqueeze(1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - cfg.eps_low, 1 + cfg.eps_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    if cfg.beta != 0:
        if logp_ref is None:
            raise ValueError("beta > 0 needs logp_ref")
        d = logp_ref.to(torch.float64) - new
        per_token = per_token + cfg.beta * (torch.exp(d) - d - 1)
    tokens = mask.sum(dim=1)
    per_candidate = (per_token * mask).sum(dim=1) / tokens.clamp(min=1)
    weights = torch.where(batch.zero_variance, torch.zeros_like(batch.loss_weights), batch.loss_weights)
    if cfg.truncated == "drop":
        weights = torch.where(batch.truncated, torch.zeros_like(weights), weights)
    total = weights.sum()
    if total <= 0:
        loss = (per_candidate * 0).sum()  # nothing to train on: zero, still a graph
    else:
        loss = (weights * per_candidate).sum() / total
    was_clipped = ((ratio < 1 - cfg.eps_low) | (ratio > 1 + cfg.eps_high)).to(torch.float64) * mask
    stats = {
        "per_candidate": per_candidate.detach(),
        "weights": weights,
        "clip_fraction": float(was_clipped.sum() / mask.sum().clamp(min=1)),
    }
    return loss, stats
