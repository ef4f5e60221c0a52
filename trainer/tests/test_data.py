"""The reader of an advantage export --format jsonl set, on the real fixture."""

import hashlib
import os
import shutil
import tempfile
import unittest

import context
from codapipe_trainer import ManifestError, collate, load_export
from codapipe_trainer.data import START_TOKEN


class TestLoadExport(unittest.TestCase):
    def test_reads_every_row_with_token_data(self):
        ex = load_export(context.FIXTURE)
        self.assertEqual(len(ex.candidates), ex.manifest["rows"])
        self.assertGreater(len(ex.candidates), 0)
        self.assertEqual(ex.manifest["source"]["token_data"]["rows_with_token_ids"], len(ex.trainable()))
        for c in ex.candidates:
            self.assertEqual(len(c.completion_token_ids), len(c.logprobs))
            self.assertTrue(all(0 <= t < START_TOKEN for t in c.completion_token_ids))
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
            n = len(c.completion_token_ids)
            # No prompt token ids in this export: the start token is the context.
            self.assertIsNone(c.prompt_token_ids)
            self.assertEqual(int(b.tokens[i, 0]), START_TOKEN)
            self.assertEqual(b.tokens[i, 1 : 1 + n].tolist(), c.completion_token_ids)
            self.assertEqual(b.mask[i].sum().item(), n)
            self.assertEqual(b.mask[i, :n].sum().item(), n)
            self.assertEqual(b.behaviour_logprobs[i, :n].tolist(), c.logprobs)
            self.assertEqual(b.advantages[i].item(), c.advantage)


if __name__ == "__main__":
    unittest.main()
