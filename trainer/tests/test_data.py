"""The reader of an advantage export --format jsonl set, on the real fixture."""

import hashlib
import os
import shutil
import tempfile
import unittest

import context
from codapipe_trainer import ManifestError, collate, load_export
from codapipe_trainer.data import START_TOKEN
from tinylm import VOCAB

# EOS is the id vLLM ends a "stop" completion's token_ids with when the model
# ended its turn (Qwen2's <|im_end|>; the simulated planner's SimEOSID):
# docs/shards.md, completion_token_ids.
EOS = 151645


class TestLoadExport(unittest.TestCase):
    def test_reads_every_row_with_token_data(self):
        ex = load_export(context.FIXTURE)
        self.assertEqual(len(ex.candidates), ex.manifest["rows"])
        self.assertGreater(len(ex.candidates), 0)
        self.assertEqual(ex.manifest["source"]["token_data"]["rows_with_token_ids"], len(ex.trainable()))
        for c in ex.candidates:
            self.assertEqual(len(c.completion_token_ids), len(c.logprobs))
            self.assertTrue(all(0 <= t < VOCAB for t in c.completion_token_ids))
            self.assertTrue(c.prompt_token_ids and all(0 <= t < VOCAB for t in c.prompt_token_ids))
            # The EOS rule: a completion that stopped ends with EOS (kept in the ids and
            # log-probs, not in the text); one cut at max_tokens does not.
            if c.finish_reason == "stop":
                self.assertEqual(c.completion_token_ids[-1], EOS, c.index)
            elif c.finish_reason == "length":
                self.assertNotEqual(c.completion_token_ids[-1], EOS, c.index)
            self.assertTrue(all(lp <= 0 for lp in c.logprobs))
            self.assertEqual(sum(m["content"].count("<image>") for m in c.messages), len(c.images))
        groups = {}
        for c in ex.candidates:
            groups.setdefault(c.group_id, []).append(c)
        for gid, members in groups.items():
            self.assertEqual(len(members), members[0].group_size, gid)
            if members[0].zero_variance:
                self.assertTrue(all(m.advantage == 0 for m in members), gid)
            else:
                self.assertAlmostEqual(sum(m.advantage for m in members), 0, places=9, msg=gid)

    def test_images_by_path_checked_by_sha256(self):
        ex = load_export(context.FIXTURE)
        kept = {f["sha256"] for f in ex.manifest["files"] if f["path"].startswith("images/")}
        self.assertTrue(kept)
        im = next(i for c in ex.candidates for i in c.images if i["sha256"] in kept)
        self.assertFalse(os.path.isabs(im["path"]))
        data = ex.image_bytes(im)
        self.assertTrue(data.startswith(b"\x89PNG"))
        self.assertEqual(hashlib.sha256(data).hexdigest(), im["sha256"])

    def test_damaged_data_file_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            dst = os.path.join(tmp, "export")
            shutil.copytree(context.FIXTURE, dst)
            path = os.path.join(dst, "candidates.jsonl")
            with open(path, "r+b") as f:
                b = f.read(1)
                f.seek(0)
                f.write(b"[" if b != b"[" else b"{")
            with self.assertRaises(ManifestError):
                load_export(dst)
            # A damaged image is refused when read.
            ex_dir = os.path.join(tmp, "export2")
            shutil.copytree(context.FIXTURE, ex_dir)
            ex = load_export(ex_dir)
            im = next(f for f in ex.manifest["files"] if f["path"].startswith("images/"))
            with open(os.path.join(ex_dir, im["path"]), "ab") as f:
                f.write(b"x")
            with self.assertRaises(ManifestError):
                ex.image_bytes({"path": im["path"], "sha256": im["sha256"]})


class TestCollate(unittest.TestCase):
    def test_layout(self):
        ex = load_export(context.FIXTURE)
        rows = ex.trainable()[:5]
        b = collate(rows)
        for i, c in enumerate(rows):
            n, p = len(c.completion_token_ids), len(c.prompt_token_ids)
            # The prompt's token ids are the context, the completion follows; position
            # t predicts token t+1, so the completion's predictions start at p-1.
            self.assertEqual(b.tokens[i, :p].tolist(), c.prompt_token_ids)
            self.assertEqual(b.tokens[i, p : p + n].tolist(), c.completion_token_ids)
            self.assertEqual(b.mask[i].sum().item(), n)
            self.assertEqual(b.mask[i, p - 1 : p - 1 + n].sum().item(), n)
            self.assertEqual(b.behaviour_logprobs[i, p - 1 : p - 1 + n].tolist(), c.logprobs)
            self.assertEqual(b.advantages[i].item(), c.advantage)

    def test_start_token_without_prompt_ids(self):
        ex = load_export(context.FIXTURE)
        rows = ex.trainable()[:3]
        for c in rows:
            c.prompt_token_ids = None  # an endpoint that returned none
        b = collate(rows)
        for i, c in enumerate(rows):
            n = len(c.completion_token_ids)
            self.assertEqual(int(b.tokens[i, 0]), START_TOKEN)
            self.assertEqual(b.tokens[i, 1 : 1 + n].tolist(), c.completion_token_ids)
            self.assertEqual(b.mask[i, :n].sum().item(), n)


if __name__ == "__main__":
    unittest.main()
