package advantage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	openai "github.com/sashabaranov/go-openai"

	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// InputError is a judged trajectory that cannot become rows: its prompt
// set or screenshots are missing, or its group is malformed. The message
// is dead-lettered with Reason.
type InputError struct{ Reason string }

func (e *InputError) Error() string { return e.Reason }

func inputErr(format string, args ...any) error {
	return &InputError{Reason: fmt.Sprintf(format, args...)}
}

// embedBudget bounds the bytes of screenshots that the handlers of one
// process hold at once when the set carries its images (--images embed
// or files): a
// handler reserves its trajectories' screenshot bytes before it reads them
// and gives them back once its rows are in the shard writer (which copies
// them into its batch). Without it, memory grew with --concurrency times
// the screenshots of a trajectory (64 × ~3.5 MB, 403–442 MB peak RSS in
// BenchmarkAdvantageService); 32 MiB still lets several handlers read at once.
const embedBudget = 32 << 20

// renderer renders rows' prompts and images from the blob store, keeping
// the prompt sets it has loaded.
type renderer struct {
	store   *blob.Store
	images  shard.ImageMode
	embed   bool        // the rows get the images' bytes (embed or files)
	budget  *byteBudget // embed only
	prompts *prompt.Cache
}

func newRenderer(store *blob.Store, images shard.ImageMode) *renderer {
	embed := images != shard.ImagesStore
	r := &renderer{store: store, images: images, embed: embed, prompts: prompt.NewCache(store)}
	if embed {
		r.budget = newByteBudget(embedBudget)
	}
	return r
}

// carry makes rows carry their images as the set wants them: with
// ImagesFiles, the images the rows hold are stored as the set's image
// files (shard.Writer.PutImages) and the rows name them instead.
func (s *server) carry(ctx context.Context, rows []shard.Row) error {
	if s.render.images != shard.ImagesFiles || len(rows) == 0 {
		return nil
	}
	if err := s.co.w.PutImages(ctx, rows); err != nil {
		return fmt.Errorf("advantage: set %s: %w", s.set, err)
	}
	return nil
}

// reserve waits until the screenshots a handler is about to embed (each
// distinct one once, by its recorded size) fit in the embedding budget and
// reserves them; the returned release gives them back and may be called
// more than once. Without embedding it reserves nothing.
func (r *renderer) reserve(ctx context.Context, refs []traj.ImageRef) (release func(), err error) {
	if r.budget == nil || len(refs) == 0 {
		return func() {}, nil
	}
	seen := map[string]bool{}
	var n int64
	for _, ref := range refs {
		if !seen[ref.SHA256] {
			seen[ref.SHA256] = true
			n += max(ref.Size, 0)
		}
	}
	return r.budget.acquire(ctx, n)
}

// promptImages lists the screenshots the planner's prompts at the steps
// of t for which use is true show: each one's own and its previous step's.
func promptImages(t *traj.Trajectory, use func(i int) bool) []traj.ImageRef {
	var refs []traj.ImageRef
	for i := range t.Steps {
		if !use(i) {
			continue
		}
		refs = append(refs, t.Steps[i].Screenshot)
		if i > 0 {
			refs = append(refs, t.Steps[i-1].Screenshot)
		}
	}
	return refs
}

// byteBudget is a counting semaphore over bytes whose waiters are served
// in arrival order.
type byteBudget struct {
	turn  chan struct{} // held by the first waiter in line
	mu    sync.Mutex
	limit int64
	used  int64
	freed chan struct{} // closed (and replaced) when bytes are released
}

func newByteBudget(limit int64) *byteBudget {
	return &byteBudget{turn: make(chan struct{}, 1), limit: limit, freed: make(chan struct{})}
}

