// Package advantage is the third stage: it consumes judged trajectories,
// computes group-relative advantages (pkg/grpo) and writes them as Arrow
// IPC or Parquet shards (internal/contract/shard) with a manifest, acknowledging a
// message only once its rows are durable and recorded (see commit.go).
package advantage

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Modes.
const (
	ModeStep    = "step"    // CODA's decoupled GRPO: one group per positive step
	ModeOutcome = "outcome" // one group per task and run, K trajectories
)

// Config configures Serve.
type Config struct {
	Bus   *bus.Bus
	Store *blob.Store // screenshots, prompt sets and the judged archive
	// Out is where the shard set goes (a local folder or S3 bucket), and
	// OutURL its location as the user gave it (part of the set's identity).
	Out    blob.Bucket
	OutURL string

	Mode      string         // ModeStep (default) or ModeOutcome
	Label     grpo.LabelMode // step mode
	Estimator grpo.Estimator
	Step      grpo.StepOptions
	Outcome   grpo.OutcomeConfig

	Format        shard.Format // shard.FormatArrow (default) or shard.FormatParquet
	RowsPerShard  int64
	BytesPerShard int64
	// Images is where the rows carry their images (default
	// shard.ImagesFiles); empty takes EmbedImages: ImagesEmbed when set.
	Images      shard.ImageMode
	EmbedImages bool   // --embed-images: Images embed (kept for older callers)
	TempDir     string // local spool for open shards (default os.TempDir)

	Apps []string // filter (empty: all)
	// JudgeVersion, when set, binds a new set to that judge version
	// (traj.JudgeVersion.ID) and is part of the set's identity; empty: the
	// set is bound to the first judge version it takes (see judgever.go).
	JudgeVersion string
	// Select chooses the runs, checkpoints and time the set takes; a new
	// set must have one (see Selection and ErrNoSelection).
	Select  Selection
	Durable string // default "advantage_<set>"
	Workers int    // messages handled at once (default 64)
	AckWait time.Duration
	Idle    time.Duration // commit when every handler waits and nothing came for this long (default 250 ms)
	// DiskFullBudget is how long writes may keep failing for want of space
	// (ENOSPC, EDQUOT: where the shards or their temporary files go) before
	// the service stops with a *DiskFullError (default 2 min). Nothing is
	// lost: what failed is not acknowledged, and a later run writes it.
	DiskFullBudget time.Duration
	MaxDelay       time.Duration // commit rows at the latest this long after the first was added (default 10 s)
	Drain          bool
	// RunFinished reports whether a run's rollout is over, so an outcome
	// group missing members can be completed without them (nil: never).
	RunFinished func(ctx context.Context, run string) (bool, error)
	// RunUnreceived, when set, is the run ledger's comparison
	// (ledger.Ledger.Unreceived): at the end of a drain, what a finished
	// run published is compared with what the set took in
	// (Stats.Unreceived).
	RunUnreceived ledger.UnreceivedFunc
	Topology      bus.Topology
	Version       string // codapipe version, in the schema metadata
	// ProgressEvery, when positive, is how often the counts so far are
	// logged at info ("advantage: progress").
	ProgressEvery time.Duration
	Metrics       *Metrics // nil: none
	Log           *slog.Logger
}

