package sft

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAcceptSplitFiles: only splits with samples have files, and what
// the dataset tells a trainer to read exists. An empty split (here val at
// --val-fraction 0) writes no val.jsonl and no val Parquet shard, is not
// in the manifest's splits nor in dataset_info.json, and the generated
// commands (manifest "training", README.md) name only train: the
// LLaMA-Factory YAML has no eval_dataset, the ms-swift command no
// --val_dataset. With both splits, both are named everywhere.
//
// The formats, read upstream:
//   - LLaMA-Factory, github.com/hiyouga/LLaMA-Factory at
//     ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30: data/README.md (a
//     dataset_info.json entry: file_name, "formatting": "sharegpt",
//     "columns" {messages, images}, "tags" {role_tag, content_tag,
//     user_tag, assistant_tag, system_tag}); src/llamafactory/hparams/
//     data_args.py (dataset, eval_dataset are names of dataset_info.json
//     entries under dataset_dir); src/llamafactory/data/converter.py
//     (SharegptDatasetConverter: alternation, even count) and
//     mm_plugin.py (_validate_messages: <image> count = images) —
//     checked per record by sharegptRules.
//   - ms-swift, github.com/modelscope/ms-swift at
//     3602360a562313afbf2ef6065fdf61f271a2c5b9:
//     docs/source_en/Instruction/Command-line-parameters.md (--dataset,
//     --val_dataset: dataset ids or paths; with no --val_dataset and
//     split_dataset_ratio 0, the default, no evaluation), docs/source_en/
//     Customization/Custom-dataset.md (messages/images records).
func TestAcceptSplitFiles(t *testing.T) {
	c := sharedCorpus(t)
	for _, tc := range []struct {
		name   string
		frac   string
		splits []string
	}{
		{"empty val", "0", []string{SplitTrain}},
		{"both", "0.5", []string{SplitTrain, SplitVal}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "sft")
			buildCLI(t, c.StoreDir(), out, "--val-fraction", tc.frac)
			m := readManifest(t, out)
			listed := map[string]bool{}
			for _, f := range m.Files {
				listed[f.Path] = true
			}
			for _, split := range []string{SplitTrain, SplitVal} {
				want := slices.Contains(tc.splits, split)
				info, inManifest := m.Splits[split]
				if inManifest != want || (want && info.Samples == 0) {
					t.Errorf("%s: in the manifest's splits %v (%+v), want %v", split, inManifest, info, want)
				}
				_, err := os.Stat(filepath.Join(out, split+".jsonl"))
				if exists := err == nil; exists != want || listed[split+".jsonl"] != want {
					t.Errorf("%s.jsonl: exists %v, listed %v, want %v (%v)", split, exists, listed[split+".jsonl"], want, err)
				}
				shards, err := filepath.Glob(filepath.Join(out, ParquetDir, split+"-*.parquet"))
				if err != nil {
					t.Fatal(err)
				}
				if (len(shards) > 0) != want || len(shards) != len(info.Parquet) {
					t.Errorf("%s: %d Parquet shards, the manifest lists %v, want any: %v", split, len(shards), info.Parquet, want)
				}
			}

			// dataset_info.json: exactly the present splits, each a valid
			// sharegpt entry whose file exists and whose records keep the
			// trainers' rules.
			dsInfo := readDatasetInfo(t, out)
			var names []string
			for _, split := range tc.splits {
				names = append(names, DatasetName(split))
			}
			var got []string
			for name, d := range dsInfo {
				got = append(got, name)
				if d.Formatting != "sharegpt" || d.Columns["messages"] != "messages" || d.Columns["images"] != "images" ||
					d.Tags["role_tag"] != "role" || d.Tags["content_tag"] != "content" || d.Tags["user_tag"] != "user" ||
					d.Tags["assistant_tag"] != "assistant" || d.Tags["system_tag"] != "system" {
					t.Errorf("dataset_info.json %s: %+v", name, d)
				}
				recs := readJSONL(t, filepath.Join(out, d.FileName))
				if len(recs) == 0 {
					t.Errorf("dataset_info.json %s: %s has no records", name, d.FileName)
				}
				for i, raw := range recs {
					for _, e := range sharegptRules(out, raw) {
						t.Errorf("%s line %d: %s", d.FileName, i+1, e)
					}
				}
			}
			slices.Sort(got)
			slices.Sort(names)
			if !slices.Equal(got, names) {
				t.Errorf("dataset_info.json lists %v, want %v", got, names)
			}

			// The commands: every dataset the LLaMA-Factory YAML names is in
			// dataset_info.json, every file the ms-swift command names
			// exists, and val appears exactly when it has samples.
			lf, swift := m.Training.LlamaFactory, m.Training.Swift
			hasVal := slices.Contains(tc.splits, SplitVal)
			for _, line := range strings.Split(lf, "\n") {
				k, v, _ := strings.Cut(line, ":")
				if k == "dataset" || k == "eval_dataset" {
					if _, ok := dsInfo[strings.TrimSpace(v)]; !ok {
						t.Errorf("the LLaMA-Factory YAML names %s %q, which dataset_info.json does not list", k, v)
					}
				}
			}
			if strings.Contains(lf, "eval_dataset:") != hasVal || !strings.Contains(lf, "dataset: "+DatasetName(SplitTrain)) {
				t.Errorf("LLaMA-Factory YAML for splits %v:\n%s", tc.splits, lf)
			}
			args := strings.Fields(swift)
			for i, a := range args {
				if (a == "--dataset" || a == "--val_dataset") && i+1 < len(args) {
					if _, err := os.Stat(filepath.Join(out, args[i+1])); err != nil {
						t.Errorf("the ms-swift command names %s %s: %v", a, args[i+1], err)
					}
				}
			}
			if slices.Contains(args, "--val_dataset") != hasVal || !slices.Contains(args, "--dataset") {
				t.Errorf("ms-swift command for splits %v: %s", tc.splits, swift)
			}
			readme, err := os.ReadFile(filepath.Join(out, ReadmeName))
			if err != nil || !listed[ReadmeName] {
				t.Fatalf("README.md: %v (listed %v)", err, listed[ReadmeName])
			}
			if !strings.Contains(string(readme), swift) || !strings.Contains(string(readme), lf) {
				t.Errorf("README.md does not carry the manifest's commands:\n%s", readme)
			}
			if _, err := os.Stat(filepath.Join(out, ValName)); hasVal == errors.Is(err, os.ErrNotExist) {
				t.Errorf("val.jsonl: %v, val has samples: %v", err, hasVal)
			}
		})
	}
}
