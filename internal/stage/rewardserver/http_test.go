package rewardserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/pkg/grpo"
)

// TestResponse: the response is cut out of an OpenRLHF query whether the
// query starts with the prompt or a processor expanded the prompt's image
// placeholders, and loses the special tokens that end it, not its own
// white space.
func TestResponse(t *testing.T) {
	tmpl := "<|im_start|>system\nYou are a GUI agent.<|im_end|>\n<|im_start|>user\n## Task\nOpen 1ubq.%s<|im_end|>\n<|im_start|>assistant\n"
	img := "<|vision_start|><|image_pad|><|vision_end|>"
	prompt := strings.Replace(tmpl, "%s", img, 1)
	expanded := strings.Replace(tmpl, "%s", "<|vision_start|>"+strings.Repeat("<|image_pad|>", 100)+"<|vision_end|>", 1)
	plan := "Thought: click File.\nAction: click(start_box='(10,20)')"
	cases := []struct {
		name, query, prompt, want string
		err                       bool
	}{
		{"prefix", prompt + plan + "<|im_end|>", prompt, plan, false},
		{"expanded image", expanded + plan + "<|im_end|><|endoftext|>", prompt, plan, false},
		{"own trailing space kept", prompt + plan + " \n<|im_end|>\n", prompt, plan + " \n", false},
		{"llama eos", "[INST] hi [/INST]" + plan + "</s>", "[INST] hi [/INST]", plan, false},
		{"no prompt", plan, "", plan, false},
		{"prompt absent", "something else entirely" + plan, prompt, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Response(c.query, c.prompt)
			if (err != nil) != c.err || got != c.want {
				t.Errorf("Response = %q, %v; want %q (error %v)", got, err, c.want, c.err)
			}
		})
	}
}

// TestStepReward: the reward service scores with the reward options the
// set's rows were scored with (advantage writes grpo.StepOptions into the
// schema metadata), not with the defaults.
func TestStepReward(t *testing.T) {
	opt := grpo.DefaultStepOptions()
	opt.Reward.ScrollDirectionWeight, opt.Reward.NormalizeTyped, opt.SkipUnparsed = 0.25, !opt.Reward.NormalizeTyped, true
	doc, err := json.Marshal(opt)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		meta string
		want grpo.RewardConfig
		err  bool
	}{
		{"as written", string(doc), opt.Reward, false},
		{"none", "", grpo.DefaultRewardConfig(), false},
		{"a bare reward config", `{"scroll_direction_weight":0.5}`, grpo.RewardConfig{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := stepReward(shard.Meta{Mode: shard.ModeStep, RewardConfig: c.meta})
			if (err != nil) != c.err || (!c.err && got != c.want) {
				t.Errorf("stepReward = %+v, %v; want %+v (error %v)", got, err, c.want, c.err)
			}
		})
	}
}
