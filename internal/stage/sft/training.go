package sft

import (
	"bytes"
	"fmt"
	"strings"
)

// trainingModel is the base model the commands name; users put theirs.
const trainingModel = "Qwen/Qwen2.5-VL-7B-Instruct"

// training gives the commands for the splits m has.
func training(m *Manifest) Training {
	_, train := m.Splits[SplitTrain]
	_, val := m.Splits[SplitVal]
	var lf strings.Builder
	fmt.Fprintf(&lf, "model_name_or_path: %s\nstage: sft\ndo_train: true\nfinetuning_type: full\n", trainingModel)
	lf.WriteString("dataset_dir: .                     # this folder: run from it, or put its absolute path\n")
	if train {
		fmt.Fprintf(&lf, "dataset: %s\n", DatasetName(SplitTrain))
	}
	if val {
		fmt.Fprintf(&lf, "eval_dataset: %s\n", DatasetName(SplitVal))
	}
	lf.WriteString("template: qwen2_vl\nimage_max_pixels: 1048576          # >= 1280*800: the screenshots at the size the agent sends them\ncutoff_len: 8192\noutput_dir: out\n")
	swift := "swift sft --model " + trainingModel + " --train_type full"
	if train {
		swift += " --dataset " + TrainName
	}
	if val {
		swift += " --val_dataset " + ValName
	}
	swift += " --max_pixels 1048576 --max_length 8192 --output_dir out"
	if !train {
		// Nothing to train on: say so rather than give a command that fails.
		return Training{
			LlamaFactory: "# this dataset has no train samples\n",
			Swift:        "# this dataset has no train samples",
		}
	}
	return Training{LlamaFactory: lf.String(), Swift: swift}
}

// readme is the dataset's README.md: what the folder holds and the
// commands of m.Training.
func readme(m *Manifest) []byte {
	var b bytes.Buffer
	b.WriteString("# codapipe SFT dataset\n\n")
	fmt.Fprintf(&b, "Written by %s; layout %s; %d samples of %d trajectories (manifest.json says more; docs/sft.md describes the format).\n\n",
		m.Producer, m.Layout, m.Counts.Samples, m.Counts.Kept)
	b.WriteString("Splits:\n\n")
	if len(m.Splits) == 0 {
		b.WriteString("- none: no sample was selected\n")
	}
	for _, split := range []string{SplitTrain, SplitVal} {
		s, ok := m.Splits[split]
		if !ok {
			fmt.Fprintf(&b, "- %s: no samples, no file\n", split)
			continue
		}
		fmt.Fprintf(&b, "- %s: %s, %d samples of %d tasks (%s in dataset_info.json)\n", split, s.JSONL, s.Samples, s.Tasks, DatasetName(split))
	}
	b.WriteString("\nLLaMA-Factory, in the training YAML (run from this folder; image paths resolve against dataset_dir):\n\n```yaml\n")
	b.WriteString(m.Training.LlamaFactory)
	b.WriteString("```\n\nms-swift, from this folder (relative image paths are read from the working directory):\n\n```sh\n")
	b.WriteString(m.Training.Swift)
	b.WriteString("\n```\n")
	return b.Bytes()
}
