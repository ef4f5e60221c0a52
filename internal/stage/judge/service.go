package judge

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/judge/report"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/prometheus/client_golang/prometheus"
)

// ServiceConfig configures Serve.
type ServiceConfig struct {
	Judge *Judge
	Bus   *bus.Bus
	// Archive is the blob store the judged trajectories are kept in.
	Archive *blob.Store
	// Ledger, when set, is the run ledger: at the end of a drain the
	// trajectories it lists as published for the runs the drain saw are
	// compared with the archive's judgements, and the ones neither judged
	// nor dead-lettered (lost from the stream: store damage) are warned
	// about and counted (Stats.Unreceived).
	Ledger *ledger.Ledger
	// Apps filters the trajectories by app (empty: all).
	Apps []string
	// Runs, when given, judges only these runs' trajectories (rollout
	// --run names), on a consumer of their own (DurableName with runs):
	// the trajectories of other runs are acknowledged on that consumer
	// only, so they stay for the judge consumers that would judge them.
	Runs []string
	// RunsStart, with Runs, is when the earliest of those runs started
	// (the run ledger's start; RunsStart): a run-selected consumer made
	// now starts there, ten minutes early for clock skew, instead of
	// reading the whole retained stream; zero: from the stream's start.
	RunsStart time.Time
	// Durable is the consumer name all judge processes of one
	// configuration share (default DurableName).
	Durable string
	// Workers is the number of trajectories judged at once (default 8).
	Workers int
	// MaxDeliver bounds the deliveries of one trajectory (default 10):
	// endpoint failures are retried with backoff until the last delivery,
	// which judges with the votes it can get (unusable ones count as
	// such). A judging a stop interrupts (an outage past its budget, a
	// shutdown, a crash) spends a delivery too, as JetStream counts them:
	// heldDeliveries more are allowed before the trajectory is
	// dead-lettered, so that such stops on its last delivery do not lose
	// it.
	MaxDeliver int
	// RetryDelay is the first wait before a trajectory is tried again
	// after an endpoint or store failure, doubling per delivery up to 5
	// minutes (default 5 s).
	RetryDelay time.Duration
	// AckWait is how long a trajectory being judged may go without a
	// heartbeat before NATS hands it to another worker (default 60 s;
	// heartbeats go every AckWait/3): after a crash, its trajectories come
	// back this long after their last heartbeat.
	AckWait time.Duration
	// OutageBudget is how long the judge waits for a judge endpoint that
	// is down for every worker (its calls fail and its /models probe
	// too: model.Outages) before Serve stops with the *model.OutageError
	// (default model.DefaultOutageBudget). During the wait no trajectory
	// is judged; the ones the outage interrupted are held (in progress)
	// and judged when it answers, with no delivery spent and no vote made
	// unusable by it. OutageProbe is the first wait between probes
	// (default 1 s, doubling up to 30 s).
	OutageBudget, OutageProbe time.Duration
	// Registerer takes the outage breaker's metrics (nil: unregistered).
	Registerer prometheus.Registerer
	// Drain returns once nothing is left to judge.
	Drain bool
	// ProgressEvery, when positive, is how often the counts so far are
	// logged at info ("judge: progress"); they are logged at the end too
	// ("judge: drained" after a drain, "judge: stopped" otherwise).
	ProgressEvery time.Duration
	Log           *slog.Logger
}

// heldDeliveries are the deliveries a trajectory may have beyond
// MaxDeliver: its last delivery judges it whatever its endpoints say, so
// only a stop in the middle of a judging (outage budget, shutdown, crash)
// or a store that keeps failing uses them.
const heldDeliveries = 5

// DurableName is the default consumer name: one per judge version (a new
// version judges the whole stream again), app filter and run selection.
// A name longer than JetStream's 255-byte limit (many long app names)
// ends in a hash of the app tokens instead of the tokens. Runs (sorted,
// as service.NameList gives them) add "_runs<hash of the names>": a run
// selection has a consumer of its own, which acknowledges the other runs'
// trajectories without taking them from any other consumer.
func DurableName(ver string, apps []string, runs ...string) string {
	name := "judge_" + ver
	var toks, sel string
	for _, a := range apps {
		toks += "_" + bus.KeyToken(bus.AppToken(a))
	}
	sel = runsSuffix(runs)
	if len(name)+len(toks)+len(sel) > maxConsumerName {
		sum := sha256.Sum256([]byte(toks))
		toks = "_apps" + hex.EncodeToString(sum[:8])
	}
	return name + toks + sel
}

