"""The decoupled-GRPO loss on the real token ids of the fixture, with a tiny LM."""

import dataclasses
import math
import unittest

import torch

import context
from codapipe_trainer import GRPOLossConfig, completion_logprobs, grpo_loss, load_export, token_logprobs
from codapipe_trainer import collate as _collate
from codapipe_trainer.data import START_TOKEN
from tinylm import TinyLM as _TinyLM

torch.set_num_threads(1)


# PROMPT_TAIL is how many of a prompt's last token ids the loss tests keep as
# the context: the fixture's prompts are ~1,700 tokens, and a GRU steps
# through them one at a time (minutes on CPU); the loss concerns the
# completion tokens only. test_data checks the full prompts' layout.
PROMPT_TAIL = 32


def _relabelled():
    """The fixture's trainable rows, prompts cut to PROMPT_TAIL, their token ids relabelled densely.

    The ids (the simulated planner's, in Qwen2.5's 151,665-token vocabulary) become 0..n-1 in
    their order, START_TOKEN among them: the sequences stay the fixture's, and the tiny model's
    output layer is n wide (826) instead of 151,665 (a 450 MB logit tensor per forward pass, which made
    these tests memory-bound). The loss does not look at what an id means.
    """
    rows = load_export(context.FIXTURE).trainable()
    rows = [dataclasses.replace(c, prompt_token_ids=c.prompt_token_ids[-PROMPT_TAIL:]) if c.prompt_token_ids else c for c in rows]
    ids = {START_TOKEN}
    for c in rows:
        ids.update(c.prompt_token_ids or [])
        ids.update(c.completion_token_ids)
    dense = {t: i for i, t in enumerate(sorted(ids))}
    rows = [
        dataclasses.replace(
            c,
            prompt_token_ids=[dense[t] for t in c.prompt_token_ids] if c.prompt_token_ids else c.prompt_token_ids,
            completion_token_ids=[dense[t] for t in c.completion_token_ids],
        )
        for c in rows
    ]
    return rows, len(dense), dense[START_TOKEN]


_ROWS, VOCAB, START = _relabelled()


def fixture():
    return list(_ROWS)


def collate(rows):
    """The trainer's collate, with START_TOKEN relabelled as the rows' ids are."""
    return _collate(rows, start_token=START)


def TinyLM(seed):
    """The tests' tiny LM over the relabelled vocabulary."""
    return _TinyLM(seed=seed, vocab=VOCAB)


def sample(rows):
    """Every candidate of a non-zero-variance group and the first six of zero-variance groups, in file order."""
    zero = [c for c in rows if c.zero_variance][:6]
    return [c for c in rows if not c.zero_variance or c in zero]


def logps(model, batch):
    """The model's log-probs of the batch's completion tokens (the output layer at those positions only)."""
    return completion_logprobs(model.hidden(batch.tokens), model.head, batch)


def loop_loss(rows, logp_new, logp_ref, cfg):
    """The loss written out token by token, from the rows themselves (not the batch's tensors)."""
    num = den = 0.0
    for i, c in enumerate(rows):
        if c.zero_variance or (cfg.truncated == "drop" and c.finish_reason == "length"):
            continue
        ctx = len(c.prompt_token_ids) if c.prompt_token_ids else 1
        total = 0.0
        for t, old in enumerate(c.logprobs):
            new = float(logp_new[i, ctx - 1 + t])
            ratio = math.exp(new - old)
            clipped = min(max(ratio, 1 - cfg.eps_low), 1 + cfg.eps_high)
            term = -min(ratio * c.advantage, clipped * c.advantage)
            if cfg.beta:
                d = float(logp_ref[i, ctx - 1 + t]) - new
                term += cfg.beta * (math.exp(d) - d - 1)
            total += term
        num += c.loss_weight * total / len(c.logprobs)
        den += c.loss_weight
    return num / den if den else 0.0


def mean_logprob(model, rows):
    """Mean over candidates of the mean log-prob of their completion tokens."""
    with torch.no_grad():
        b = collate(rows)
        lp = logps(model, b).double()
        return float(((lp * b.mask).sum(1) / b.mask.sum(1)).mean())


