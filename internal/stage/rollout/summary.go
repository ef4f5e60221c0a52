package rollout

import (
	"errors"
	"fmt"
	"github.com/codapipe/codapipe/internal/stage/runreport"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/sched"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
	"github.com/codapipe/codapipe/pkg/vmpool"
)

// Summary is what a run did. The outcome figures cover the whole run —
// the episodes of this invocation and those an earlier invocation of the
// same run published — so a resumed run reports the run; the counts of
// this invocation are Episodes, Retries, Failed, Utilisation and
// WallSeconds.
type Summary struct {
	Run      string `json:"run"`
	App      string `json:"app"`
	Tasks    int    `json:"tasks"`
	Samples  int    `json:"samples"`
	Group    int    `json:"group"`
	Episodes int    `json:"episodes"`          // run by this invocation
	Skipped  int    `json:"already_published"` // published by an earlier invocation of the run
	// Verified: the invocation ran with --verify; LostRerun counts the
	// episodes the ledger listed as published whose trajectory was not on
	// the stream (lost to store damage, purged), run again (in Episodes).
	Verified  bool    `json:"verified,omitempty"`
	LostRerun int     `json:"lost_rerun,omitempty"`
	Success   int     `json:"successes"`
	Rate      float64 `json:"success_rate"` // over scored episodes
	// Unscored counts episodes the evaluator could not score (it failed, a
	// check is unsupported, or the task has none): like environment errors
	// they are left out of the success rate, Average@K and Pass@K.
	Unscored int `json:"unscored"`
	// AverageAtK is the mean over tasks of the success fraction of their
	// scored samples; PassAtK the fraction of tasks with at least one
	// success. Environment-error and unscored episodes are left out of both.
	AverageAtK float64        `json:"average_at_k"`
	PassAtK    float64        `json:"pass_at_k"`
	EnvErrors  int            `json:"env_errors"`
	Outcomes   map[string]int `json:"outcomes"`
	MeanSteps  float64        `json:"mean_steps"`
	Retries    int            `json:"env_retries"`
	// PublishFailures counts episodes whose trajectory could not be
	// published; LeaseFailures episodes that got no VM (every VM
	// quarantined, or the VM's lock was lost in each attempt: see
	// sched.ErrVMLockLost). Both are this invocation's.
	PublishFailures int `json:"publish_failures"`
	LeaseFailures   int `json:"lease_failures"`
	// Spooled counts this invocation's trajectories that could not be
	// published and were kept in the spool (<data>/spool) instead;
	// SpoolLeft the spool files still waiting at the end (any run's).
	Spooled   int `json:"spooled"`
	SpoolLeft int `json:"spool_left"`
	// SharedQueue: the episodes came from the run's shared work queue.
	// ByOtherHosts counts the run's episodes other hosts published while
	// this one ran (in the outcome figures, not in Episodes); Retaken the
	// episodes this host took over from another (its lease had expired,
	// or it gave them back).
	SharedQueue  bool     `json:"shared_queue"`
	ByOtherHosts int      `json:"episodes_by_other_hosts"`
	Retaken      int      `json:"episodes_taken_over"`
	Utilisation  float64  `json:"vm_utilisation"`
	Quarantined  []string `json:"quarantined_vms"`
	// VMResets counts this invocation's VM resets (Backend.Reset calls)
	// and VMFailures its VM failures (failed starts, resets and health
	// checks, and unhealthy releases): the pool's Stats.
	VMResets    int64   `json:"vm_resets"`
	VMFailures  int64   `json:"vm_failures"`
	WallSeconds float64 `json:"wall_seconds"`
	// Stopped says why this invocation stopped before every episode of
	// the run was published (interrupted, or a model endpoint outage
	// beyond its budget: rollout then exits non-zero); Left counts the
	// run's episodes not published yet, which running the same command
	// (same --run) again does. Empty and 0 for a run that ended.
	Stopped string `json:"stopped,omitempty"`
	Left    int    `json:"episodes_left,omitempty"`
	// Outages counts the model endpoint outages this invocation waited
	// out (or stopped at) and OutageRequeued the episodes they
	// interrupted, run again (not environment errors).
	Outages        int `json:"endpoint_outages,omitempty"`
	OutageRequeued int `json:"outage_requeued,omitempty"`
	// OnStream counts the run's trajectories on the stream (all its
	// invocations'; the ledger's records of the run).
	OnStream uint64 `json:"trajectories_on_stream"`
	// ExecutorCoords is the executor's coordinate space; ledger.Grounding counts
	// its answers over the run, and UnparsedShare and OutOfRangeShare are
	// the shares of grounded candidates whose answer did not parse or had
	// a point outside that space (both score 0 in every group).
	ExecutorCoords  string           `json:"executor_coords"`
	Grounding       ledger.Grounding `json:"grounding"`
	UnparsedShare   float64          `json:"unparsed_share"`
	OutOfRangeShare float64          `json:"out_of_range_share"`
	// Plans counts how varied the planner's plans were over the run;
	// IdenticalPlansShare is the share of sampled steps whose G+1 plans
	// were all the same text, VariedGroupsShare the share of groups
	// (plans 1..G, G >= 2) with at least two different plans.
	Plans               ledger.PlanVariety `json:"plans"`
	IdenticalPlansShare float64            `json:"identical_plans_share"`
	VariedGroupsShare   float64            `json:"varied_groups_share"`
	// Lengths is how the episodes' lengths were predicted, and how well
	// (nil: the length history is off).
	Lengths *LengthSummary `json:"lengths,omitempty"`
	// Warnings say what looks wrong with the run's data (printed loudly).
	Warnings []string `json:"warnings"`
	// CodapipeVersion is the build that made the summary (service.Version).
	CodapipeVersion string `json:"codapipe_version"`
}

