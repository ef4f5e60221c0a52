// Package judge is the judge stage: it scores trajectories with one or
// more OpenAI-compatible VLM judge endpoints under a policy (stages of
// votes per judge model, or K votes under a unanimous or majority rule;
// low-resolution votes, ensembles, early exit), keeps every answered call in a vote cache so
// that no answer is asked for twice, and publishes and archives each
// judged trajectory. Judge is the library (one trajectory); Service
// consumes the stream; Report reads the archive back.
package judge

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"image/png"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/contract/imaging"
	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/stage/judge/report"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Config configures a Judge.
type Config struct {
	// Endpoints are the judge models; vote i goes to the endpoint of its
	// stage (Policy.Stages) or, without stages, to Endpoints[i mod n].
	Endpoints []EndpointSpec
	Limits    Limits
	Policy    Policy
	Prompt    *Prompt      // nil: the embedded default
	Store     *blob.Store  // where the screenshots are
	Cache     Cache        // nil: no cache (every call goes to a model)
	Metrics   *Metrics     // nil: none
	Log       *slog.Logger // nil: slog.Default()
	// Now is the clock of JudgedAt (nil: time.Now).
	Now func() time.Time
}

// Judge judges trajectories. It is safe for concurrent use.
type Judge struct {
	cfg     Config
	eps     []*endpoint
	version traj.JudgeVersion
	verID   string
	log     *slog.Logger
}