// consumerName is the consumer a judge takes: the durable name given, or
// DurableName's. A name given for the judge's shared consumer (--durable,
// CODAPIPE_JUDGE_DURABLE) gets a run selection's suffix too: acknowledged
// there, another run's trajectories would be lost to the workers sharing
// it.
func consumerName(durable, ver string, apps, runs []string) string {
	switch {
	case durable == "":
		return DurableName(ver, apps, runs...)
	case len(runs) > 0 && !strings.HasSuffix(durable, runsSuffix(runs)):
		return durable + runsSuffix(runs)
	}
	return durable
}

// runsConsumerIdle is how long a run-selected judge consumer (--runs) may
// go unused before the server deletes it; a later judge of those runs
// makes it again (their judgements are in the archive: republished, not
// judged again).
const runsConsumerIdle = 7 * 24 * time.Hour

// clockSkew is how much earlier than a run's recorded start (a rollout
// host's clock) its consumer starts reading (the stream's clock).
const clockSkew = 10 * time.Minute

// RunsStart returns the time a judge of runs may start reading the raw
// stream at: the earliest start the run ledger records for them (start
// looks one up). A run with no start recorded has published nothing yet,
// so now bounds it.
func RunsStart(ctx context.Context, runs []string, now time.Time, start func(ctx context.Context, run string) (time.Time, bool, error)) (time.Time, error) {
	earliest := now
	for _, r := range runs {
		t, ok, err := start(ctx, r)
		if err != nil {
			return time.Time{}, err
		}
		if ok && t.Before(earliest) {
			earliest = t
		}
	}
	return earliest, nil
}

// runsSuffix is the part of a consumer's name that a run selection adds,
// "_runs<hash of the runs>" ("" for none): a consumer that takes only some
// runs acknowledges the others' trajectories without judging them, so it
// never shares its name with a consumer that judges them.
func runsSuffix(runs []string) string {
	if len(runs) == 0 {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.Join(runs, "\x00")))
	return "_runs" + hex.EncodeToString(sum[:8])
}

// maxConsumerName is JetStream's limit on a consumer's name, in bytes.
const maxConsumerName = 255

// Stats counts what Serve did.
type Stats struct {
	Decisions map[traj.Decision]int `json:"decisions"` // judgements published, by decision
	Calls     int                   `json:"calls"`     // model calls behind them (cached ones included)
	// Republished counts trajectories whose judgement was already in the
	// archive (a redelivery after a crash): published again, not judged.
	Republished int `json:"republished"`
	// OtherRuns counts trajectories of runs outside ServiceConfig.Runs:
	// acknowledged on the run selection's own consumer, not judged.
	OtherRuns int `json:"other_runs,omitempty"`
	// Unusable counts the votes that gave no verdict, by reason
	// (report.UnusableReason), Undecided the undecided judgements by the
	// reason of their first unusable vote; Example is the reason of the
	// first undecided judgement in full.
	Unusable  map[string]int `json:"unusable_votes,omitempty"`
	Undecided map[string]int `json:"undecided_by_reason,omitempty"`
	Example   string         `json:"undecided_example,omitempty"`
	// Outages counts the judge endpoint outages Serve waited out (or
	// stopped at), OutageHeld the judgings they interrupted (done again,
	// not counted as retries or unusable votes).
	Outages    int `json:"endpoint_outages,omitempty"`
	OutageHeld int `json:"outage_held,omitempty"`
	// DeadLettered counts messages given up on with a reason; TooLarge
	// those of them whose judge answer was too large to keep in the vote
	// cache (bus.ErrTooLarge): Execute fails when there are any.
	DeadLettered int `json:"dead_lettered"`
	TooLarge     int `json:"too_large,omitempty"`
	Retried      int `json:"retried"`
	// Missing are the raw stream's sequences it no longer holds (store
	// damage, bus.Bus.Missing): trajectories never judged.
	Missing bus.Gaps `json:"missing,omitempty"`
	// Unreceived counts, by run, the trajectories the run ledger lists as
	// published that were neither judged (by any judge of this version)
	// nor dead-lettered (by any judge process) by the end of a drain: lost
	// from the stream where the server did not tell (a damaged block).
	// `rollout --verify --run RUN` runs them again.
	Unreceived map[string]int `json:"unreceived,omitempty"`
}