// summarize builds the summary of a run from this invocation's results and
// the ledger records of earlier invocations (done).
func summarize(cfg Config, results []sched.Result, done map[ledger.EpisodeKey]ledger.Record, wall time.Duration, ps vmpool.Stats) *Summary {
	s := &Summary{Run: cfg.Run, App: cfg.App, Tasks: len(cfg.Tasks), Samples: cfg.Samples, Group: cfg.Group, Skipped: len(done),
		Outcomes: map[string]int{}, WallSeconds: wall.Seconds(), Quarantined: []string{},
		VMResets: ps.Resets, VMFailures: ps.Failures, CodapipeVersion: service.Version().String()}
	// Utilisation as the run report measures it, over this invocation's
	// episodes (their final trajectories).
	var eps []runreport.Episode
	for _, r := range results {
		if t := r.Trajectory; t != nil {
			eps = append(eps, runreport.Episode{VM: t.VM, Start: t.StartedAt, End: t.EndedAt})
		}
	}
	s.Utilisation, _ = runreport.Utilisation(eps)
	var tally ledger.Tally
	add := func(task string, r ledger.Record) {
		s.Grounding.Add(r.Grounding)
		s.Plans.Add(r.Plans)
		tally.Add(task, r)
	}
	for k, r := range done {
		add(k.Task, r)
	}
	for _, r := range results {
		switch {
		case errors.Is(r.Err, sched.ErrNoVM):
			s.LeaseFailures++
		case errors.Is(r.Err, errSpooled):
			s.Spooled++
		case r.Err != nil:
			s.PublishFailures++
		}
		if r.Retaken {
			s.Retaken++
		}
		s.Retries += max(r.Attempts-1, 0)
		if r.Trajectory == nil {
			continue
		}
		s.Episodes++
		add(r.Job.Task.ID, ledger.RecordOf(r.Trajectory))
	}
	sc := tally.Scores()
	s.Outcomes, s.EnvErrors, s.Unscored, s.Success = sc.Outcomes, sc.EnvErrors, sc.Unscored, sc.Successes
	s.Rate, s.AverageAtK, s.PassAtK, s.MeanSteps = sc.Rate, sc.AverageAtK, sc.PassAtK, sc.MeanSteps
	if g := s.Grounding; g.Grounded > 0 {
		s.UnparsedShare = float64(g.Unparsed) / float64(g.Grounded)
		s.OutOfRangeShare = float64(g.OutOfRange) / float64(g.Grounded)
	}
	ec := uitars.WithDefaults(cfg.ExecutorCoords)
	s.ExecutorCoords = uitars.CoordsString(ec)
	s.Warnings = append([]string{}, groundingWarnings(s.Grounding, ec)...)
	if p := s.Plans; p.Sampled > 0 {
		s.IdenticalPlansShare = float64(p.Identical) / float64(p.Sampled)
	}
	if p := s.Plans; p.Groups > 0 {
		s.VariedGroupsShare = float64(p.Varied) / float64(p.Groups)
	}
	s.Warnings = append(s.Warnings, planWarnings(s.Plans, s.IdenticalPlansShare)...)
	for _, q := range ps.QuarantinedVMs {
		s.Quarantined = append(s.Quarantined, q.VM+": "+q.Reason)
	}
	sort.Strings(s.Quarantined)
	return s
}

