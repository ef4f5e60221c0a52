package shard

// SchemaVersion is the version of the shard row schema (Row, Meta), kept in
// every file's schema metadata under "codapipe.schema_version". It changes
// when a column is added, removed, renamed or changes meaning.
//
// Version 2 added messages, completion_token_ids, finish_reason and
// sampling, made completion_tokens the candidate's own count, and made the
// manifest's file paths relative to the manifest's folder.
const SchemaVersion = 2

// Row is one training row: one candidate of one group. In step mode a
// group is the non-executed candidates of one positive step, scored against
// the executed (reference) action; in outcome mode a row is one executed
// step of a trajectory and the group is the K samples of its task in its
// run. Every field maps to one column of the same name (see docs/shards.md);
// pointer fields are nullable columns.
type Row struct {
	Run          string `json:"run"`
	App          string `json:"app"`
	Task         string `json:"task"`
	TrajectoryID string `json:"trajectory_id"`
	Sample       int32  `json:"sample"` // k of K (0-based)
	Step         int32  `json:"step"`   // 0-based step index
	GroupID      string `json:"group_id"`
	Candidate    int32  `json:"candidate"`  // index in the step's candidates
	GroupSize    int32  `json:"group_size"` // members of the group

	// Prompt is the planner's chat messages at this step (OpenAI chat JSON,
	// images as references: {"type":"image_url","image_url":{"url":
	// "sha256:<hex>"}}), rendered by the one planner renderer.
	Prompt string `json:"prompt"`
	// Messages are the same messages as Prompt in a nested form a trainer
	// reads without parsing JSON (see Message); converted from the
	// renderer's output, never laid out again.
	Messages []Message `json:"messages"`
	// Images are the prompt's images in order of appearance.
	Images []Image `json:"images"`

	Completion       string    `json:"completion"`                  // the plan text (Thought + Action)
	PromptTokens     *int32    `json:"prompt_tokens,omitempty"`     // when the server reported them
	CompletionTokens *int32    `json:"completion_tokens,omitempty"` // this candidate's own count, when the server reported it
	LogProbs         []float64 `json:"logprobs,omitempty"`          // per-token, when recorded (null otherwise)
	// CompletionTokenIDs are the ids of the completion's tokens under the
	// behaviour policy, one per LogProbs value when both are present; null
	// only when the endpoint gave none (the manifest counts those rows).
	CompletionTokenIDs []int32 `json:"completion_token_ids,omitempty"`
	// FinishReason is why the planner stopped ("stop", "length"); "" when
	// not recorded.
	FinishReason string `json:"finish_reason"`

	Action        *Action `json:"action,omitempty"`    // the parsed action; null when unparsed
	ActionText    string  `json:"action_text"`         // canonical text ("" when unparsed)
	Reference     *Action `json:"reference,omitempty"` // the reference action (step mode)
	ReferenceText string  `json:"reference_text"`      // its canonical text ("" in outcome mode)

	Reward          float64 `json:"reward"`
	RewardTypeMatch float64 `json:"reward_type_match"`
	RewardDist      float64 `json:"reward_dist"`
	Unparsed        bool    `json:"unparsed"`

	Advantage     float64 `json:"advantage"`
	GroupMean     float64 `json:"group_mean"`
	GroupStd      float64 `json:"group_std"`
	GroupScale    float64 `json:"group_scale"`
	ZeroVariance  bool    `json:"zero_variance"`
	DroppedReason string  `json:"dropped_reason"` // "" unless the group is zero-variance/empty (kept or not)
	// LossWeight is 1 / the number of rows-producing steps of the row's
	// trajectory (labelled positive steps in step mode, executed steps in
	// outcome mode), so a long trajectory weighs as much as a short one.
	LossWeight float64 `json:"loss_weight"`

	LabelSource string `json:"label_source"` // clean | prefix (step mode), outcome (outcome mode)
	Label       string `json:"label"`        // positive | negative

	PolicyModel      string `json:"policy_model"`
	PolicyCheckpoint string `json:"policy_checkpoint"`
	// Sampling is the planner's sampling parameters the trajectory
	// recorded (traj.Sampling as JSON); null when it recorded none.
	Sampling     *string `json:"sampling,omitempty"`
	JudgeVersion string  `json:"judge_version"`
}

// Image is one image of a row's prompt: always its reference, and its
// PNG bytes when images are embedded (--embed-images), null otherwise.
type Image struct {
	SHA256 string `json:"sha256"` // lower-case hex; the blob store key is blob.Key(SHA256)
	Width  int32  `json:"width"`
	Height int32  `json:"height"`
	Bytes  []byte `json:"bytes,omitempty"`
}

// Action is an action's structured fields; points are in [0,1] of the
// screenshot (traj.Action's geometry), null when the action has none.
type Action struct {
	Type      string   `json:"type"`
	X         *float64 `json:"x,omitempty"` // point, or drag start
	Y         *float64 `json:"y,omitempty"`
	EndX      *float64 `json:"end_x,omitempty"` // drag end
	EndY      *float64 `json:"end_y,omitempty"`
	Text      string   `json:"text"`
	Keys      []string `json:"keys"`
	Direction string   `json:"direction"`
}

// Message is one chat message of the messages column: a role ("system",
// "user", "assistant") and its content as a list of parts, the shape of
// Hugging Face chat datasets with images (and of the content lists that
// verl's RLHFDataset and OpenRLHF build for a processor's chat template).
type Message struct {
	Role    string `json:"role"`
	Content []Part `json:"content"`
}

// Part is one part of a message's content: Type PartText with Text, or
// Type PartImage with Image, the image's reference ("sha256:<hex>", the
// blob store object; also the row's images entry in the same order). The
// other field is null.
type Part struct {
	Type  string `json:"type"`
	Text  string `json:"text,omitempty"`
	Image string `json:"image,omitempty"`
}

// Part types.
const (
	// PartText is a text part.
	PartText = "text"
	// PartImage is an image part.
	PartImage = "image"
)
