package shard

// SchemaVersion is the version of the shard row schema (Row, Meta), kept in
// every file's schema metadata under "codapipe.schema_version". It changes
// when a column is added, removed, renamed or changes meaning.
//
// Version 2 added messages, completion_token_ids, finish_reason and
// sampling, made completion_tokens the candidate's own count, and made the
// manifest's file paths relative to the manifest's folder.
//
// Version 3 added images.path (image files beside the shards, the default),
// prompt_token_ids, executor_model, executor_checkpoint, executor_coords and
// prompt_set; the manifest lists the image files (Manifest.Images) and the
// executors and prompt sets of the rows.
const SchemaVersion = 3

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

	Completion   string `json:"completion"`              // the plan text (Thought + Action)
	PromptTokens *int32 `json:"prompt_tokens,omitempty"` // when the server reported them
	// PromptTokenIDs are the ids of the prompt's tokens as the planner's
	// server tokenized them (vLLM's prompt_token_ids with
	// return_token_ids); null when the endpoint gave none. Every row of a
	// step shares them.
	PromptTokenIDs   []int32   `json:"prompt_token_ids,omitempty"`
	CompletionTokens *int32    `json:"completion_tokens,omitempty"` // this candidate's own count, when the server reported it
	LogProbs         []float64 `json:"logprobs,omitempty"`          // per-token, when recorded (null otherwise)
	// CompletionTokenIDs are the ids of the completion's tokens under the
	// behaviour policy, one per LogProbs value when both are present; null
	// only when the endpoint gave none (the manifest counts those rows).
	// With finish_reason "stop" they end with the token that stopped the
	// generation (EOS or a stop token: vLLM keeps it in token_ids though
	// not in the text); with "length" they are cut at max_tokens, without
	// EOS (docs/shards.md).
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
	// ExecutorModel, ExecutorCheckpoint and ExecutorCoords name the frozen
	// executor that grounded the plans (the trajectory's
	// models.executor): its model, checkpoint tag ("" when unknown) and
	// coordinate space as JSON (traj.Coords, e.g. {"space":"grid1000"}).
	ExecutorModel      string `json:"executor_model"`
	ExecutorCheckpoint string `json:"executor_checkpoint"`
	ExecutorCoords     string `json:"executor_coords"`
	// PromptSet is the SHA-256 of the prompt set the planner and the
	// executor were prompted with (the trajectory's prompts); "" for
	// trajectories that recorded none.
	PromptSet string `json:"prompt_set"`
	// Sampling is the planner's sampling parameters the trajectory
	// recorded (traj.Sampling as JSON); null when it recorded none.
	Sampling     *string `json:"sampling,omitempty"`
	JudgeVersion string  `json:"judge_version"`
}

// Image is one image of a row's prompt: always its reference, and where
// the set carries it (ImageMode): its PNG bytes (ImagesEmbed), or Path, the
// image file beside the shards (ImagesFiles, "images/<sha256>.png"
// relative to the manifest's folder); both null with ImagesStore (the
// blob store holds it). ReadImage returns its bytes from the set.
type Image struct {
	SHA256 string `json:"sha256"` // lower-case hex; the blob store key is blob.Key(SHA256)
	Width  int32  `json:"width"`
	Height int32  `json:"height"`
	Bytes  []byte `json:"bytes,omitempty"`
	Path   string `json:"path,omitempty"`

	stored int64 // the file's size, once Writer.PutImages stored it
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
