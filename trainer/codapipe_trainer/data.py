"""Reading an ``advantage export --format jsonl`` set.

The export's folder holds ``manifest.json``, ``candidates.jsonl`` (one JSON
object per stored candidate) and ``images/<sha256>.png``. :func:`load_export`
checks the data file's size and SHA-256 against the manifest before it reads a
line; an image is checked against its SHA-256 when it is read
(:meth:`Export.image_bytes`).
"""

import dataclasses
import hashlib
import json
import os
from typing import List, Optional, Sequence

import torch

# START_TOKEN is the id a candidate's completion is conditioned on when the
# export has no prompt token ids (prompt_token_ids null): Qwen2's
# <|endoftext|>, the first id above the regular tokens (simulated token ids are
# below it).
START_TOKEN = 151643


class ManifestError(ValueError):
    """The export does not match its manifest (a file missing or damaged)."""


@dataclasses.dataclass
class Candidate:
    """One stored candidate: one line of candidates.jsonl."""

    index: int
    trajectory_id: str
    step: int
    candidate: int
    group_id: str
    group_size: int
    prompt_token_ids: Optional[List[int]]
    completion: str
    completion_token_ids: Optional[List[int]]
    logprobs: Optional[List[float]]
    finish_reason: str
    reward: float
    advantage: float
    loss_weight: float
    zero_variance: bool
    label: str
    images: List[dict]
    messages: List[dict]
    raw: dict

    @property
    def has_tokens(self) -> bool:
        """Whether the candidate has token ids and behaviour log-probs, one per token."""
        return (
            self.completion_token_ids is not None
            and self.logprobs is not None
            and len(self.completion_token_ids) == len(self.logprobs)
            and len(self.completion_token_ids) > 0
        )


@dataclasses.dataclass
class Export:
    """An export: its folder, manifest and candidates, in file order."""

    folder: str
    manifest: dict
    candidates: List[Candidate]

    def trainable(self) -> List[Candidate]:
        """The candidates with token ids and behaviour log-probs."""
        return [c for c in self.candidates if c.has_tokens]

    def image_path(self, image: dict) -> str:
        """The absolute path of an image entry of a row (paths are relative to the folder)."""
        return os.path.join(self.folder, image["path"])

    def image_bytes(self, image: dict) -> bytes:
        """An image's PNG bytes, checked against its SHA-256."""
        with open(self.image_path(image), "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != image["sha256"]:
            raise ManifestError("image %s: content does not match its SHA-256" % image["path"])
        return data


def _sha256(path: str) -> (str, int):
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            n += len(chunk)
    return h.hexdigest(), n


def load_export(folder: str) -> Export:
    """Reads an export, checking its data file against the manifest."""
    with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    if manifest.get("format") != "jsonl":
        raise ManifestError("%s: format %r, want 'jsonl' (advantage export --format jsonl)" % (folder, manifest.get("format")))
    data = [f for f in manifest["files"] if not f["path"].startswith("images/")]
    if len(data) != 1:
        raise ManifestError("%s: %d data files in the manifest, want 1" % (folder, len(data)))
    entry = data[0]
    path = os.path.join(folder, entry["path"])
    digest, size = _sha256(path)
    if digest != entry["sha256"] or size != entry["bytes"]:
        raise ManifestError(
            "%s: %d bytes with SHA-256 %s, the manifest says %d bytes with SHA-256 %s"
            % (path, size, digest, entry["bytes"], entry["sha256"])
        )
    candidates = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            fields = {fd.name: r.get(fd.name) for fd in dataclasses.fields(Candidate) if fd.name != "raw"}
            candidates.append(Candidate(raw=r, **fields))
    if len(candidates) != entry["rows"]:
        raise ManifestError("%s: %d rows, the manifest says %d" % (path, len(candidates), entry["rows"]))
    return Export(folder=folder, manifest=manifest, candidates=candidates)


@dataclasses.dataclass
class Batch:
    """Candidates as tensors, right-padded.

    tokens[b] is the context (the prompt token ids, or START_TOKEN when the
    export has none) followed by the completion's token ids. Position t of the
    [B, T-1] tensors is the prediction of tokens[:, t+1]: mask is 1 where that
    token is a completion token, behaviour_logprobs holds its behaviour
    log-probability there (0 elsewhere).
    """

    tokens: torch.Tensor  # [B, T] int64
    mask: torch.Tensor  # [B, T-1] float
    behaviour_logprobs: torch.Tensor  # [B, T-1] float64
    advantages: torch.Tensor  # [B] float64
    loss_weights: torch.Tensor  # [B] float64
    truncated: torch.Tensor  # [B] bool: finish_reason == "length"
    zero_variance: torch.Tensor  # [B] bool: the candidate's group is zero-variance


def collate(candidates: Sequence[Candidate], start_token: int = START_TOKEN) -> Batch:
    """Builds a Batch of candidates that have token data (Candidate.has_tokens)."""
    seqs, contexts = [], []
    for c in candidates:
        if not c.has_tokens:
            raise ValueError("candidate %d (%s step %d) has no token ids or log-probs" % (c.index, c.trajectory_id, c.step))
        ctx = list(c.prompt_token_ids) if c.prompt_token_ids else [start_token]
        contexts.append(len(ctx))
        seqs.append(ctx + list(c.completion_token_ids))
    width = max(len(s) for s in seqs)
    B = len(seqs)
    tokens = torch.zeros(B, width, dtype=torch.long)
    mask = torch.zeros(B, width - 1)
    old = torch.zeros(B, width - 1, dtype=torch.float64)
    for b, (c, s, n) in enumerate(zip(candidates, seqs, contexts)):
        tokens[b, : len(s)] = torch.tensor(s, dtype=torch.long)
        k = len(c.completion_token_ids)
        mask[b, n - 1 : n - 1 + k] = 1
        old[b, n - 1 : n - 1 + k] = torch.tensor(c.logprobs, dtype=torch.float64)
    return Batch(
        tokens=tokens,
        mask=mask,
        behaviour_logprobs=old,
        advantages=torch.tensor([c.advantage for c in candidates], dtype=torch.float64),
        loss_weights=torch.tensor([c.loss_weight for c in candidates], dtype=torch.float64),
        truncated=torch.tensor([c.finish_reason == "length" for c in candidates]),
        zero_variance=torch.tensor([c.zero_variance for c in candidates]),
    )