// addUnusable counts jd's unusable votes and, when it is undecided, its
// reason.
func (s *Stats) addUnusable(jd *traj.Judgement) {
	first := ""
	for _, v := range jd.Votes {
		if v.Verdict != nil {
			continue
		}
		r := report.UnusableReason(v.Error)
		if s.Unusable == nil {
			s.Unusable = map[string]int{}
		}
		s.Unusable[r]++
		first = cmp.Or(first, r)
	}
	if jd.Decision != traj.Undecided {
		return
	}
	if s.Undecided == nil {
		s.Undecided = map[string]int{}
	}
	s.Undecided[cmp.Or(first, "no_vote")]++
	s.Example = cmp.Or(s.Example, jd.Reason)
}

// Trajectories is the number of judgements published.
func (s Stats) Trajectories() int {
	n := 0
	for _, c := range s.Decisions {
		n += c
	}
	return n
}

type server struct {
	cfg     ServiceConfig
	log     *slog.Logger
	start   time.Time
	outages *model.Outages
	// stop ends the consumer with the outage that outlasted its budget.
	stop context.CancelCauseFunc

	mu sync.Mutex
	st Stats
	// taken are the runs and apps of the trajectories this process took
	// (for the ledger check), and the ids it dead-lettered.
	taken ledger.Taken
}

// Serve consumes raw trajectories and judges them until ctx ends, or with
// Drain until nothing is left. For each trajectory it:
//  1. returns the archived judgement if there is one (a redelivery),
//  2. otherwise judges it (answered calls come from the vote cache) and
//     archives the judged trajectory,
//  3. publishes it on coda.judged.<app> with MessageID (de-duplicated),
//  4. acks.
//
// An undecodable or invalid trajectory and one whose screenshots cannot
// be read are dead-lettered with the reason; a failing endpoint, cache or
// store makes the trajectory wait and come back. A judge endpoint that is
// down for every worker pauses the judging (ServiceConfig.OutageBudget);
// an outage beyond the budget ends Serve with the *model.OutageError.
func Serve(ctx context.Context, cfg ServiceConfig) (Stats, error) {
	if cfg.Judge == nil || cfg.Bus == nil || cfg.Archive == nil {
		return Stats{}, errors.New("judge: serve needs a judge, a bus and an archive store")
	}
	cfg.Runs = service.NameList(cfg.Runs)
	cfg.Durable = consumerName(cfg.Durable, cfg.Judge.VersionID(), cfg.Apps, cfg.Runs)
	cfg.Workers = service.Positive(cfg.Workers, 8)
	cfg.MaxDeliver = service.Positive(cfg.MaxDeliver, 10)
	cfg.RetryDelay = service.Positive(cfg.RetryDelay, 5*time.Second)
	cfg.AckWait = service.Positive(cfg.AckWait, 60*time.Second)
	cfg.Log = cmp.Or(cfg.Log, slog.Default())
	s := &server{cfg: cfg, log: cfg.Log.With("judge_version", cfg.Judge.VersionID()), start: time.Now()}
	s.st.Decisions = map[traj.Decision]int{}
	s.outages = model.NewOutages(model.OutageConfig{
		Probes: cfg.Judge.Probes(), Budget: cfg.OutageBudget, ProbeEvery: cfg.OutageProbe, Log: cfg.Log, Registerer: cfg.Registerer,
	})
	defer s.outages.Close()
	ctx, s.stop = context.WithCancelCause(ctx)
	defer s.stop(nil)
	s.log.Info("judge: consuming trajectories", "consumer", cfg.Durable, "apps", appsOrAll(cfg.Apps), "runs", appsOrAll(cfg.Runs), "workers", cfg.Workers,
		"policy", cfg.Judge.Version().Policy, "models", cfg.Judge.Version().Models)

	stopProgress := bus.Every(ctx, cfg.ProgressEvery, func(context.Context) { s.progress("judge: progress") })
	spec := bus.ConsumerSpec{
		Durable: cfg.Durable, Workers: cfg.Workers, MaxDeliver: cfg.MaxDeliver + heldDeliveries, AckWait: cfg.AckWait, Drain: cfg.Drain,
	}
	if len(cfg.Runs) > 0 {
		// A consumer of its own per selection: deleted by the server once
		// unused for a week, and, when the runs' start is known, not
		// reading what the stream held before them.
		spec.InactiveThreshold = runsConsumerIdle
		if !cfg.RunsStart.IsZero() {
			spec.StartTime = cfg.RunsStart.Add(-clockSkew)
		}
	}
	cst, err := cfg.Bus.Consume(ctx, service.StageConsumer(bus.Raw, cfg.Apps, spec), s.handle)
	if cause := context.Cause(ctx); errors.Is(cause, model.ErrOutage) {
		err = errors.Join(err, cause)
	}
	s.count(func(st *Stats) {
		st.Missing = cst.Missing
		st.Outages, st.OutageHeld = s.outages.Stats()
	})
	if cfg.Drain && err == nil && cfg.Ledger != nil {
		s.checkLedger(context.WithoutCancel(ctx))
	}
	stopProgress()
	if cfg.ProgressEvery > 0 {
		if cfg.Drain && err == nil {
			s.progress("judge: drained")
		} else {
			s.progress("judge: stopped")
		}
	}
	return s.stats(), err
}

