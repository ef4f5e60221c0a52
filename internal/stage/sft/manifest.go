package sft

import (
	"slices"
	"strings"

	"github.com/codapipe/codapipe/internal/stage/sft/dataset"
)

// The dataset's file names and format (internal/stage/sft/dataset, the
// contract the run report reads too).
const (
	ManifestName    = dataset.ManifestName
	DatasetInfoName = dataset.DatasetInfoName
	ReadmeName      = dataset.ReadmeName
	TrainName       = dataset.TrainName
	ValName         = dataset.ValName
	ImagesDir       = dataset.ImagesDir
	ParquetDir      = dataset.ParquetDir
	ManifestKind    = dataset.ManifestKind
	Layout          = dataset.Layout
)

// The manifest's types (internal/stage/sft/dataset).
type (
	Manifest          = dataset.Manifest
	Selection         = dataset.Selection
	Rules             = dataset.Rules
	Counts            = dataset.Counts
	SplitInfo         = dataset.SplitInfo
	Count             = dataset.Count
	TaskCount         = dataset.TaskCount
	JudgeVersionCount = dataset.JudgeVersionCount
	Skipped           = dataset.Skipped
	File              = dataset.File
	Training          = dataset.Training
)

// ReadManifest reads the manifest.json of a dataset folder.
func ReadManifest(dir string) (*Manifest, error) { return dataset.ReadManifest(dir) }

// sortFiles sorts files by path.
func sortFiles(fs []File) {
	slices.SortFunc(fs, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
}

// sortSkipped sorts the skipped list by key, then trajectory id.
func sortSkipped(s []Skipped) {
	slices.SortFunc(s, func(a, b Skipped) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.TrajectoryID, b.TrajectoryID)
	})
}
