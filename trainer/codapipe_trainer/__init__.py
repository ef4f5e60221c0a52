"""codapipe's reference trainer side of the decoupled-GRPO contract.

A reader of an ``advantage export --format jsonl`` set (:mod:`.data`) and the
decoupled-GRPO loss on the stored candidates (:mod:`.loss`). Standard library
and PyTorch only. See trainer/README.md and docs/grpo.md ("The loss").
"""

from .data import Candidate, Export, ManifestError, collate, load_export
from .loss import GRPOLossConfig, completion_logprobs, grpo_loss, token_logprobs

__all__ = [
    "Candidate",
    "Export",
    "ManifestError",
    "collate",
    "load_export",
    "GRPOLossConfig",
    "completion_logprobs",
    "grpo_loss",
    "token_logprobs",
]
