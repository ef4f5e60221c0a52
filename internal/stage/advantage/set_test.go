package advantage

import (
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/pkg/grpo"
)

// TestSetIDs pins the ids of sets by image mode: --images store and
// --images embed (or --embed-images) keep the ids sets had before
// --images (Set hashes them as the same bytes the old EmbedImages false
// and true gave), and files, the default, is a set of its own. The golden
// ids fail the test when any of them moves.
func TestSetIDs(t *testing.T) {
	id := func(images shard.ImageMode, embed bool) string {
		c := Config{OutURL: "/data/shards", Mode: ModeStep, Label: grpo.LabelModeClean, Estimator: grpo.DefaultEstimator(),
			Step: grpo.DefaultStepOptions(), Outcome: grpo.DefaultOutcomeConfig(), Format: shard.FormatArrow,
			Images: images, EmbedImages: embed, Select: Selection{Runs: []string{"night-1"}}}
		return c.Set()
	}
	for _, tc := range []struct {
		name   string
		images shard.ImageMode
		embed  bool
		want   string
	}{
		{"store (the old default)", shard.ImagesStore, false, storeID},
		{"embed", shard.ImagesEmbed, false, embedID},
		{"--embed-images", "", true, embedID},
		{"embed and --embed-images", shard.ImagesEmbed, true, embedID},
		{"files (the default)", "", false, filesID},
		{"files", shard.ImagesFiles, false, filesID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := id(tc.images, tc.embed); got != tc.want {
				t.Errorf("set id %s, want %s", got, tc.want)
			}
		})
	}
	if filesID == storeID || filesID == embedID {
		t.Error("the files default shares an id with an older set")
	}
}

// The golden set ids of TestSetIDs.
const (
	storeID = "step-0cd16264d9c6"
	embedID = "step-0f52088a724a"
	filesID = "step-f09fa4475def"
)