// Print writes the summary for people.
func (s *Summary) Print(w io.Writer) {
	row := func(label, format string, args ...any) {
		fmt.Fprintf(w, "  %-20s %s\n", label, fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(w, "run %s — %s: %d tasks × %d samples, G=%d\n", traj.PrintName(s.Run), traj.PrintName(s.App), s.Tasks, s.Samples, s.Group)
	row("episodes run", "%d (already published before: %d)", s.Episodes, s.Skipped)
	if s.Verified {
		row("verified", "ledger and stream compared: %d episodes listed as published were not on the stream (lost), run again", s.LostRerun)
	}
	if s.SharedQueue {
		row("shared queue", "%d episodes run by other hosts; %d taken over from another host", s.ByOtherHosts, s.Retaken)
	}
	row("success", "%d (%.1f%% of scored episodes)", s.Success, 100*s.Rate)
	if s.Unscored > 0 {
		row("unscored", "%d (the evaluator failed or could not run; not counted as failures)", s.Unscored)
	}
	row(fmt.Sprintf("Average@%d", s.Samples), "%.2f%%", 100*s.AverageAtK)
	row(fmt.Sprintf("Pass@%d", s.Samples), "%.2f%%", 100*s.PassAtK)
	row("environment errors", "%d (after %d retries)", s.EnvErrors, s.Retries)
	if s.Outages > 0 {
		row("endpoint outages", "%d (the run waited; %d interrupted episodes ran again, not counted as environment errors)", s.Outages, s.OutageRequeued)
	}
	row("mean steps", "%.2f", s.MeanSteps)
	row("VM utilisation", "%.1f%%", 100*s.Utilisation)
	keys := make([]string, 0, len(s.Outcomes))
	for k := range s.Outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, s.Outcomes[k])
	}
	row("outcomes", "%s", strings.Join(parts, ", "))
	if len(s.Quarantined) > 0 {
		row("quarantined VMs", "%s", strings.Join(s.Quarantined, "; "))
	}
	if s.PublishFailures > 0 {
		row("publish failures", "%d", s.PublishFailures)
	}
	if s.Spooled > 0 || s.SpoolLeft > 0 {
		row("spooled", "%d trajectories kept on disk this run; %d still waiting (published on the next start)", s.Spooled, s.SpoolLeft)
	}
	if s.LeaseFailures > 0 {
		row("episodes without a VM", "%d (every VM quarantined, or the VM's lock lost in each attempt)", s.LeaseFailures)
	}
	if p := s.Plans; p.Sampled > 0 {
		row("plans", "%.1f%% of %d steps with all G+1 plans identical; %.1f%% of %d groups with two or more different plans",
			100*s.IdenticalPlansShare, p.Sampled, 100*s.VariedGroupsShare, p.Groups)
	}
	if g := s.Grounding; g.Grounded > 0 {
		row("executor answers", "%d grounded in %s: %.1f%% unparsed, %.1f%% out of range", g.Grounded, s.ExecutorCoords,
			100*s.UnparsedShare, 100*s.OutOfRangeShare)
	}
	if l := s.Lengths; l != nil {
		switch {
		case l.ReadError != "":
			row("episode lengths", "history %s unreadable (%s): step limit order", traj.PrintName(l.Family), l.ReadError)
		default:
			row("episode lengths", "history %s: %d predicted from history (mean error %.1fs, %.1f%%), %d from the step limit",
				traj.PrintName(l.Family), l.FromHistory, l.MeanAbsErrorS, 100*l.MeanRelError, l.Fallback)
		}
	}
	row("wall time", "%.1fs", s.WallSeconds)
	fmt.Fprintf(w, "trajectories of run %s on the stream: %d of %d episodes\n", traj.PrintName(s.Run), s.OnStream, s.Tasks*s.Samples)
	if s.Stopped != "" {
		fmt.Fprintf(w, "STOPPED: %s; %d episodes of the run are left: run the same command again (same --run %s) to do them\n", s.Stopped, s.Left, traj.PrintName(s.Run))
	}
	for _, m := range s.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", m)
	}
}