// Set is the id of the shard set a configuration writes: a hash of the
// output location, the mode and every option that changes a row. The same
// configuration run again continues the same set (and writes nothing a
// second time); another one is another set, in another folder.
func (c *Config) Set() string {
	h := sha256.New()
	// The sets written before --images keep their ids: store is hashed as
	// EmbedImages false was, embed as true; files (the default since) adds
	// its name, so it is always a set of its own.
	images := c.imageMode()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%v\n", c.OutURL, c.Mode, c.Label, c.Estimator.String(), c.Format, images == shard.ImagesEmbed)
	if images == shard.ImagesFiles {
		fmt.Fprintf(h, "images\x00%s\n", images)
	}
	_ = json.NewEncoder(h).Encode(c.Step)
	_ = json.NewEncoder(h).Encode(c.Outcome)
	if k := c.Select.normalized().key(); k != "" { // none: the ids of sets made before selections
		fmt.Fprintf(h, "select\x00%s\n", k)
	}
	if c.JudgeVersion != "" { // none: the ids of sets made before bindings
		fmt.Fprintf(h, "judge\x00%s\n", c.JudgeVersion)
	}
	return c.Mode + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// imageMode is Images, or what EmbedImages says when it is empty.
func (c *Config) imageMode() shard.ImageMode {
	switch {
	case c.Images != "":
		return c.Images
	case c.EmbedImages:
		return shard.ImagesEmbed
	}
	return shard.ImagesFiles
}

// Meta is the schema metadata of the set's files.
func (c *Config) Meta() shard.Meta {
	m := shard.Meta{Mode: c.Mode, Version: c.Version, Images: c.imageMode()}
	m.SetEstimator(c.Estimator)
	var rc []byte
	if c.Mode == ModeOutcome {
		rc, _ = json.Marshal(c.Outcome)
	} else {
		m.LabelMode = string(c.Label)
		rc, _ = json.Marshal(c.Step)
	}
	m.RewardConfig = string(rc)
	return m
}

func (c *Config) defaults() error {
	if c.Bus == nil || c.Store == nil || c.Out == nil {
		return errors.New("advantage: needs a bus, a blob store and an output location")
	}
	c.Mode = cmp.Or(c.Mode, ModeStep)
	if c.Mode != ModeStep && c.Mode != ModeOutcome {
		return fmt.Errorf("advantage: mode %q, want step or outcome", c.Mode)
	}
	c.Label = cmp.Or(c.Label, grpo.LabelModeClean)
	if c.Estimator == (grpo.Estimator{}) {
		c.Estimator = grpo.DefaultEstimator()
	}
	if err := c.Estimator.Validate(); err != nil {
		return fmt.Errorf("advantage: %w", err)
	}
	if c.Step == (grpo.StepOptions{}) {
		c.Step = grpo.DefaultStepOptions()
	}
	if err := c.Step.Reward.Validate(); err != nil {
		return fmt.Errorf("advantage: %w", err)
	}
	if c.Outcome == (grpo.OutcomeConfig{}) {
		c.Outcome = grpo.DefaultOutcomeConfig()
	}
	if err := c.Outcome.Validate(); err != nil {
		return fmt.Errorf("advantage: %w", err)
	}
	c.Workers = service.Positive(c.Workers, 64)
	c.AckWait = service.Positive(c.AckWait, 60*time.Second)
	c.Idle = service.Positive(c.Idle, 250*time.Millisecond)
	c.MaxDelay = service.Positive(c.MaxDelay, 10*time.Second)
	c.DiskFullBudget = service.Positive(c.DiskFullBudget, 2*time.Minute)
	c.Format = cmp.Or(c.Format, shard.FormatArrow)
	if c.Images = c.imageMode(); !c.Images.Valid() {
		return fmt.Errorf("advantage: --images %q, want files, embed or store", c.Images)
	}
	c.Select = c.Select.normalized()
	if c.Durable == "" {
		c.Durable = "advantage_" + bus.KeyToken(c.Set())
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return nil
}

// Stats counts what Serve did.
type Stats struct {
	// Set is the shard set's id: its folder under --out.
	Set      string `json:"set"`
	Messages int    `json:"messages"` // judged trajectories taken in by this process
	Skipped  int    `json:"skipped"`  // already committed (a redelivery)
	// Unselected counts judged trajectories outside the set's selection:
	// acknowledged, not written.
	Unselected int `json:"outside_selection"`
	// JudgeVersion is the judge version the set is bound to ("" when it
	// took no judgement yet).
	JudgeVersion string `json:"judge_version,omitempty"`
	// OtherJudgeVersion counts, by judge version, the judgements of
	// versions other than the set's: acknowledged, not written.
	OtherJudgeVersion map[string]int `json:"other_judge_version,omitempty"`
	// Notes say in words what was skipped and why (JudgeVersionNotes).
	Notes        []string `json:"notes,omitempty"`
	DeadLettered int      `json:"dead_lettered"` // given up on, with a reason
	Retried      int      `json:"retried"`
	// Missing are the judged stream's sequences it no longer holds (store
	// damage, bus.Bus.Missing): judged trajectories never taken in.
	Missing bus.Gaps `json:"missing,omitempty"`
	// Unreceived counts, by run, the trajectories a finished run's ledger
	// lists as published that the set has not taken in by the end of a
	// drain and that no judge or advantage process dead-lettered: not
	// judged, or lost from a stream (a damaged store: rollout --verify,
	// then judge --drain).
	Unreceived map[string]int `json:"unreceived,omitempty"`
	Commits    int            `json:"commits"`
	Files      int            `json:"files"`
	Counts     Counts         `json:"counts"` // what this process committed
	// Manifest is the set's manifest as last written (all processes' commits).
	Manifest *shard.Manifest `json:"-"`
	// Selection is the set's selection as recorded when it started.
	Selection *shard.Selection `json:"selection,omitempty"`
}

type server struct {
	cfg    Config
	set    string
	log    *slog.Logger
	render *renderer
	st     *state
	co     *committer
	start  time.Time
	sel    selector
	judge  *binder

	// stop ends the consumer with a cause (a *DiskFullError).
	stop context.CancelCauseFunc

	mu       sync.Mutex
	stats    Stats
	diskFull time.Time                // when writes began to fail for want of space; zero: they do not
	taken    ledger.Taken             // the runs taken in, and what was acknowledged unwritten or dead-lettered (checkLedger)
	flushing map[string]bool          // outcome groups being flushed in this process
	inflight map[string]chan struct{} // step mode: message ids being handled in this process, closed when done
}

// Serve consumes judged trajectories until ctx ends, or with Drain until
// nothing is left, and writes their rows to the shard set; at the end it
// writes the set's manifest (every commit of every process so far) and
// publishes it on CODA_MANIFEST.
func Serve(ctx context.Context, cfg Config) (Stats, error) {
	if err := cfg.defaults(); err != nil {
		return Stats{}, err
	}
	set := cfg.Set()
	st, err := openState(ctx, cfg.Bus, cfg.Topology, set)
	if err != nil {
		return Stats{}, err
	}
	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	waitWatch, err := st.watch(wctx)
	if err != nil {
		stopWatch()
		return Stats{}, err
	}
	defer func() { stopWatch(); waitWatch() }()
	// Read or record the set's selection, through a cluster's elections
	// (a Create that was stored is read back on the next try).
	var sel shard.Selection
	now := time.Now()
	err = bus.RetryTransient(ctx, 0, func(ctx context.Context) error {
		var err error
		sel, err = st.selection(ctx, cfg.Bus, cfg.Durable, cfg.Select, now)
		return err
	}, func(attempt int, err error) {
		cfg.Log.Warn("advantage: selection: transient error; retrying", "attempt", attempt, "err", err)
	})
	if err != nil {
		return Stats{}, err
	}

	jb := &binder{st: st}
	if _, err := jb.start(ctx, cfg.JudgeVersion); err != nil {
		return Stats{}, err
	}

	meta := cfg.Meta()
	w, err := shard.NewWriter(shard.Config{
		Bucket: cfg.Out, Prefix: set, Format: cfg.Format, RowsPerShard: cfg.RowsPerShard, BytesPerShard: cfg.BytesPerShard,
		TempDir: cfg.TempDir, Meta: meta, Images: cfg.Images,
	})
	if err != nil {
		return Stats{}, err
	}
	defer w.Close()
	s := &server{cfg: cfg, set: set, log: cfg.Log.With("set", set), render: newRenderer(cfg.Store, cfg.Images), st: st,
		start: time.Now(), flushing: map[string]bool{}, inflight: map[string]chan struct{}{}, sel: selector{sel: sel, apps: cfg.Apps}, judge: jb}
	s.stats.Selection, s.stats.Set = &sel, set
	s.co = newCommitter(w, st, cfg.Workers, cfg.Idle, cfg.MaxDelay)
	s.co.onCommit = func(c Commit, d time.Duration) {
		cfg.Metrics.committed(c, d)
		s.mu.Lock()
		s.diskFull = time.Time{} // a commit went through: space again
		s.stats.Commits++
		if c.File != nil {
			s.stats.Files++
		}
		s.stats.Counts.Merge(c.Counts)
		s.mu.Unlock()
		s.log.Debug("advantage: committed", "commit", c.ID, "messages", len(c.Messages), "rows", c.Counts.Rows)
	}
	s.log.Info("advantage: consuming judged trajectories", "consumer", cfg.Durable, "mode", cfg.Mode, "estimator", cfg.Estimator.String(),
		"out", cfg.Out.String()+"/"+set, "format", cfg.Format, "workers", cfg.Workers, "selection", selectionText(sel),
		"judge_version", cmp.Or(jb.boundVersion(), "the first taken"))

	tctx, stopTick := context.WithCancel(context.WithoutCancel(ctx))
	var twg sync.WaitGroup
	twg.Add(1)
	go func() { // owned by Serve: stopped and waited for below
		defer twg.Done()
		t := time.NewTicker(max(cfg.Idle/2, 10*time.Millisecond))
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-tctx.Done():
				return
			case <-t.C:
				s.co.tick(tctx)
				if cfg.ProgressEvery > 0 && time.Since(last) >= cfg.ProgressEvery {
					last = time.Now()
					s.progress()
				}
			}
		}
	}()
	// Outcome groups completed (or whose run ended) while no process was
	// there to write them. After the ticker has started: a group's rows
	// wait for a commit, which the ticker makes.
	if cfg.Mode == ModeOutcome {
		if err := s.flushWaiting(ctx, false); err != nil {
			stopTick()
			twg.Wait()
			return s.result(), err
		}
	}
	ctx, s.stop = context.WithCancelCause(ctx)
	defer s.stop(nil)
	cst, cerr := cfg.Bus.Consume(ctx, service.StageConsumer(bus.Judged, cfg.Apps, bus.ConsumerSpec{
		Durable: cfg.Durable, StartTime: s.sel.startTime(), Workers: cfg.Workers, AckWait: cfg.AckWait, Drain: cfg.Drain,
	}), s.handle)
	s.count(func(st *Stats) { st.Missing = cst.Missing })
	s.co.tick(context.WithoutCancel(ctx))
	stopTick()
	twg.Wait()
	var dfe *DiskFullError
	if errors.As(context.Cause(ctx), &dfe) {
		return s.result(), dfe
	}
	if cerr != nil {
		return s.result(), cerr
	}
	if cfg.Mode == ModeOutcome && cfg.Drain {
		if err := s.flushWaiting(context.WithoutCancel(ctx), true); err != nil {
			return s.result(), err
		}
	}
	if cfg.Drain && cfg.RunUnreceived != nil {
		s.checkLedger(context.WithoutCancel(ctx))
	}
	m, err := s.writeManifest(context.WithoutCancel(ctx))
	s.mu.Lock()
	s.stats.Manifest = m
	s.mu.Unlock()
	return s.result(), err
}