// reasons writes counts by reason in a stable order: "no_verdict=3 truncated=1".
func reasons(m map[string]int) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

func appsOrAll(apps []string) string {
	if len(apps) == 0 {
		return "all"
	}
	return strings.Join(apps, ",")
}

func (s *server) stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Decisions = maps.Clone(s.st.Decisions)
	st.Unusable = maps.Clone(s.st.Unusable)
	st.Undecided = maps.Clone(s.st.Undecided)
	return st
}

func (s *server) count(f func(*Stats)) {
	s.mu.Lock()
	f(&s.st)
	s.mu.Unlock()
}

// progress logs msg with the judgements so far by decision, the calls per
// judged trajectory and the rate.
func (s *server) progress(msg string) {
	st := s.stats()
	n := st.Trajectories()
	judged := n - st.Decisions[traj.NotJudged]
	cpt := 0.0
	if judged > 0 {
		cpt = float64(st.Calls) / float64(judged)
	}
	el := time.Since(s.start).Seconds()
	s.log.Info(msg, "judged", n, "clean", st.Decisions[traj.CleanSuccess], "redundant", st.Decisions[traj.RedundantSuccess],
		"failure", st.Decisions[traj.Failure], "undecided", st.Decisions[traj.Undecided], "not_judged", st.Decisions[traj.NotJudged],
		"calls_per_trajectory", math.Round(cpt*100)/100, "dead_lettered", st.DeadLettered,
		"per_s", math.Round(float64(n)/max(el, 1e-9)*100)/100)
	if len(st.Unreceived) > 0 {
		s.log.Warn(msg+": trajectories the run ledger lists that no judge received", "unreceived", reasons(st.Unreceived))
	}
	if len(st.Unusable) > 0 {
		// Why votes gave no verdict, at info: a prompt set whose answers
		// the judge cannot read shows here, not only at debug.
		s.log.Info(msg+": votes without a verdict", "unusable_votes", reasons(st.Unusable), "undecided", reasons(st.Undecided), "example", st.Example)
	}
}