// progress reports episodes done: a bar on a terminal, a log line every
// 10 s otherwise.
type progress struct {
	mu        sync.Mutex
	w         io.Writer
	tty       bool
	total     int
	n, ok     int
	start     time.Time
	lastLog   time.Time
	log       *slog.Logger
	finalized bool
}

func newProgress(w io.Writer, total int, log *slog.Logger) *progress {
	return &progress{w: w, tty: w != nil && service.IsTerminal(w), total: total, start: time.Now(), lastLog: time.Now(), log: log}
}

func (p *progress) done(r sched.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if t := r.Trajectory; t != nil && t.Eval != nil && t.Eval.Passed {
		p.ok++
	}
	el := time.Since(p.start)
	eta := time.Duration(0)
	if p.n > 0 {
		eta = time.Duration(float64(el) / float64(p.n) * float64(p.total-p.n))
	}
	if p.tty {
		const width = 30
		fill := width * p.n / max(p.total, 1)
		fmt.Fprintf(p.w, "\r[%s%s] %d/%d episodes, success %d (%.0f%%), ETA %s   ",
			strings.Repeat("#", fill), strings.Repeat(".", width-fill), p.n, p.total, p.ok, 100*float64(p.ok)/float64(p.n), eta.Round(time.Second))
		return
	}
	if time.Since(p.lastLog) >= 10*time.Second || p.n == p.total {
		p.lastLog = time.Now()
		p.log.Info("rollout: progress", "done", p.n, "total", p.total, "successes", p.ok, "eta", eta.Round(time.Second).String())
	}
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && !p.finalized && p.n > 0 {
		fmt.Fprintln(p.w)
	}
	p.finalized = true
}

// IdenticalPlansWarnAt is the share of sampled steps with all plans
// identical above which the summary warns.
const IdenticalPlansWarnAt = 0.5

// planWarnings warns when most steps sampled identical plans: their
// groups have no variance and all their advantages are 0.
func planWarnings(p ledger.PlanVariety, share float64) []string {
	if p.Sampled == 0 || share <= IdenticalPlansWarnAt {
		return nil
	}
	return []string{fmt.Sprintf("%.0f%% of %d steps sampled G+1 identical plans: their groups have no variance and every advantage is 0. "+
		"The likely cause is greedy sampling: --planner-top-k 1 or --planner-temperature 0, or a server that fills parameters a request "+
		"leaves out from the model's generation_config.json (vLLM's default; Qwen2.5-VL's sets top_k 1). Check the planner's sampling in the trajectories (models.planner.sampling).",
		100*share, p.Sampled)}
}