// acquire waits until n bytes (at most the whole budget) are free and
// takes them; the returned release gives them back, once.
func (b *byteBudget) acquire(ctx context.Context, n int64) (func(), error) {
	n = min(n, b.limit)
	select {
	case b.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-b.turn }()
	for {
		b.mu.Lock()
		if b.used+n <= b.limit {
			b.used += n
			b.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { b.release(n) }) }, nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// promptSet returns the prompt set a trajectory records; one it cannot
// have is bad input.
func (r *renderer) promptSet(ctx context.Context, t *traj.Trajectory) (*prompt.Set, error) {
	p, err := r.prompts.Of(ctx, t)
	if prompt.Unavailable(err) || blob.Damaged(err) {
		return nil, inputErr("trajectory %s: %v", t.ID, err)
	}
	return p, err
}

// prompt renders the planner's messages at step i of t (images as
// references) and the images they show, checked to exist in the blob
// store and, when embedding, read from it. Images read are kept in read
// (when not nil), so that the steps of one call of stepRows or outcomeRows
// read each screenshot once (step i's is step i+1's previous one) and
// their rows share its bytes.
func (r *renderer) prompt(ctx context.Context, p *prompt.Set, t *traj.Trajectory, i int, read map[string][]byte) (rendered, error) {
	var refs []traj.ImageRef
	msgs, err := p.PlannerMessagesAt(t, i, func(ref traj.ImageRef) (string, error) {
		refs = append(refs, ref)
		return prompt.RefURL(ref)
	})
	if err != nil {
		return rendered{}, inputErr("trajectory %s step %d: %v", t.ID, i, err)
	}
	body, err := json.Marshal(msgs)
	if err != nil {
		return rendered{}, err
	}
	nested, err := messages(msgs)
	if err != nil {
		return rendered{}, inputErr("trajectory %s step %d: %v", t.ID, i, err)
	}
	imgs := make([]shard.Image, len(refs))
	for k, ref := range refs {
		imgs[k] = shard.Image{SHA256: ref.SHA256, Width: int32(ref.Width), Height: int32(ref.Height)}
		if r.embed {
			if b, ok := read[ref.SHA256]; ok {
				imgs[k].Bytes = b
				continue
			}
			b, err := r.store.GetBytes(ctx, ref.SHA256)
			if errors.Is(err, blob.ErrNotFound) {
				return rendered{}, inputErr("trajectory %s step %d: screenshot %s is missing from the blob store", t.ID, i, ref.SHA256)
			}
			if blob.Damaged(err) {
				// Damage in the store: no retry reads it right (blob.Damaged).
				return rendered{}, inputErr("trajectory %s step %d: screenshot %s is damaged in the blob store: %v", t.ID, i, ref.SHA256, err)
			}
			if err != nil {
				return rendered{}, err
			}
			imgs[k].Bytes = b
			if read != nil {
				read[ref.SHA256] = b
			}
			continue
		}
		if _, err := r.store.Stat(ctx, ref.SHA256); errors.Is(err, blob.ErrNotFound) {
			return rendered{}, inputErr("trajectory %s step %d: screenshot %s is missing from the blob store", t.ID, i, ref.SHA256)
		} else if err != nil {
			return rendered{}, err
		}
	}
	return rendered{prompt: string(body), messages: nested, images: imgs}, nil
}

// rendered is a step's prompt in the shard's three forms.
type rendered struct {
	prompt   string          // the messages as OpenAI chat JSON
	messages []shard.Message // the same messages, nested
	images   []shard.Image   // the images they show, in order
}

// messages converts the renderer's OpenAI chat messages to the nested
// messages column: a string content becomes one text part, a text part
// stays one, an image_url part becomes an image part with its URL (the
// "sha256:<hex>" reference).
func messages(msgs []openai.ChatCompletionMessage) ([]shard.Message, error) {
	out := make([]shard.Message, len(msgs))
	for i, m := range msgs {
		out[i].Role = m.Role
		if len(m.MultiContent) == 0 {
			out[i].Content = []shard.Part{{Type: shard.PartText, Text: m.Content}}
			continue
		}
		if m.Content != "" {
			return nil, fmt.Errorf("message %d has both a content string and content parts", i)
		}
		out[i].Content = make([]shard.Part, len(m.MultiContent))
		for k, part := range m.MultiContent {
			switch part.Type {
			case openai.ChatMessagePartTypeText:
				out[i].Content[k] = shard.Part{Type: shard.PartText, Text: part.Text}
			case openai.ChatMessagePartTypeImageURL:
				if part.ImageURL == nil {
					return nil, fmt.Errorf("message %d part %d: image_url part without a URL", i, k)
				}
				out[i].Content[k] = shard.Part{Type: shard.PartImage, Image: part.ImageURL.URL}
			default:
				return nil, fmt.Errorf("message %d part %d: part type %q", i, k, part.Type)
			}
		}
	}
	return out, nil
}

// action converts a parsed action to the shard's structured form.
func action(a *traj.Action) *shard.Action {
	if a == nil {
		return nil
	}
	out := &shard.Action{Type: string(a.Type), Text: a.Text, Keys: a.Keys, Direction: a.Direction}
	if out.Keys == nil {
		out.Keys = []string{}
	}
	start, end := a.Point, (*traj.Point)(nil)
	if a.Start != nil {
		start, end = a.Start, a.End
	}
	if start != nil {
		x, y := start.X, start.Y
		out.X, out.Y = &x, &y
	}
	if end != nil {
		x, y := end.X, end.Y
		out.EndX, out.EndY = &x, &y
	}
	return out
}

// actionText is an action's canonical text (the UI-TARS form on the
// 0–1000 grid), "" for none.
func actionText(a *traj.Action) string {
	if a == nil {
		return ""
	}
	return uitars.Format(*a, uitars.DefaultOptions())
}

// tokens returns a count as a nullable column value (nil when 0: the
// server did not report it).
func tokens(n int) *int32 {
	if n <= 0 {
		return nil
	}
	v := int32(n)
	return &v
}

// coordsJSON is the executor_coords column: the executor's coordinate
// space as JSON (grid1000 for trajectories that recorded none).
func coordsJSON(m traj.ModelRef) string {
	b, err := json.Marshal(m.Space())
	if err != nil { // a Coords has a string and three ints
		return ""
	}
	return string(b)
}

// base fills the columns every row of t's step i shares.
func base(t *traj.Trajectory, j *traj.Judgement, i, c int) shard.Row {
	cand := &t.Steps[i].Candidates[c]
	return shard.Row{
		Run: t.Run, App: t.Task.App, Task: t.Task.ID, TrajectoryID: t.ID,
		Sample: int32(t.Sample), Step: int32(t.Steps[i].Index), Candidate: int32(c),
		Completion:   cand.Plan,
		PromptTokens: tokens(cand.PlanTokens.Prompt), CompletionTokens: tokens(cand.PlanTokens.Completion),
		PromptTokenIDs:     t.Steps[i].PlanPromptTokenIDs,
		ExecutorModel:      t.Models.Executor.Model,
		ExecutorCheckpoint: t.Models.Executor.Checkpoint,
		ExecutorCoords:     coordsJSON(t.Models.Executor),
		PromptSet:          t.Prompts,
		LogProbs:           cand.PlanLogProbs,
		CompletionTokenIDs: cand.PlanTokenIDs,
		FinishReason:       cand.FinishReason,
		Sampling:           samplingJSON(t.Models.Planner.Sampling),
		Action:             action(cand.Action),
		ActionText:         actionText(cand.Action),
		Unparsed:           !grpo.Usable(cand.Action),

		PolicyModel: t.Models.Planner.Model, PolicyCheckpoint: t.Models.Planner.Checkpoint,
		JudgeVersion: j.Judge.ID(),
	}
}

// samplingJSON is the sampling column of a trajectory's rows: its
// planner's sampling parameters as JSON, nil when it recorded none.
func samplingJSON(s *traj.Sampling) *string {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil { // a Sampling has only numbers, strings and a pointer
		return nil
	}
	v := string(b)
	return &v
}

// groupColumns sets the group statistics of a row.
func groupColumns(r *shard.Row, adv float64, st grpo.GroupStats, id string) {
	r.GroupID, r.GroupSize = id, int32(st.Size)
	r.Advantage, r.GroupMean, r.GroupStd, r.GroupScale = adv, st.Mean, st.Std, st.Scale
	r.ZeroVariance, r.DroppedReason = st.ZeroVariance, string(st.Reason)
}

// stepRows computes the step-mode rows of one judged trajectory: every
// candidate of every kept group, with its advantage. The counts say what
// the trajectory gave, dropped groups included.
func (s *server) stepRows(ctx context.Context, t *traj.Trajectory, j *traj.Judgement) ([]shard.Row, Counts, error) {
	var cnt Counts
	cnt.Trajectories = 1
	labels, err := grpo.LabelSteps(t, j, s.cfg.Label)
	if err != nil {
		return nil, cnt, inputErr("trajectory %s: %v", t.ID, err)
	}
	var b grpo.StepBatch
	if _, err := b.Add(t, labels, s.cfg.Step); err != nil {
		return nil, cnt, inputErr("trajectory %s: malformed group: %v", t.ID, err)
	}
	adv, stats, sum, err := b.Advantages(s.cfg.Estimator)
	if err != nil {
		return nil, cnt, inputErr("trajectory %s: malformed group: %v", t.ID, err)
	}
	cnt.add(sum)
	if sum.KeptGroups == 0 {
		return nil, cnt, nil
	}
	p, err := s.render.promptSet(ctx, t)
	if err != nil {
		return nil, cnt, err
	}
	weight := 1 / float64(sum.KeptGroups)
	rows := make([]shard.Row, 0, sum.KeptCandidates)
	read := map[string][]byte{}
	for g, grp := range b.Groups {
		if stats[g].Dropped {
			continue
		}
		pr, err := s.render.prompt(ctx, p, t, grp.Step, read)
		if err != nil {
			return nil, cnt, err
		}
		for k := grp.Offset; k < grp.Offset+grp.Size; k++ {
			r := base(t, j, grp.Step, b.Candidates[k])
			groupColumns(&r, adv[k], stats[g], grp.ID)
			r.Prompt, r.Messages, r.Images = pr.prompt, pr.messages, pr.images
			r.Reference, r.ReferenceText = action(grp.Reference), actionText(grp.Reference)
			parts := b.Parts[k]
			r.Reward, r.RewardTypeMatch, r.RewardDist, r.Unparsed = parts.Total, parts.TypeMatch, parts.Dist, parts.Unparsed
			r.LossWeight = weight
			r.LabelSource, r.Label = string(s.cfg.Label), string(grpo.LabelPositive)
			rows = append(rows, r)
		}
	}
	cnt.Rows = len(rows)
	return rows, cnt, s.carry(ctx, rows)
}

// outcomeRows computes the outcome-mode rows of one complete group: every
// executed step of every kept member, with its trajectory's advantage.
func (s *server) outcomeRows(ctx context.Context, items []grpo.Judged, judgements map[string]*traj.Judgement) ([]shard.Row, Counts, error) {
	var cnt Counts
	cnt.Trajectories = len(items)
	b, err := grpo.BuildOutcomeGroups(items, s.cfg.Outcome)
	if err != nil {
		return nil, cnt, inputErr("malformed outcome group: %v", err)
	}
	adv, stats, sum, err := b.Advantages(s.cfg.Estimator)
	if err != nil {
		return nil, cnt, inputErr("malformed outcome group: %v", err)
	}
	cnt.add(sum)
	cnt.Excluded = len(b.Excluded)
	var rows []shard.Row
	read := map[string][]byte{}
	for g, grp := range b.Groups {
		if stats[g].Dropped {
			continue
		}
		for m := grp.Offset; m < grp.Offset+grp.Size; m++ {
			mem := b.Members[m]
			t := mem.Trajectory
			executed := 0
			for i := range t.Steps {
				if s := &t.Steps[i]; s.Executed >= 0 && s.Executed < len(s.Candidates) {
					executed++
				}
			}
			if executed == 0 {
				continue
			}
			p, err := s.render.promptSet(ctx, t)
			if err != nil {
				return nil, cnt, err
			}
			for i := range t.Steps {
				st := &t.Steps[i]
				if st.Executed < 0 || st.Executed >= len(st.Candidates) {
					continue
				}
				pr, err := s.render.prompt(ctx, p, t, i, read)
				if err != nil {
					return nil, cnt, err
				}
				r := base(t, judgements[t.ID], i, st.Executed)
				groupColumns(&r, adv[m], stats[g], grp.ID)
				r.Prompt, r.Messages, r.Images = pr.prompt, pr.messages, pr.images
				r.Reward = mem.Reward
				r.LossWeight = 1 / float64(executed)
				r.LabelSource, r.Label = "outcome", string(grpo.LabelPositive)
				if mem.Reward <= 0 {
					r.Label = string(grpo.LabelNegative)
				}
				rows = append(rows, r)
			}
		}
	}
	cnt.Rows = len(rows)
	return rows, cnt, s.carry(ctx, rows)
}