func (s *server) retryDelay(deliveries uint64) time.Duration {
	d := s.cfg.RetryDelay
	for i := uint64(1); i < deliveries && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

func (s *server) handle(ctx context.Context, m *bus.Msg) bus.Result {
	res, jd := s.process(ctx, m)
	switch res.String() {
	case "ack":
		s.count(func(st *Stats) {
			if jd != nil {
				st.Decisions[jd.Decision]++
				if jd.Decision != traj.NotJudged {
					st.Calls += jd.Calls()
				}
				st.addUnusable(jd)
			}
		})
	case "retry":
		if m.Deliveries >= uint64(s.cfg.MaxDeliver+heldDeliveries) {
			// The consumer dead-letters a retry on its last delivery.
			s.count(func(st *Stats) { st.DeadLettered++ })
			break
		}
		s.count(func(st *Stats) { st.Retried++ })
	default:
		s.count(func(st *Stats) { st.DeadLettered++ })
	}
	return res
}

// process judges one message; jd is the judgement published on ack.
func (s *server) process(ctx context.Context, m *bus.Msg) (res bus.Result, _ *traj.Judgement) {
	t, err := traj.DecodeTrajectory(m.Data)
	if err == nil {
		err = t.Validate()
	}
	if err != nil {
		return bus.Reject(fmt.Sprintf("judge: message %s on %s is not a valid trajectory: %v", m.ID, m.Subject, err)), nil
	}
	if len(s.cfg.Runs) > 0 && !slices.Contains(s.cfg.Runs, t.Run) {
		// Another run's: this consumer is the run selection's own, so the
		// ack takes it from no consumer that would judge it.
		s.count(func(st *Stats) { st.OtherRuns++ })
		return bus.Ack(), nil
	}
	defer func() { // for the ledger check at the end of a drain
		r := res.String()
		s.taken.Took(t.Run, t.Task.App, t.ID, r != "ack" && (r != "retry" || m.Deliveries >= uint64(s.cfg.MaxDeliver+heldDeliveries)))
	}()
	log := s.log.With("trajectory", t.ID, "task", t.Task.ID, "delivery", m.Deliveries)
	ver := s.cfg.Judge.VersionID()
	key := archive.Key(t.Run, t.Task.App, t.ID, ver)
	retry := func(what string, err error) bus.Result {
		d := s.retryDelay(m.Deliveries)
		log.Warn("judge: trajectory will be tried again", "after", d, "what", what, "err", err)
		return bus.Retry(d, fmt.Sprintf("judge: trajectory %s: %s: %v", t.ID, what, err))
	}

	body, jd, err := s.archived(ctx, key)
	if err != nil {
		return retry("read the archive", err), nil
	}
	if body != nil {
		s.count(func(st *Stats) { st.Republished++ })
		log.Info("judge: judgement already archived; publishing it again", "key", key)
	} else {
		jd, err = s.judge(ctx, t, m.Deliveries >= uint64(s.cfg.MaxDeliver))
		var ie *InputError
		var ee *EndpointError
		switch {
		case errors.As(err, &ie):
			return bus.Reject(fmt.Sprintf("judge: trajectory %s: %s", t.ID, ie.Reason)), nil
		case errors.Is(err, model.ErrOutage):
			// The judge stops; the trajectory comes back to the next one.
			s.stop(err)
			return bus.Retry(s.cfg.RetryDelay, fmt.Sprintf("judge: trajectory %s: %v", t.ID, err)), nil
		case errors.Is(err, bus.ErrTooLarge):
			// Known before writing: the same judging is as large again.
			s.count(func(st *Stats) { st.TooLarge++ })
			log.Error("judge: a judge call's answer is too large to keep; the trajectory goes to the dead letters", "err", err)
			return bus.Reject(fmt.Sprintf("judge: trajectory %s: %v", t.ID, err)), nil
		case errors.As(err, &ee):
			return retry("judge endpoint", err), nil
		case err != nil:
			return retry("judging", err), nil
		}
		doc := traj.Judged{SchemaVersion: traj.SchemaVersion, Judgement: *jd, Trajectory: *t}
		if err := doc.Validate(); err != nil {
			// A judgement this service cannot vouch for is kept, with the
			// reason, rather than published.
			return bus.Reject(fmt.Sprintf("judge: trajectory %s: the judged document is not valid: %v", t.ID, err)), nil
		}
		if body, err = traj.MarshalCompact(doc); err != nil {
			return bus.Reject(fmt.Sprintf("judge: trajectory %s: %v", t.ID, err)), nil
		}
		if _, err := s.cfg.Archive.Bucket().Put(ctx, key, bytes.NewReader(body), int64(len(body)), blob.PutOptions{ContentType: "application/json"}); err != nil {
			return retry("archive", err), nil
		}
	}
	ack, err := s.cfg.Bus.Publish(ctx, bus.Subject(bus.Judged, t.Task.App), archive.MessageID(t.ID, ver), body, nil)
	if err != nil {
		return retry("publish", err), nil
	}
	log.Debug("judge: published", "decision", jd.Decision, "votes", len(jd.Votes), "seq", ack.Seq, "duplicate", ack.Duplicate)
	return bus.Ack(), jd
}

// judge judges t, waiting out outages of its endpoints: a call that
// failed because its endpoint is down for everyone (the breaker's probe
// fails too) is made again once the endpoint answers, with the answered
// votes from the cache; it neither spends a delivery nor makes a vote
// unusable. final is the trajectory's last delivery: a call that fails
// while its endpoint answers others makes the vote unusable
// (Judge.JudgeLast). An outage beyond the budget returns the
// *model.OutageError.
func (s *server) judge(ctx context.Context, t *traj.Trajectory, final bool) (*traj.Judgement, error) {
	down := func(ctx context.Context, err error) bool {
		ep, d := s.outages.Down(ctx, err)
		if d {
			s.log.Debug("judge: an endpoint outage interrupted the trajectory; it is judged when the endpoint answers", "trajectory", t.ID, "endpoint", ep)
		}
		return d
	}
	for {
		if err := s.outages.Wait(ctx); err != nil {
			return nil, err
		}
		var jd *traj.Judgement
		var err error
		if final {
			// An *EndpointError here is an outage (down said so).
			jd, err = s.cfg.Judge.JudgeLast(ctx, t, down)
		} else {
			jd, err = s.cfg.Judge.Judge(ctx, t, false)
		}
		var ee *EndpointError
		switch {
		case !errors.As(err, &ee) || ctx.Err() != nil:
			return jd, err
		case final || down(ctx, err):
			continue
		}
		return nil, err
	}
}

// archived returns the archived judged document under key, or nil.
func (s *server) archived(ctx context.Context, key string) ([]byte, *traj.Judgement, error) {
	doc, body, err := archive.Read(ctx, s.cfg.Archive.Bucket(), key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return nil, nil, nil
	case errors.Is(err, archive.ErrDamaged), blob.Damaged(err):
		// A damaged archive entry (it does not decode, or its bytes do
		// not match their recorded checksum: a truncated record) is
		// judged again and replaced.
		s.log.Warn("judge: archived judgement unreadable; judging again", "key", key, "err", err)
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	}
	return body, &doc.Judgement, nil
}

// checkLedger compares, for each run and app this drain took trajectories
// of, the run ledger's published trajectories with the judgements in the
// archive (of this judge version) and the dead letters (this process's,
// then, for what is still missing, the app's dead-letter subject, which
// every judge process writes to): what is in none never reached a judge.
// The stream's own accounting (Missing) does not see a message whose block
// was damaged in the middle; the ledger does.
func (s *server) checkLedger(ctx context.Context) {
	seen, deadHere := s.taken.Runs()
	dead := ledger.DeadLetters{Bus: s.cfg.Bus}
	ver := s.cfg.Judge.VersionID()
	for _, ra := range seen {
		run, app := ra.Run, ra.App
		var judged map[string]bool // the archive's judgements, listed when the run is over
		var listErr error
		have := func(id string) bool {
			if judged == nil {
				judged = map[string]bool{}
				prefix := archive.Prefix + bus.KeyToken(run) + "/" + bus.KeyToken(app) + "/"
				for info, err := range s.cfg.Archive.Bucket().List(ctx, prefix) {
					if err != nil {
						listErr = err
						break
					}
					if n, ok := archive.Parse(info.Key); ok && n.Version == bus.KeyToken(ver) {
						judged[n.ID] = true
					}
				}
			}
			return listErr != nil || judged[bus.KeyToken(id)] || deadHere[id]
		}
		missing, listed, readErr, err := dead.Lost(ctx, s.cfg.Ledger.Unreceived, run, have, bus.Subject(bus.Raw, app))
		if err == nil {
			err = listErr
		}
		if readErr != nil {
			s.log.Warn("judge: the dead letters could not be read; what the ledger check finds missing may have been dead-lettered by another judge process", "run", run, "app", app, "err", readErr)
		}
		if err != nil {
			s.log.Warn("judge: the run ledger or the archive could not be read to check what the drain received", "run", run, "err", err)
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
		s.log.Warn("judge: the run ledger lists published trajectories that were neither judged nor dead-lettered: lost from the stream (a damaged store?); `rollout --verify --run RUN` runs them again",
			"run", run, "app", app, "ledger", listed, "judged", len(judged), "unreceived", len(missing), "example", missing[0])
	}
}