// New checks cfg and builds the Judge.
func New(cfg Config) (*Judge, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("judge: no judge endpoint (--judge URL=MODEL)")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Policy.CheckModels(len(cfg.Endpoints)); err != nil {
		return nil, fmt.Errorf("judge: %w", err)
	}
	if cfg.Store == nil {
		return nil, errors.New("judge: no blob store for the screenshots")
	}
	if cfg.Prompt == nil {
		p, err := LoadPrompt("")
		if err != nil {
			return nil, err
		}
		cfg.Prompt = p
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	j := &Judge{cfg: cfg, log: cfg.Log}
	seen := map[string]string{} // name+model → URL
	for _, spec := range cfg.Endpoints {
		id := spec.Name() + "=" + spec.Model
		if u, ok := seen[id]; ok && u != spec.URL {
			return nil, fmt.Errorf("judge endpoints %s: two differ only in their credentials; judgements could not tell them apart (give each its own URL)", id)
		}
		seen[id] = spec.URL
		ep, err := newEndpoint(spec, cfg.Limits, cfg.Log)
		if err != nil {
			return nil, err
		}
		cfg.Metrics.endpoint(ep.name)
		j.eps = append(j.eps, ep)
	}
	models := make([]string, cfg.Policy.Votes)
	for i := range models {
		models[i] = j.endpointOf(i).spec.Model
	}
	j.version = traj.JudgeVersion{PromptSHA256: cfg.Prompt.SHA256, Models: models, Policy: cfg.Policy.String()}
	j.verID = j.version.ID()
	return j, nil
}

// Probes returns, by endpoint as its calls' errors name it
// (model.UnavailableError.Endpoint), the probe that tells whether it
// answers (model.Client.Ping): the outage breaker's (model.Outages).
func (j *Judge) Probes() map[string]func(context.Context) error {
	probes := make(map[string]func(context.Context) error, len(j.eps))
	for _, ep := range j.eps {
		probes[ep.model.Endpoint()] = ep.model.Ping
	}
	return probes
}

// Version is the judge version every judgement of this Judge records.
func (j *Judge) Version() traj.JudgeVersion { return j.version }

// VersionID is Version().ID().
func (j *Judge) VersionID() string { return j.verID }

func (j *Judge) endpointOf(vote int) *endpoint { return j.eps[j.cfg.Policy.ModelOf(vote, len(j.eps))] }

// InputError is a trajectory the judge cannot judge as it is (a
// screenshot missing from the blob store or damaged): the message is
// dead-lettered with the reason, not retried.
type InputError struct{ Reason string }

func (e *InputError) Error() string { return e.Reason }

// EndpointError is a judge call that failed after its retries (the
// endpoint is down, overloaded or refusing): the trajectory is judged
// again later, when the answered votes come from the cache.
type EndpointError struct {
	Endpoint string
	Err      error
}

func (e *EndpointError) Error() string {
	return fmt.Sprintf("judge endpoint %s: %v", e.Endpoint, e.Err)
}

func (e *EndpointError) Unwrap() error { return e.Err }

// Judge judges one trajectory. An environment-error trajectory (or one
// with no screenshot) is not shown to any model: its judgement is
// NotJudged with the reason and no votes. With final false a call that
// fails after its retries returns an *EndpointError (judge the trajectory
// again later); with final true (the last delivery) it makes the vote
// unusable instead, so that the trajectory still gets a judgement
// (undecided unless the other votes settle it). A screenshot that cannot
// be read is an *InputError; other errors (blob store, cache) are
// transient.
func (j *Judge) Judge(ctx context.Context, t *traj.Trajectory, final bool) (*traj.Judgement, error) {
	return j.judgeAt(ctx, t, lastDelivery{final: final})
}

// JudgeLast is Judge on a trajectory's last delivery (final true), except
// that a call whose failure down says is an endpoint outage (the
// process's breaker, model.Outages.Down) returns its *EndpointError
// instead of making the vote unusable: the outage is waited out, not
// recorded as the vote's failure.
func (j *Judge) JudgeLast(ctx context.Context, t *traj.Trajectory, down func(context.Context, error) bool) (*traj.Judgement, error) {
	return j.judgeAt(ctx, t, lastDelivery{final: true, down: down})
}

// lastDelivery is how a judging treats a call that failed after its
// retries: final makes the vote unusable unless down says the endpoint
// is out for everyone.
type lastDelivery struct {
	final bool
	down  func(context.Context, error) bool
}

// unusable reports whether the failed call err makes its vote unusable
// (else the judging stops with the *EndpointError).
func (l lastDelivery) unusable(ctx context.Context, err error) bool {
	return l.final && (l.down == nil || !l.down(ctx, err))
}

func (j *Judge) judgeAt(ctx context.Context, t *traj.Trajectory, last lastDelivery) (*traj.Judgement, error) {
	start := time.Now()
	jd := &traj.Judgement{
		SchemaVersion: traj.SchemaVersion, TrajectoryID: t.ID, Run: t.Run, TaskID: t.Task.ID, App: t.Task.App,
		Votes: []traj.Vote{}, Judge: j.version,
	}
	frames := Keyframes(t, j.cfg.Policy.MaxFrames)
	switch {
	case t.Outcome.IsEnvError():
		jd.Decision, jd.Reason = traj.NotJudged, "environment error, not a verdict on the agent: "+t.Outcome.Reason
	case len(frames) == 0:
		jd.Decision, jd.Reason = traj.NotJudged, errNoFrames.Error()
	default:
		if err := j.judge(ctx, t, frames, jd, last); err != nil {
			return nil, err
		}
	}
	jd.JudgedAt = j.cfg.Now().UTC()
	jd.LatencyMS = time.Since(start).Milliseconds()
	j.cfg.Metrics.done(jd, time.Since(start))
	return jd, nil
}

// pass is the messages of one resolution, built and encoded once per
// trajectory (megabytes of images: every vote sends the same bytes).
type pass struct {
	msgs       []byte // JSON array of the chat messages
	resolution string
}

func (j *Judge) judge(ctx context.Context, t *traj.Trajectory, frames []Frame, jd *traj.Judgement, last lastDelivery) error {
	pol := j.cfg.Policy
	full, err := j.load(ctx, frames)
	if err != nil {
		return err
	}
	lim := j.cfg.Limits
	sizes := make([]Size, len(full)) // from the PNG headers, not from what the trajectory says
	for i, b := range full {         // before anything is decoded
		cfg, err := png.DecodeConfig(bytes.NewReader(b))
		if err == nil {
			err = imaging.CheckPixels("screenshot", cfg.Width, cfg.Height, lim.MaxImagePixels, "--max-image-pixels")
		}
		if err != nil {
			return &InputError{Reason: fmt.Sprintf("screenshot %s of step %d: %v", frames[i].Image.SHA256, frames[i].Step, err)}
		}
		sizes[i] = Size{cfg.Width, cfg.Height}
	}
	passes := map[bool]*pass{}
	passFor := func(low bool) (*pass, error) {
		if p := passes[low]; p != nil {
			return p, nil
		}
		imgs := full
		fd := make([]FrameData, len(frames))
		for i, f := range frames {
			fd[i] = FrameData{Frame: f, Index: i + 1, Width: sizes[i].W, Height: sizes[i].H}
		}
		if low {
			imgs = make([][]byte, len(full))
			for i, b := range full {
				small, size, err := resize(b, pol.LowRes, lim.MaxImagePixels)
				if err != nil {
					return nil, &InputError{Reason: fmt.Sprintf("screenshot %s of step %d: %v", frames[i].Image.SHA256, frames[i].Step, err)}
				}
				imgs[i], fd[i].Width, fd[i].Height = small, size.W, size.H
			}
		}
		var total int64
		for _, f := range fd {
			total += int64(f.Width) * int64(f.Height)
		}
		if limit := cmp.Or(lim.MaxRequestPixels, DefaultMaxRequestPixels); total > limit {
			return nil, &InputError{Reason: (&imaging.PixelsError{W: int(total), H: 1, Limit: limit, Flag: "--max-request-pixels",
				What: fmt.Sprintf("a judge request of %d frames", len(fd))}).Error()}
		}
		msgs, err := j.cfg.Prompt.Messages(Data(t, frames), fd, imgs)
		if err != nil {
			return nil, err
		}
		enc, err := EncodeMessages(msgs)
		if err != nil {
			return nil, fmt.Errorf("judge: encode the messages: %w", err)
		}
		p := &pass{msgs: enc, resolution: resolutionOf(fd)}
		passes[low] = p
		return p, nil
	}
	votes, out, err := pol.Walk(j.sameEndpoint, func(i, n int) ([]traj.Vote, error) {
		p, err := passFor(pol.LowResVote(i))
		if err != nil {
			return nil, err
		}
		return j.cast(ctx, t, i, n, p, last)
	})
	jd.Votes = append(jd.Votes, votes...)
	if err != nil {
		return err
	}
	jd.Decision, jd.Verdict, jd.Reason = out.Decision, out.Verdict, out.Reason
	return nil
}

// resolutionOf is the size of the largest frame sent, "WxH".
func resolutionOf(fd []FrameData) string {
	w, h := 0, 0
	for _, f := range fd {
		if f.Width*f.Height > w*h {
			w, h = f.Width, f.Height
		}
	}
	return strconv.Itoa(w) + "x" + strconv.Itoa(h)
}

// load fetches the frames' screenshots from the blob store.
func (j *Judge) load(ctx context.Context, frames []Frame) ([][]byte, error) {
	out := make([][]byte, len(frames))
	for i, f := range frames {
		b, err := j.cfg.Store.GetBytes(ctx, f.Image.SHA256)
		switch {
		case errors.Is(err, blob.ErrNotFound), blob.Damaged(err), errors.Is(err, blob.ErrInvalidKey):
			what := "step " + strconv.Itoa(f.Step)
			if f.Final {
				what = "the final screen"
			}
			return nil, &InputError{Reason: fmt.Sprintf("screenshot %s of %s cannot be read from the blob store %s: %v", f.Image.SHA256, what, j.cfg.Store, err)}
		case err != nil:
			return nil, fmt.Errorf("judge: screenshot %s: %w", f.Image.SHA256, err)
		}
		out[i] = b
	}
	return out, nil
}

// sameEndpoint reports whether votes a and b go to the same endpoint.
func (j *Judge) sameEndpoint(a, b int) bool { return j.endpointOf(a) == j.endpointOf(b) }

// cast casts votes i, i+1, … of a run of n that may be asked in one call
// (Policy.Run) and returns the first of them, at least one: those whose
// first attempt is in the cache or came back from one call with n =
// the number of the others (choice c answering the c-th vote not cached),
// up to the first vote that has neither (a server that ignores n returns
// fewer choices: the votes left are cast again by the caller, in calls
// of their own or a new multi-choice call). A multi-choice call that fails
// is an *EndpointError unless last makes its votes unusable; then vote i
// is cast alone.
func (j *Judge) cast(ctx context.Context, t *traj.Trajectory, i, n int, p *pass, last lastDelivery) ([]traj.Vote, error) {
	if n <= 1 {
		v, err := j.vote(ctx, t, i, p, last, nil)
		if err != nil {
			return nil, err
		}
		return []traj.Vote{v}, nil
	}
	firsts := make([]*Call, n)
	var ask []int
	for k := range n {
		call, ok, err := j.cached(ctx, CallKey(t.ID, j.verID, i+k, 1))
		if err != nil {
			return nil, err
		}
		if ok {
			j.cfg.Metrics.hit()
			firsts[k] = &call
			continue
		}
		ask = append(ask, i+k)
	}
	if len(ask) > 0 {
		ep := j.endpointOf(i)
		calls, err := j.ask(ctx, ep, p, t.ID, ask, 1, 0)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil && !last.unusable(ctx, err):
			return nil, &EndpointError{Endpoint: ep.name, Err: err}
		}
		for c, call := range calls {
			if j.cfg.Cache != nil {
				if err := j.cfg.Cache.Put(ctx, CallKey(t.ID, j.verID, ask[c], 1), call); err != nil {
					return nil, err
				}
			}
			firsts[ask[c]-i] = &calls[c]
		}
	}
	var out []traj.Vote
	for k := range n {
		if firsts[k] == nil && k > 0 {
			break
		}
		v, err := j.vote(ctx, t, i+k, p, last, firsts[k])
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// vote casts vote i: its answered calls come from the cache when it has
// them, the others from the vote's endpoint (stored in the cache before
// they count); a malformed answer is asked again up to
// Policy.MalformedRetries times. first, when set, is the answer of the
// vote's first attempt, already in the cache (cast).
func (j *Judge) vote(ctx context.Context, t *traj.Trajectory, i int, p *pass, last lastDelivery, first *Call) (traj.Vote, error) {
	pol := j.cfg.Policy
	ep := j.endpointOf(i)
	v := traj.Vote{
		Model: ep.spec.Model, Endpoint: ep.name, Resolution: p.resolution,
		Temperature: pol.Temperature(i), TopP: pol.TopP(i),
	}
	vs := pol.VoteSampling(i)
	v.Sampling = &vs
	malformed, maxTokens := 0, 0
	for a := 1; ; a++ {
		call, err := j.attempt(ctx, t, ep, p, i, a, maxTokens, first)
		if err != nil {
			if ctx.Err() != nil {
				return v, ctx.Err()
			}
			if maxTokens != 0 && errors.Is(err, model.ErrContextOverflow) {
				// The longer answer does not fit the model's context: as
				// good as cut a second time.
				v.Error = fmt.Sprintf("%s: the answer was cut at max_tokens %d, and %d tokens do not fit the model's context", ErrTruncated, pol.Sampling.MaxTokens, maxTokens)
				return v, nil
			}
			var ee *EndpointError
			if !errors.As(err, &ee) || !last.unusable(ctx, err) {
				return v, err
			}
			v.Error = fmt.Sprintf("%s: %v", report.CallFailed, ee.Err)
			return v, nil
		}
		if a == 1 {
			v.Choices, v.Choice = call.Choices, call.Choice
		}
		v.Attempts = a
		v.LatencyMS += call.LatencyMS
		v.Raw = call.Raw
		if call.FinishReason == "length" {
			// Cut at max_tokens: whatever verdict it holds may not be the
			// one the model would have ended on.
			j.cfg.Metrics.truncated(ep.name)
			limit := cmp.Or(call.MaxTokens, pol.Sampling.MaxTokens)
			v.Error = fmt.Sprintf("%s: the answer was cut at max_tokens %d (finish_reason length)", ErrTruncated, limit)
			j.log.Debug("judge answer truncated", "trajectory", t.ID, "vote", i, "attempt", a, "max_tokens", limit)
			if maxTokens != 0 {
				return v, nil
			}
			maxTokens = pol.RetryMaxTokens()
			continue
		}
		ans, perr := j.cfg.Prompt.Answer.Parse(call.Raw)
		if perr == nil {
			v.Verdict, v.Captions, v.Error = &ans.Verdict, ans.Captions, ""
			return v, nil
		}
		j.cfg.Metrics.badAnswer(ep.name)
		v.Error = perr.Error()
		j.log.Debug("judge answer unusable", "trajectory", t.ID, "vote", i, "attempt", a, "err", perr)
		if malformed++; malformed > pol.MalformedRetries {
			return v, nil
		}
	}
}

// ErrTruncated starts the Error of a vote whose answer was cut at
// max_tokens twice (Policy.TruncatedMaxTokens).
const ErrTruncated = report.Truncated

// attempt is the answer of attempt a of vote i: first (a == 1), the
// cache's, or a new call's (with maxTokens when > 0), stored in the
// cache; a failed call is an *EndpointError.
func (j *Judge) attempt(ctx context.Context, t *traj.Trajectory, ep *endpoint, p *pass, i, a, maxTokens int, first *Call) (Call, error) {
	if a == 1 && first != nil {
		return *first, nil
	}
	key := CallKey(t.ID, j.verID, i, a)
	call, ok, err := j.cached(ctx, key)
	if err != nil || ok {
		if ok {
			j.cfg.Metrics.hit()
		}
		return call, err
	}
	calls, err := j.ask(ctx, ep, p, t.ID, []int{i}, a, maxTokens)
	if err != nil {
		return Call{}, &EndpointError{Endpoint: ep.name, Err: err}
	}
	if j.cfg.Cache != nil {
		if err := j.cfg.Cache.Put(ctx, key, calls[0]); err != nil {
			return Call{}, err
		}
	}
	return calls[0], nil
}

func (j *Judge) cached(ctx context.Context, key string) (Call, bool, error) {
	if j.cfg.Cache == nil {
		return Call{}, false, nil
	}
	return j.cfg.Cache.Get(ctx, key)
}

// ask makes one judge call for attempt a of the votes (all with the
// endpoint and sampling of votes[0]): n = len(votes) choices, choice c
// answering votes[c]. Its "user" field names the trajectory, judge
// version, votes and attempt; its seed is derived from them, so a call
// asked again (after a crash before it was cached) samples the same
// answers from a server that honours seeds, and each attempt samples new
// ones (vLLM gives choice c of a seeded request the seed + c:
// ParentRequest._get_child_sampling_params in vllm/v1/engine/
// parallel_sampling.py). It returns the choices the server gave, at least
// one and at most n (a server may ignore n).
// maxTokens, when > 0, replaces the policy's max_tokens (the call made
// again after a truncated answer).
func (j *Judge) ask(ctx context.Context, ep *endpoint, p *pass, id string, votes []int, a, maxTokens int) ([]Call, error) {
	vs := make([]string, len(votes))
	for k, v := range votes {
		vs[k] = strconv.Itoa(v)
	}
	tag := fmt.Sprintf("%s/%s/v%s/a%d", id, j.verID, strings.Join(vs, "+"), a)
	seed := int64(seedOf(tag))
	sp := j.cfg.Policy.VoteSampling(votes[0])
	sp.Seed = &seed
	if maxTokens > 0 {
		sp.MaxTokens = maxTokens
	}
	n := len(votes)
	req := model.Request{Encoded: p.msgs, N: n, Params: model.Params{Sampling: sp}, User: tag}
	if err := ep.acquire(ctx); err != nil {
		return nil, err
	}
	defer ep.release()
	j.cfg.Metrics.flight(ep.name, 1)
	defer j.cfg.Metrics.flight(ep.name, -1)
	start := time.Now()
	answers, err := ep.model.Chat(ctx, req)
	d := time.Since(start)
	if err == nil && len(answers) == 0 {
		err = errors.New("the answer has no choices")
	}
	j.cfg.Metrics.call(ep.name, d, err)
	if err != nil {
		return nil, err
	}
	at := time.Now().UTC()
	out := make([]Call, min(len(answers), n))
	for c := range out {
		out[c] = Call{
			Raw: answers[c].Content, Model: ep.spec.Model, Endpoint: ep.name,
			Resolution: p.resolution, LatencyMS: d.Milliseconds(), At: at,
			FinishReason: answers[c].FinishReason, MaxTokens: maxTokens,
		}
		if n > 1 {
			out[c].Choices, out[c].Choice = n, c
		}
	}
	return out, nil
}

// seedOf is a request seed derived from a call's tag (31 bits, so that
// every server takes it).
func seedOf(tag string) int {
	h := fnv.New64a()
	h.Write([]byte(tag))
	return int(h.Sum64() & 0x7fffffff)
}