func (s *server) result() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.JudgeVersion = s.judge.boundVersion()
	st.OtherJudgeVersion = maps.Clone(s.stats.OtherJudgeVersion)
	st.Notes = JudgeVersionNotes(st)
	return st
}

func (s *server) count(f func(*Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// progress logs the counts so far.
func (s *server) progress() {
	st := s.result()
	s.log.Info("advantage: progress", "trajectories", st.Messages, "rows", st.Counts.Rows, "files", st.Files, "commits", st.Commits,
		"already_written", st.Skipped, "dead_lettered", st.DeadLettered, "elapsed", time.Since(s.start).Round(time.Second).String())
}

// handle takes one judged trajectory.
func (s *server) handle(ctx context.Context, m *bus.Msg) bus.Result {
	jd, err := traj.DecodeJudged(m.Data)
	if err == nil {
		err = jd.Validate()
	}
	if err != nil {
		s.count(func(st *Stats) { st.DeadLettered++ })
		s.cfg.Metrics.trajectory("dead_lettered")
		return bus.Reject(fmt.Sprintf("advantage: message %s on %s is not a valid judged trajectory: %v", m.ID, m.Subject, err))
	}
	if ok, why := s.sel.match(&jd.Trajectory); !ok {
		// Not the set's: not compared with its run's ledger either.
		s.count(func(st *Stats) { st.Unselected++ })
		s.cfg.Metrics.trajectory("outside_selection")
		s.log.Debug("advantage: outside the selection; acknowledged, not written", "message", m.ID, "trajectory", jd.Trajectory.ID, "because", why)
		return bus.Ack()
	}
	s.taken.Took(jd.Trajectory.Run, jd.Trajectory.Task.App, jd.Trajectory.ID, false)
	if ok, err := s.judgeVersion(ctx, m, &jd.Judgement); !ok || err != nil {
		if err != nil {
			return s.failed(m, err)
		}
		s.taken.SetAside(jd.Trajectory.ID)
		return bus.Ack()
	}
	s.count(func(st *Stats) { st.Messages++ })
	if s.cfg.Mode == ModeOutcome {
		return s.handleOutcome(ctx, m, jd)
	}
	// Two stream messages with one id (the same judgement published again
	// after the stream's de-duplication window) may be in flight at once:
	// the second waits here until the first is handled (committed, its
	// rows acked), then is skipped — it waits rather than retries, since a
	// commit may take --max-delay and retries count towards MaxDeliver.
	for {
		if s.st.messageDone(m.ID) {
			s.count(func(st *Stats) { st.Skipped++ })
			s.cfg.Metrics.trajectory("skipped")
			return bus.Ack()
		}
		s.mu.Lock()
		first, busy := s.inflight[m.ID]
		if !busy {
			s.inflight[m.ID] = make(chan struct{})
		}
		s.mu.Unlock()
		if !busy {
			break
		}
		select {
		case <-first:
		case <-ctx.Done():
			s.count(func(st *Stats) { st.Retried++ })
			return bus.Retry(time.Second, fmt.Sprintf("advantage: message %s is being handled already", m.ID))
		}
	}
	defer func() {
		s.mu.Lock()
		close(s.inflight[m.ID])
		delete(s.inflight, m.ID)
		s.mu.Unlock()
	}()
	s.co.begin()
	// The screenshots of the labelled steps (the only ones that can give
	// rows) are reserved in the embedding budget (a bad judgement is left to
	// stepRows, which says why).
	var refs []traj.ImageRef
	if labels, err := grpo.LabelSteps(&jd.Trajectory, &jd.Judgement, s.cfg.Label); err == nil {
		refs = promptImages(&jd.Trajectory, func(i int) bool { return labels[i] != grpo.LabelNone })
	}
	release, err := s.render.reserve(ctx, refs)
	if err != nil {
		s.co.leave(ctx)
		return s.failed(m, err)
	}
	defer release()
	rows, cnt, err := s.stepRows(ctx, &jd.Trajectory, &jd.Judgement)
	if err != nil {
		s.co.leave(ctx)
		return s.failed(m, err)
	}
	cnt.Sources = sourcesOf([]*traj.Trajectory{&jd.Trajectory}, rows)
	if err := s.co.add(ctx, m.ID, nil, rows, cnt, release); err != nil {
		return s.failed(m, err)
	}
	return bus.Ack()
}

// judgeVersion reports whether a judgement is of the set's judge version
// (binding the set to it when the set has none yet); one of another
// version is counted, logged once per version, and to be acknowledged
// unwritten.
func (s *server) judgeVersion(ctx context.Context, m *bus.Msg, j *traj.Judgement) (bool, error) {
	ok, first, bound, err := s.judge.take(ctx, j.Judge)
	if err != nil || ok {
		return ok, err
	}
	v := j.Judge.ID()
	s.count(func(st *Stats) {
		if st.OtherJudgeVersion == nil {
			st.OtherJudgeVersion = map[string]int{}
		}
		st.OtherJudgeVersion[v]++
	})
	s.cfg.Metrics.trajectory("other_judge_version")
	if first {
		s.log.Info("advantage: judgements of another judge version are acknowledged, not written: the set is bound to one judge version",
			"judge_version", v, "set_judge_version", bound, "policy", j.Judge.Policy, "models", strings.Join(j.Judge.Models, ","), "message", m.ID)
	}
	return false, nil
}

// DiskFullError stops the service when writes fail for want of space for
// longer than Config.DiskFullBudget.
type DiskFullError struct {
	Budget time.Duration
	Err    error // the last write's
}

func (e *DiskFullError) Error() string {
	return fmt.Sprintf("writes failed for want of space for %v (--disk-full-budget); free space where the shards and their temporary files go, and run again: nothing is lost, what failed was not acknowledged: %v", e.Budget, e.Err)
}

func (e *DiskFullError) Unwrap() error { return e.Err }

// outOfSpace reports whether err is a write that failed for want of space.
// The first such failure starts the budget's clock: unless a commit goes
// through before it runs out (which clears the clock), the service stops
// then with a *DiskFullError. It stops on time, not on a count of
// failures: the messages are retried slowly meanwhile (failed), so that
// their deliveries do not run out first.
func (s *server) outOfSpace(err error) bool {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return false
	}
	budget := s.cfg.DiskFullBudget
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.diskFull.IsZero() {
		return true
	}
	since := time.Now()
	s.diskFull = since
	s.log.Warn("advantage: a write failed for want of space; the service stops unless a commit goes through within the budget", "budget", budget, "err", err)
	stop := s.stop
	time.AfterFunc(budget, func() { // ends on its own; stop is a no-op once Serve has returned
		s.mu.Lock()
		still := s.diskFull.Equal(since)
		s.mu.Unlock()
		if still && stop != nil {
			s.log.Error("advantage: out of space for the budget; stopping", "budget", budget, "err", err)
			stop(&DiskFullError{Budget: budget, Err: err})
		}
	})
	return true
}

// failed turns an error into a dead letter (bad input) or a retry.
func (s *server) failed(m *bus.Msg, err error) bus.Result {
	var ie *InputError
	if !errors.As(err, &ie) && blob.Damaged(err) {
		// Content damaged in the store is as permanent as bad input,
		// wherever it was read: a dead letter, never a retry.
		ie = &InputError{Reason: fmt.Sprintf("message %s: %v", m.ID, err)}
	}
	if ie != nil {
		id, _, _ := strings.Cut(m.ID, ".") // <trajectory id>.<judge version>
		s.taken.SetAside(id)               // dead-lettered here: taken in, not lost
		s.count(func(st *Stats) { st.DeadLettered++ })
		s.cfg.Metrics.trajectory("dead_lettered")
		s.log.Warn("advantage: dead-lettered", "message", m.ID, "reason", ie.Reason)
		return bus.Reject("advantage: " + ie.Reason)
	}
	s.count(func(st *Stats) { st.Retried++ })
	d := min(5*time.Second*time.Duration(1<<min(m.Deliveries-1, 6)), 5*time.Minute)
	if s.outOfSpace(err) {
		// The budget is counted in time (outOfSpace): a quarter of it per
		// try, so that the deliveries outlast it.
		d = max(s.cfg.DiskFullBudget/4, 100*time.Millisecond)
	}
	s.log.Warn("advantage: will try again", "message", m.ID, "after", d, "err", err)
	return bus.Retry(d, fmt.Sprintf("advantage: message %s: %v", m.ID, err))
}

// handleOutcome adds a judged trajectory to its task's group; the message
// that completes the group writes the group's rows.
func (s *server) handleOutcome(ctx context.Context, m *bus.Msg, jd *traj.Judged) bus.Result {
	t := &jd.Trajectory
	gid := grpo.OutcomeGroupID(t.Run, t.Task.ID)
	if s.st.groupDone(gid) {
		s.count(func(st *Stats) { st.Skipped++ })
		s.cfg.Metrics.trajectory("skipped")
		return bus.Ack()
	}
	mem := Member{ID: t.ID, Message: m.ID, Archive: archiveKey(t, &jd.Judgement)}
	g, err := s.st.addMember(ctx, gid, t.Run, t.Samples, mem)
	if err != nil {
		return s.failed(m, err)
	}
	if !g.Complete() {
		return bus.Ack() // the member is kept in the state bucket
	}
	if err := s.flushGroup(ctx, g); err != nil {
		var held *heldError
		if errors.As(err, &held) {
			// Another process writes the group. Come back once its lease
			// has passed: by then the group is committed (and this message
			// acked as such), or its writer died and this one takes over.
			s.count(func(st *Stats) { st.Retried++ })
			d := max(time.Until(held.until), 0) + 100*time.Millisecond
			return bus.Retry(d, fmt.Sprintf("advantage: outcome group %s is being written by another process", gid))
		}
		return s.failed(m, err)
	}
	return bus.Ack()
}

// flushWaiting writes the outcome groups in waiting that are complete,
// or (final) whose run is over, without their missing members.
func (s *server) flushWaiting(ctx context.Context, final bool) error {
	groups, err := s.st.waiting(ctx)
	if err != nil {
		return err
	}
	for i := range groups {
		g := &groups[i]
		if s.st.groupDone(g.ID) {
			_ = s.st.forget(ctx, g.ID)
			continue
		}
		if !g.Complete() {
			if !final || s.cfg.RunFinished == nil {
				continue
			}
			over, err := s.cfg.RunFinished(ctx, g.Run)
			if err != nil {
				return err
			}
			if !over {
				continue
			}
			s.log.Info("advantage: the run is over; writing an incomplete group", "group", g.ID, "members", len(g.Members), "samples", g.Samples)
		}
		if err := s.flushGroup(ctx, g); err != nil {
			var ie *InputError
			var held *heldError
			if errors.As(err, &held) {
				s.log.Debug("advantage: outcome group written by another process", "group", g.ID, "err", err)
				continue
			}
			if errors.As(err, &ie) {
				s.log.Warn("advantage: outcome group cannot be written", "group", g.ID, "reason", ie.Reason)
				continue
			}
			return err
		}
	}
	return nil
}

// flushGroup writes the rows of one outcome group and, once committed,
// forgets its waiting record. Across processes, the group's flush lease
// (state.acquire, for the ack wait) makes one process write it: a group
// another process holds gives a *heldError; one whose lease says Done was
// committed already and is only forgotten.
func (s *server) flushGroup(ctx context.Context, g *Group) (err error) {
	s.mu.Lock()
	if s.flushing[g.ID] {
		s.mu.Unlock()
		return nil
	}
	s.flushing[g.ID] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.flushing, g.ID)
		s.mu.Unlock()
	}()
	if s.st.groupDone(g.ID) {
		return s.st.forget(ctx, g.ID)
	}
	l, err := s.st.acquire(ctx, s.st.flushKey(g.ID), s.cfg.AckWait)
	if err != nil {
		return err
	}
	if l.rec.Done {
		s.st.markGroupDone(g.ID)
		return s.st.forget(ctx, g.ID)
	}
	committed := false
	defer func() {
		// Done once committed (for good); otherwise given back at once, so
		// that the next try (here or in another process) need not wait.
		if rerr := s.st.release(context.WithoutCancel(ctx), l, committed, 0); rerr != nil {
			s.log.Warn("advantage: outcome group lease not released; it expires", "group", g.ID, "err", rerr)
			if committed && err == nil {
				err = rerr // the message comes back and finds the commit record
			}
		}
		if committed && err == nil {
			err = s.st.forget(ctx, g.ID)
		}
	}()
	s.co.begin()
	items := make([]grpo.Judged, 0, len(g.Members))
	judgements := map[string]*traj.Judgement{}
	for _, mem := range g.Members {
		jd, err := s.readArchive(ctx, mem.Archive)
		if err != nil {
			s.co.leave(ctx)
			return err
		}
		items = append(items, grpo.Judged{Trajectory: &jd.Trajectory, Judgement: &jd.Judgement})
		judgements[jd.Trajectory.ID] = &jd.Judgement
	}
	var refs []traj.ImageRef
	for _, it := range items {
		refs = append(refs, promptImages(it.Trajectory, func(int) bool { return true })...)
	}
	release, err := s.render.reserve(ctx, refs)
	if err != nil {
		s.co.leave(ctx)
		return err
	}
	defer release()
	rows, cnt, err := s.outcomeRows(ctx, items, judgements)
	if err != nil {
		s.co.leave(ctx)
		return err
	}
	ts := make([]*traj.Trajectory, len(items))
	for i := range items {
		ts[i] = items[i].Trajectory
	}
	cnt.Sources = sourcesOf(ts, rows)
	if err := s.co.add(ctx, "group:"+g.ID, []string{g.ID}, rows, cnt, release); err != nil {
		return err
	}
	committed = true
	return nil
}