class TestLossParity(unittest.TestCase):
    def test_equals_a_plain_loop(self):
        rows = sample(fixture())
        batch = collate(rows)
        model, ref = TinyLM(seed=1), TinyLM(seed=2)
        with torch.no_grad():
            lp, lp_ref = logps(model, batch), logps(ref, batch)
        # The fixture's behaviour log-probs are the simulated planner's, far
        # from the tiny model's: the ratios reach both clip bounds.
        cases = [
            GRPOLossConfig(),
            GRPOLossConfig(eps_low=0.2, eps_high=0.28, beta=0.05),
            GRPOLossConfig(beta=0.1, truncated="drop"),
        ]
        truncated = [dataclasses.replace(c, finish_reason="length") if i % 3 == 0 else c for i, c in enumerate(rows)]
        for cfg in cases:
            for rs in (rows, truncated):
                with self.subTest(cfg=cfg, truncated=rs is truncated):
                    got, _ = grpo_loss(lp, collate(rs), cfg, logp_ref=lp_ref)
                    want = loop_loss(rs, lp, lp_ref, cfg)
                    self.assertAlmostEqual(float(got), want, delta=1e-6)
                    self.assertNotEqual(want, 0.0)

    def test_completion_logprobs_are_token_logprobs_on_the_mask(self):
        rows = fixture()
        short = min(rows, key=lambda c: len(c.completion_token_ids))
        batch = collate([rows[0], short])  # of two lengths: padding off the mask
        self.assertGreater(int((batch.mask == 0).sum()), 0)
        model = TinyLM(seed=6)
        with torch.no_grad():
            full = token_logprobs(model(batch.tokens), batch.tokens) * batch.mask
            got = logps(model, batch)
        self.assertLess(float((full - got).abs().max()), 1e-5)
        self.assertEqual(float(got[batch.mask == 0].abs().sum()), 0.0)

    def test_beta_needs_a_reference(self):
        rows = fixture()[:2]
        b = collate(rows)
        with self.assertRaises(ValueError):
            grpo_loss(torch.zeros(b.mask.shape), b, GRPOLossConfig(beta=0.1))
        with self.assertRaises(ValueError):
            GRPOLossConfig(truncated="cut")


class TestTraining(unittest.TestCase):
    def test_positive_candidates_rise_negative_fall(self):
        rows = [c for c in fixture() if not c.zero_variance]
        pos = [c for c in rows if c.advantage > 0]
        neg = [c for c in rows if c.advantage < 0]
        self.assertTrue(pos and neg)
        model = TinyLM(seed=3)
        batch = collate(rows)
        # The tiny model stands for the policy that sampled the candidates:
        # its own log-probs are the behaviour log-probs (the simulated
        # planner's, in the rows, belong to another model).
        with torch.no_grad():
            batch.behaviour_logprobs = logps(model, batch).double() * batch.mask
        before = mean_logprob(model, pos), mean_logprob(model, neg)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        for _ in range(3):
            opt.zero_grad()
            loss, _ = grpo_loss(logps(model, batch), batch)
            loss.backward()
            opt.step()
        after = mean_logprob(model, pos), mean_logprob(model, neg)
        self.assertGreater(after[0], before[0], "positive-advantage candidates' mean log-prob")
        self.assertLess(after[1], before[1], "negative-advantage candidates' mean log-prob")


class TestZeroVariance(unittest.TestCase):
    def grads(self, model, rows, cfg):
        model.zero_grad()
        b = collate(rows)
        loss, _ = grpo_loss(logps(model, b), b, cfg, logp_ref=logps(model, b).detach() - 0.5)
        loss.backward()
        return loss, [p.grad.clone() for p in model.parameters()]

    def test_contribute_nothing(self):
        rows = fixture()
        zero = [c for c in rows if c.zero_variance][:4]
        signal = [c for c in rows if not c.zero_variance][:4]
        self.assertTrue(zero and signal)
        model = TinyLM(seed=4)
        for cfg in (GRPOLossConfig(), GRPOLossConfig(beta=0.1)):
            with self.subTest(cfg=cfg, rows="zero-variance only"):
                loss, grads = self.grads(model, zero, cfg)
                self.assertEqual(float(loss), 0.0)
                self.assertTrue(all(float(g.abs().max()) == 0.0 for g in grads))
        cfg = GRPOLossConfig(beta=0.1)
        mixed = signal[:2] + zero + signal[2:]
        l1, g1 = self.grads(model, signal, cfg)
        l2, g2 = self.grads(model, mixed, cfg)
        self.assertNotEqual(float(l1), 0.0)
        self.assertAlmostEqual(float(l1), float(l2), delta=1e-9)
        for a, b in zip(g1, g2):
            self.assertLess(float((a - b).abs().max()), 1e-6)


class TestTruncated(unittest.TestCase):
    """finish_reason "length": kept as is by default, left out with truncated="drop"."""

    def test_keep_and_drop(self):
        rows = [c for c in fixture() if not c.zero_variance]
        cut = dataclasses.replace(rows[0], finish_reason="length")
        marked = [cut] + rows[1:]
        model = TinyLM(seed=5)
        with torch.no_grad():
            lp_all = logps(model, collate(rows))
            lp_rest = logps(model, collate(rows[1:]))
        keep = GRPOLossConfig()
        drop = GRPOLossConfig(truncated="drop")
        as_stop, _ = grpo_loss(lp_all, collate(rows), keep)
        kept, _ = grpo_loss(lp_all, collate(marked), keep)
        dropped, stats = grpo_loss(lp_all, collate(marked), drop)
        without, _ = grpo_loss(lp_rest, collate(rows[1:]), drop)
        self.assertEqual(float(kept), float(as_stop))
        self.assertAlmostEqual(float(dropped), float(without), delta=1e-9)
        self.assertNotAlmostEqual(float(dropped), float(kept), delta=1e-9)
        self.assertEqual(float(stats["weights"][0]), 0.0)


if __name__ == "__main__":
    unittest.main()
