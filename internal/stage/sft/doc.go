// Package sft builds the generalization-stage SFT dataset (CODA's second
// stage): the clean successes of the per-app specialists, read from the
// judge's archive of judged trajectories, become one step-level dataset
// for a fresh planner.
//
// Build selects judged trajectories (one judgement per trajectory: the
// --judge-version asked for, else the latest), keeps the clean successes
// (optionally only those whose task evaluator passed when it ran), skips
// bad input whole with a reason (an undecodable record, a missing prompt
// set or screenshot, an executed action that did not parse),
// de-duplicates trajectories of one task with the same executed action
// sequence, caps trajectories per task, and splits by task into train and
// val. Every step of a kept trajectory becomes one sample
// (PlannerSample): the planner's messages at that step as
// prompt.Set.PlannerMessagesAt renders them — the one renderer, whose
// layout (system, one user turn showing the earlier plans) the agent
// sends — mapped one to one onto the sharegpt messages LLaMA-Factory and
// ms-swift read (ShareGPT), with the executed candidate's plan as the
// target. So a model is trained on the very layout it is served with.
//
// The output folder holds train.jsonl / val.jsonl (only the splits with
// samples) with the screenshots as images/<sha256>.png beside them, the
// dataset_info.json LLaMA-Factory reads, Parquet shards with the images
// embedded (parquet/, the layout Hugging Face datasets reads as an Image
// feature), README.md with the training commands for the splits written,
// and manifest.json (written last): counts, the selection, the splits,
// the commands, the judge versions, every file with its size and
// SHA-256, and what was skipped and why. The same
// archive and flags give byte-identical files. docs/sft.md describes the
// formats and how to train on them.
package sft