// archiveKey is the judge's archive key of a judged trajectory.
func archiveKey(t *traj.Trajectory, j *traj.Judgement) string {
	return archive.Key(t.Run, t.Task.App, t.ID, j.Judge.ID())
}

func (s *server) readArchive(ctx context.Context, key string) (*traj.Judged, error) {
	jd, _, err := archive.Read(ctx, s.cfg.Store.Bucket(), key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return nil, inputErr("judged trajectory %s is not in the archive", key)
	case errors.Is(err, archive.ErrDamaged), blob.Damaged(err):
		return nil, inputErr("judged trajectory %s in the archive is damaged (re-judge it: docs/operations.md, Damage and repair): %v", key, err)
	}
	return jd, err
}

// manifestLease waits for the set's manifest lease (another process
// writing the manifest holds it for a moment; a dead one until its time
// passes) and takes it for --ack-wait: like a message, the manifest of a
// process that died passes to another that long after (a writer that
// stalls past its lease: writeManifest). The wait is bounded by twice
// --ack-wait, and never by less than two minutes.
func (s *server) manifestLease(ctx context.Context) (lease, error) {
	ttl := s.cfg.AckWait
	ctx, cancel := context.WithTimeout(ctx, max(2*ttl, 2*time.Minute))
	defer cancel()
	for {
		l, err := s.st.acquire(ctx, s.st.manifestKey(), ttl)
		var held *heldError
		if !errors.As(err, &held) {
			if err != nil {
				return l, fmt.Errorf("advantage: manifest lease: %w", err)
			}
			return l, nil
		}
		t := time.NewTimer(min(max(time.Until(held.until), 10*time.Millisecond), 100*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return lease{}, fmt.Errorf("advantage: manifest lease: %w (%w)", held, ctx.Err())
		case <-t.C:
		}
	}
}

// writeManifest writes the set's manifest from every commit record (of
// every process) and publishes it on CODA_MANIFEST. Several processes on
// one set write it one at a time: each holds the set's manifest lease
// while it lists the commit records and writes the file, so a later
// writer lists at least what an earlier one did. The lease is renewed
// just before the write (renewManifestLease): a writer that stalled past
// it while listing leaves the manifest to the process that took it over,
// or to the newer manifest written meanwhile.
func (s *server) writeManifest(ctx context.Context) (*shard.Manifest, error) {
	l, err := s.manifestLease(ctx)
	if err != nil {
		return nil, err
	}
	held := true
	commits, err := s.st.committed(ctx)
	if err != nil {
		_ = s.st.release(ctx, l, false, 0)
		return nil, err
	}
	written := len(commits)
	defer func() {
		if !held {
			return
		}
		if err := s.st.release(ctx, l, false, written); err != nil {
			s.log.Warn("advantage: manifest lease not released; it expires", "err", err)
		}
	}()
	var total Counts
	var files []shard.File
	for _, c := range commits {
		total.Merge(c.Counts)
		if c.File != nil {
			files = append(files, *c.File)
		}
	}
	mf := shard.NewManifest(s.set, s.cfg.Format, s.cfg.Meta(), files)
	m := &mf
	m.Counts = shard.Counts{
		Trajectories: total.Trajectories, Groups: total.Groups, ZeroVarianceGroups: total.ZeroVariance,
		DroppedGroups: total.Dropped, Rows: total.Rows, RowsPerApp: total.RowsPerApp,
	}
	m.SetSources(total.Sources)
	sel := s.sel.sel
	m.Selection = &sel
	if m.JudgeVersion, err = s.judge.current(ctx); err != nil {
		return nil, err
	}
	var write bool
	l, held, write, err = s.renewManifestLease(ctx, l, len(commits))
	if err != nil {
		return nil, err
	}
	if !write {
		return m, nil
	}
	if err := shard.WriteManifest(ctx, s.cfg.Out, s.set, mf); err != nil {
		return nil, err
	}
	body, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	id := fmt.Sprintf("%s.%d", s.set, len(commits))
	if _, err := s.cfg.Bus.Publish(ctx, bus.Subject(bus.Manifest, s.set), id, body, nil); err != nil {
		return m, fmt.Errorf("advantage: publish manifest: %w", err)
	}
	s.log.Info("advantage: manifest written", "runs", strings.Join(m.Runs, ","), "checkpoints", strings.Join(m.Checkpoints, ","), "rows", total.Rows, "files", len(m.Files), "trajectories", total.Trajectories,
		"groups", total.Groups, "dropped_groups", total.Dropped, "manifest", s.cfg.Out.String()+"/"+s.set+"/manifest.json")
	return m, nil
}

// renewManifestLease renews the held manifest lease l just before a
// manifest listing listed commits is written, and says whether to write
// it: not when another process took the lease over meanwhile (this one
// stalled past it; held is then false, there is nothing to give back),
// nor when a manifest written meanwhile listed more commits. Only a write
// that itself stalls past the renewed lease can still put back an older
// manifest, until the next manifest write of the set lists every commit
// again.
func (s *server) renewManifestLease(ctx context.Context, l lease, listed int) (_ lease, held, write bool, err error) {
	nl, err := s.st.acquire(ctx, s.st.manifestKey(), s.cfg.AckWait)
	var other *heldError
	switch {
	case errors.As(err, &other):
		s.log.Warn("advantage: the manifest lease passed to another process while this one listed the commits; the manifest is left to it",
			"commits", listed, "err", err)
		return l, false, false, nil
	case err != nil:
		return l, true, false, fmt.Errorf("advantage: manifest lease: %w", err)
	case listed < nl.rec.Commits:
		s.log.Warn("advantage: a newer manifest was written meanwhile; left as it is", "commits", listed, "manifest_commits", nl.rec.Commits)
		return nl, true, false, nil
	}
	return nl, true, true, nil
}

// selectionText is a selection in one line, for logs and summaries.
func selectionText(sel shard.Selection) string {
	var parts []string
	if len(sel.Runs) > 0 {
		parts = append(parts, "runs="+strings.Join(sel.Runs, ","))
	}
	if len(sel.Checkpoints) > 0 {
		parts = append(parts, "checkpoints="+strings.Join(sel.Checkpoints, ","))
	}
	if sel.Since != nil {
		parts = append(parts, "since="+sel.Since.Format(time.RFC3339))
	}
	if sel.All || len(parts) == 0 {
		parts = append(parts, "all retained")
	}
	return strings.Join(parts, " ")
}

// checkLedger compares, for each finished run this drain took judged
// trajectories of, the run's ledger with what the set has taken in: its
// commits (by every process), its outcome groups in waiting, and what this
// process acknowledged unwritten. What is in neither did not reach the set.
func (s *server) checkLedger(ctx context.Context) {
	seen, unwritten := s.taken.Runs()
	if len(seen) == 0 {
		return
	}
	dead := ledger.DeadLetters{Bus: s.cfg.Bus}
	taken := map[string]bool{}
	s.st.mu.Lock()
	for m := range s.st.messages { // judged message ids: <trajectory id>.<judge version>
		id, _, _ := strings.Cut(m, ".")
		taken[id] = true
	}
	s.st.mu.Unlock()
	if s.cfg.Mode == ModeOutcome {
		groups, err := s.st.waiting(ctx)
		if err != nil {
			s.log.Warn("advantage: the groups in waiting could not be read to check what the drain received", "err", err)
			return
		}
		for _, g := range groups {
			for _, m := range g.Members {
				taken[m.ID] = true
			}
		}
	}
	for _, ra := range seen {
		run := ra.Run
		// Dead-lettered by a judge (raw), or by another advantage process (judged).
		missing, listed, readErr, err := dead.Lost(ctx, s.cfg.RunUnreceived, run, func(id string) bool { return taken[id] || unwritten[id] },
			bus.Subject(bus.Raw, ra.App), bus.Subject(bus.Judged, ra.App))
		if readErr != nil {
			s.log.Warn("advantage: the dead letters could not be read; what the ledger check finds missing may have been dead-lettered by a judge or another advantage process", "run", run, "app", ra.App, "err", readErr)
		}
		if err != nil {
			s.log.Warn("advantage: the run ledger could not be read to check what the drain received", "run", run, "err", err)
			continue
		}
		if len(missing) == 0 {
			continue
		}
		s.count(func(st *Stats) {
			if st.Unreceived == nil {
				st.Unreceived = map[string]int{}
			}
			st.Unreceived[run] += len(missing)
		})
		s.log.Warn("advantage: the run ledger lists published trajectories the set has not taken in and no judge or advantage process dead-lettered: not judged, or lost from a stream (a damaged store?)",
			"run", run, "app", ra.App, "ledger", listed, "unreceived", len(missing), "example", missing[0])
	}
}
