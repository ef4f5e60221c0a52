// Package nightly is the nightly specialization job as one command: for
// each app of a list, a named rollout run against the planner checkpoint
// with judge and advantage working beside it and then drained, one shard
// set per app, and at the end the SFT set of the night's runs, exported
// when a bucket is configured. The stages run in this process through
// their typed entry points (their Execute with their Options, parsed from
// the night's --*-args by their ParseOptions), sharing one NATS
// connection: the embedded one this process starts in the data
// directory, or --nats. Re-running a night finishes what is missing: the
// rollout resumes from the run ledger, judge (--runs: the night's run
// only) and advantage drain their durable consumers, and the SFT build is
// deterministic. With other judge arguments the run is judged again, and
// its shard sets and SFT set keep one judge version each.
package nightly

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/codapipe/codapipe/internal/contract/scienceboard/appname"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/infra/syncio"
	"github.com/codapipe/codapipe/internal/stage/advantage"
	"github.com/codapipe/codapipe/internal/stage/judge"
	"github.com/codapipe/codapipe/internal/stage/judge/report"
	"github.com/codapipe/codapipe/internal/stage/rollout"
	"github.com/codapipe/codapipe/internal/stage/runreport"
	"github.com/codapipe/codapipe/internal/stage/sft"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Options are a night as the command line gives it.
type Options struct {
	Apps  []string // applications, one rollout run and one shard set each
	Night string   // the night's name (default today's UTC date)
	// Group and Samples are rollout's G and K.
	Group, Samples int
	// Sim runs every stage on the SIMULATOR, with VMs simulated
	// machines, Seed, TimeScale and SimConfig (codasim.Request).
	Sim       bool
	VMs       int
	Seed      int64
	TimeScale float64
	SimConfig string
	// Workers runs a judge and an advantage worker beside each rollout
	// (as in production); without it they only drain after it.
	Workers bool
	Shards  string   // advantage --out ("" its default, <data>/shards)
	SFTOut  string   // SFT dataset folder ("" <data>/sft/<night>)
	SFTRuns []string // more runs (names or globs) for the SFT set
	Export  string   // s3://bucket/prefix to export the SFT set to ("" none)
	Summary string   // the night's summary as JSON ("" <data>/nightly/<night>/summary.json)
	// ReportSince is how far back the night's report goes: a duration
	// back from the night's start, a date or a time (rollout report
	// --since); "" the default, DefaultReportSince.
	ReportSince string
	// Extra arguments of each stage, split on spaces.
	RolloutArgs, JudgeArgs, AdvantageArgs, SFTArgs string
}

// ErrStage is matched by the error of a night in which a stage failed.
var ErrStage = errors.New("nightly: a stage failed")

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// RunName is the rollout run of app in night: "<night>-<app>", the app
// lower-cased as a subject token (ledger.NightRun, which the run report
// reads back with ledger.NightOf).
func RunName(night, app string) string { return ledger.NightRun(night, app) }

func (o *Options) check() error {
	if len(o.Apps) == 0 {
		return service.Usage(errors.New("no apps: give --apps APP[,APP] (e.g. ChimeraX,KAlgebra)"))
	}
	apps, err := appname.Check("--apps", o.Apps)
	if err != nil {
		return service.Usage(err)
	}
	o.Apps = nil
	for _, a := range apps { // once each, as the benchmark spells it
		if !slices.Contains(o.Apps, a) {
			o.Apps = append(o.Apps, a)
		}
	}
	if o.Night == "" {
		o.Night = time.Now().UTC().Format(time.DateOnly)
	}
	if _, err := rollout.ParseSince(cmp.Or(o.ReportSince, DefaultReportSince), time.Now()); err != nil {
		return service.Usage(fmt.Errorf("--report-since: %w", err))
	}
	for _, a := range o.Apps { // the night's run names are <night>-<app>
		if err := service.CheckNames("--night", traj.RunName, RunName(o.Night, a)); err != nil {
			return service.Usage(fmt.Errorf("%w (the run name of app %s is <night>-<app>)", err, traj.QuoteName(a)))
		}
	}
	if !nameRE.MatchString(o.Night) {
		return service.Usage(fmt.Errorf("--night %s: want letters, digits, '.', '_' and '-' (e.g. 2026-11-26)", traj.QuoteName(o.Night)))
	}
	if o.Samples < 1 {
		return service.Usage(fmt.Errorf("--samples %d: want K >= 1", o.Samples))
	}
	if o.Sim && o.SimConfig != "" { // read by each stage's simulator: a missing file is the night's usage error
		if _, err := os.Stat(o.SimConfig); err != nil {
			return service.Usage(fmt.Errorf("--sim-config: %w", err))
		}
	}
	if o.Export != "" && !strings.HasPrefix(o.Export, "s3://") {
		return service.Usage(fmt.Errorf("--export %q: want s3://bucket/prefix", o.Export))
	}
	return nil
}

// Summary is what a night did.
type Summary struct {
	Night       string    `json:"night"`
	Started     time.Time `json:"started"`
	WallSeconds float64   `json:"wall_seconds"`
	OK          bool      `json:"ok"`
	Errors      []string  `json:"errors"`
	// New counts the work this invocation did, over all apps: episodes
	// run, trajectories judged, shard rows written.
	New  Work  `json:"new"`
	Apps []App `json:"apps"`
	SFT  *SFT  `json:"sft,omitempty"`
	// Exported is where the SFT set was exported to ("" not configured
	// or not done).
	Exported string `json:"exported,omitempty"`
	// ShardFiles are the local paths of the night's shard files (none when
	// the shards go to a bucket).
	ShardFiles []string `json:"shard_files"`
	// Report is the night's report page: the runs of the night's apps
	// over the nights since ReportSince (rollout report --runs
	// '*-<app>' --since), in <data>/nightly/<night>/report.html; ""
	// when it could not be written: ReportError says why (the night's
	// data is complete all the same, and OK is not affected).
	Report      string `json:"report"`
	ReportError string `json:"report_error,omitempty"`
	// SummaryFile is where this summary is written as JSON.
	SummaryFile string `json:"summary_file"`
	// CodapipeVersion is the build that ran the night (service.Version).
	CodapipeVersion string `json:"codapipe_version"`
}

// Work counts what one invocation did.
type Work struct {
	Episodes   int `json:"episodes"`
	Judgements int `json:"judgements"`
	Rows       int `json:"rows"`
}

// App is one app's part of the night.
type App struct {
	App string `json:"app"`
	Run string `json:"run"`
	Err string `json:"error,omitempty"`
	// Rollout is rollout's summary of the whole run.
	Rollout *rollout.Summary `json:"rollout,omitempty"`
	// Judge is the judge report of the run (every judgement archived).
	Judge *report.Figures `json:"judge,omitempty"`
	// Shards is the run's shard set (its manifest's counts).
	Shards *Shards `json:"shards,omitempty"`
	New    Work    `json:"new"`
	// Skipped says what advantage acknowledged without writing it, and
	// why (advantage.JudgeVersionNotes): e.g. the judgements of another
	// judge version than the set's, after a re-run with other judge
	// arguments.
	Skipped []string `json:"skipped,omitempty"`
}

// Shards is one app's shard set.
type Shards struct {
	Set          string `json:"set"`
	Dir          string `json:"dir"` // the set's folder or bucket prefix
	Rows         int    `json:"rows"`
	Trajectories int    `json:"trajectories"`
	Groups       int    `json:"groups"`
	ZeroVariance int    `json:"zero_variance_groups"`
	Files        int    `json:"files"`
	// JudgeVersion is the one judge version of the set's rows.
	JudgeVersion string `json:"judge_version,omitempty"`
}

// SFT is the night's SFT set.
type SFT struct {
	Dir          string         `json:"dir"`
	Runs         []string       `json:"runs"`
	Trajectories int            `json:"trajectories"`
	Samples      map[string]int `json:"samples"` // by split
	// Changed is false when the build wrote the same manifest as the one
	// already there (a re-run with nothing new).
	Changed bool `json:"changed"`
	// JudgeVersion is the set's one judge version; OtherJudgeVersions
	// counts the judgements of other versions it did not take.
	JudgeVersion       string         `json:"judge_version,omitempty"`
	OtherJudgeVersions map[string]int `json:"other_judge_versions,omitempty"`
}

// job is one night being run.
type job struct {
	o      Options
	env    *service.Env
	log    *slog.Logger
	stages stages
	dir    string    // <data>/nightly/<night>: the night's summary and report
	out    io.Writer // the stages' shared output (a syncio.Writer: they run at once)
}

// stages are the stages' typed options, from their --*-args and the
// environment as their commands read them, before the night's own are
// set; and the secrets those flags carry, stripped from their output.
type stages struct {
	rollout              rollout.Options
	judge                judge.Options
	advantage            advantage.Options
	sft                  sft.Options
	rolloutSec, judgeSec *redact.Secrets
	advSec, sftSec       *redact.Secrets
}

// owned are the stage flags the night sets itself: given in a stage's
// --*-args they would be overwritten, so they are refused there; simOwned
// are the simulator's, the night's own with --sim only (without it a
// rollout's --seed seeds its model requests).
var (
	owned = map[string][]string{
		"rollout-args":   {"app", "run", "group", "samples", "summary", "sim"},
		"judge-args":     {"runs", "summary", "sim"},
		"advantage-args": {"runs", "summary", "out"},
		"sftpack-args":   {"runs", "out", "summary"},
	}
	simOwned = map[string][]string{
		"rollout-args": {"vms", "seed", "time-scale", "sim-config"},
		"judge-args":   {"seed", "time-scale", "sim-config"},
	}
)

// parseStages reads the stages' options from the night's --*-args.
func (o *Options) parseStages() (stages, error) {
	var st stages
	var err error
	for _, p := range []struct {
		flag, args string
		parse      func([]string) error
	}{
		{"rollout-args", o.RolloutArgs, func(a []string) (err error) { st.rollout, st.rolloutSec, err = rollout.ParseOptions(a); return }},
		{"judge-args", o.JudgeArgs, func(a []string) (err error) { st.judge, st.judgeSec, err = judge.ParseOptions(a); return }},
		{"advantage-args", o.AdvantageArgs, func(a []string) (err error) { st.advantage, st.advSec, err = advantage.ParseOptions(a); return }},
		{"sftpack-args", o.SFTArgs, func(a []string) (err error) { st.sft, st.sftSec, err = sft.ParseOptions(a); return }},
	} {
		args := strings.Fields(p.args)
		mine := owned[p.flag]
		if o.Sim {
			mine = slices.Concat(mine, simOwned[p.flag])
		}
		for _, a := range args {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if strings.HasPrefix(a, "-") && slices.Contains(mine, name) {
				return st, service.Usage(fmt.Errorf("--%s: --%s is the night's own: give it to nightly (the stages' %s come from the night)", p.flag, name, strings.Join(mine, ", ")))
			}
		}
		if err = p.parse(args); err != nil {
			return st, service.Usage(fmt.Errorf("--%s: %w", p.flag, err))
		}
	}
	// The night's own, set whatever the environment says (CODAPIPE_SUMMARY
	// names one file for every command; CODAPIPE_SIM the simulator).
	st.rollout.Summary, st.judge.Summary, st.advantage.Summary, st.sft.Summary = "", "", "", ""
	st.rollout.Sim, st.judge.Sim = o.Sim, o.Sim
	if o.Sim {
		st.rollout.VMs, st.rollout.SimConfig, st.rollout.TimeScale, st.rollout.Seed = max(o.VMs, 1), o.SimConfig, o.TimeScale, nil
		if o.Seed != 0 { // else the simulator's seed rule
			st.rollout.Seed = &o.Seed
		}
		st.judge.SimConfig, st.judge.TimeScale, st.judge.Seed = o.SimConfig, o.TimeScale, o.Seed
	}
	return st, nil
}

// stageEnv is the Env of one stage of the night: the night's bus and
// store, drain or not, its output on the night's stderr with its secrets
// stripped.
func (j *job) stageEnv(name string, secrets *redact.Secrets, drain bool) (*service.Env, error) {
	j.log.Info("stage", "stage", name)
	return j.env.Stage(name, secrets, drain, j.out, j.out)
}

// Execute runs the night: every app, then the SFT set and its export. It
// returns the summary (also on error) and ErrStage when a stage failed.
func Execute(ctx context.Context, env *service.Env, o Options) (*Summary, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	st, err := o.parseStages()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	j := &job{o: o, env: env, log: env.Log.With("night", o.Night), out: &syncio.Writer{W: env.Stderr}, stages: st,
		dir: filepath.Join(env.Common.DataDir, "nightly", o.Night)}
	if err := os.MkdirAll(j.dir, 0o755); err != nil {
		return nil, fmt.Errorf("nightly: %w", err)
	}
	// One NATS server for every stage: the embedded one, started here.
	b, err := env.Bus(ctx)
	if err != nil {
		return nil, err
	}

	s := &Summary{Night: o.Night, Started: start.UTC(), Errors: []string{}, ShardFiles: []string{}, CodapipeVersion: service.Version().String()}
	s.SummaryFile = o.Summary
	if s.SummaryFile == "" {
		s.SummaryFile = filepath.Join(j.dir, "summary.json")
	}
	var runs []string
	for _, app := range o.Apps {
		a := j.app(ctx, app)
		s.Apps = append(s.Apps, a)
		runs = append(runs, a.Run)
		s.New.Episodes += a.New.Episodes
		s.New.Judgements += a.New.Judgements
		s.New.Rows += a.New.Rows
		if a.Err != "" {
			s.Errors = append(s.Errors, app+": "+a.Err)
		}
		if a.Shards != nil && localDir(a.Shards.Dir) != "" {
			s.ShardFiles = append(s.ShardFiles, shardFiles(a.Shards.Dir)...)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(s.Errors) == 0 && ctx.Err() == nil {
		sftSum, err := j.sft(ctx, append(runs, o.SFTRuns...))
		s.SFT = sftSum
		if err != nil {
			s.Errors = append(s.Errors, "sftpack: "+err.Error())
		} else if o.Export != "" {
			if err := j.export(ctx, sftSum.Dir); err != nil {
				s.Errors = append(s.Errors, "sftpack export: "+err.Error())
			} else {
				s.Exported = o.Export
			}
		}
	} else if len(s.Errors) > 0 {
		s.Errors = append(s.Errors, "sftpack: not built: an app's stages failed (re-run the night to finish them)")
	}
	if ctx.Err() == nil { // the page is made from what the stages stored: its failure is not the night's
		if page, err := j.report(ctx, b, start); err != nil {
			s.ReportError = err.Error()
			j.log.Warn("report not written (the night's data is complete: rollout report --runs writes it again)", "err", err)
		} else {
			s.Report = page
		}
	}
	if ctx.Err() != nil {
		s.Errors = append(s.Errors, "interrupted: "+ctx.Err().Error())
	}
	s.OK = len(s.Errors) == 0
	s.WallSeconds = time.Since(start).Seconds()
	werr := service.WriteSummary(s.SummaryFile, s)
	if !s.OK {
		return s, errors.Join(fmt.Errorf("%w: %s", ErrStage, strings.Join(s.Errors, "; ")), werr)
	}
	return s, werr
}

// app runs one app's part of the night.
func (j *job) app(ctx context.Context, app string) App {
	a := App{App: app, Run: RunName(j.o.Night, app)}
	log := j.log.With("app", app, "run", a.Run)
	fail := func(err error) App {
		a.Err = err.Error()
		log.Error("app failed", "err", err)
		return a
	}
	// Only the night's run: judging the whole stream would cost a real
	// judge's GPU time for other runs (left to their own judges).
	jo := j.stages.judge
	jo.Runs = []string{a.Run}
	ao := j.stages.advantage
	ao.Runs = []string{a.Run}
	if j.o.Shards != "" {
		ao.Out = j.o.Shards
	}
	judges := &consumer[judge.Stats]{j: j, secrets: j.stages.judgeSec, print: judge.PrintStats,
		did:  func(st judge.Stats) bool { return st.Trajectories() > 0 },
		exec: func(ctx context.Context, env *service.Env) (judge.Stats, error) { return judge.Execute(ctx, env, jo) }}
	advs := &consumer[advantage.Stats]{j: j, secrets: j.stages.advSec, print: advantage.PrintStats,
		did: func(st advantage.Stats) bool { return st.Messages > 0 },
		exec: func(ctx context.Context, env *service.Env) (advantage.Stats, error) {
			return advantage.Execute(ctx, env, ao)
		}}
	runJudge, runAdvantage := judges.run, advs.run

	// Judge and advantage work beside the rollout, as in production; they
	// are stopped (their in-flight messages finished) and waited for
	// before the drains.
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if j.o.Workers {
		for name, run := range map[string]func(context.Context, string, bool) error{"judge worker": runJudge, "advantage worker": runAdvantage} {
			wg.Add(1)
			go func() { // owned by app: stopped and waited for below
				defer wg.Done()
				if err := run(wctx, name, false); err != nil && wctx.Err() == nil {
					log.Warn("worker stopped; the drain after the rollout finishes its work", "worker", name, "err", err)
				}
			}()
		}
	}
	ro := j.stages.rollout
	ro.App, ro.Run, ro.Group, ro.Samples = app, a.Run, j.o.Group, j.o.Samples
	rs, rerr := j.rollout(ctx, ro)
	stopWorkers()
	wg.Wait()
	if rs != nil {
		a.Rollout = rs
		a.New.Episodes = rs.Episodes
	}
	if rerr != nil {
		return fail(fmt.Errorf("rollout: %w", rerr))
	}
	if err := runJudge(ctx, "judge --drain", true); err != nil {
		return fail(fmt.Errorf("judge --drain: %w", err))
	}
	if err := runAdvantage(ctx, "advantage --drain", true); err != nil {
		return fail(fmt.Errorf("advantage --drain: %w", err))
	}
	for _, st := range judges.stats {
		a.New.Judgements += st.Trajectories()
	}
	var set string
	var others advantage.Stats // judgements of other judge versions, over the stages
	for _, st := range advs.stats {
		a.New.Rows += st.Counts.Rows
		if st.Set != "" {
			set = st.Set
		}
		others.JudgeVersion = cmp.Or(st.JudgeVersion, others.JudgeVersion)
		for v, n := range st.OtherJudgeVersion {
			if others.OtherJudgeVersion == nil {
				others.OtherJudgeVersion = map[string]int{}
			}
			others.OtherJudgeVersion[v] += n
		}
	}

	a.Skipped = advantage.JudgeVersionNotes(others)

	store, err := j.env.Store(ctx)
	if err != nil {
		return fail(err)
	}
	rep, err := report.Build(ctx, store, report.Config{Run: a.Run})
	if err != nil {
		return fail(fmt.Errorf("judge report of %s: %w", a.Run, err))
	}
	a.Judge = &rep.Overall
	if set != "" {
		a.Shards = j.shards(ctx, set)
	}
	log.Info("app done", "episodes", a.New.Episodes, "judgements", a.New.Judgements, "rows", a.New.Rows)
	return a
}

// consumer is the judge or the advantage stage of an app: each run
// (the worker, the drain) executes it in a stage Env of its own, prints
// its stats when it did something (or drained) and keeps them.
type consumer[S any] struct {
	j       *job
	secrets *redact.Secrets
	exec    func(context.Context, *service.Env) (S, error)
	print   func(io.Writer, S)
	did     func(S) bool

	mu    sync.Mutex
	stats []S // one per run, added as the runs end
}

func (c *consumer[S]) run(ctx context.Context, name string, drain bool) error {
	env, err := c.j.stageEnv(name, c.secrets, drain)
	if err != nil {
		return err
	}
	st, err := c.exec(ctx, env)
	err = c.secrets.Error(err) // as Main strips a command's error
	c.mu.Lock()
	c.stats = append(c.stats, st)
	c.mu.Unlock()
	if drain || c.did(st) {
		c.print(env.Stdout, st)
	}
	return err
}

// rollout runs the night's rollout of an app, with its summary.
func (j *job) rollout(ctx context.Context, o rollout.Options) (*rollout.Summary, error) {
	env, err := j.stageEnv("rollout", j.stages.rolloutSec, false)
	if err != nil {
		return nil, err
	}
	o.Progress = env.Stderr
	s, err := rollout.Execute(ctx, env, o)
	if s != nil {
		s.Print(env.Stdout)
	}
	return s, j.stages.rolloutSec.Error(err)
}

// export uploads the night's SFT set to --export.
func (j *job) export(ctx context.Context, dir string) error {
	env, err := j.stageEnv("sftpack export", nil, false)
	if err != nil {
		return err
	}
	return sft.Export(ctx, env, dir, j.o.Export)
}

// shards reads the manifest of the set from advantage's --out: a local
// folder or a bucket (s3://...), the counts the same either way.
func (j *job) shards(ctx context.Context, set string) *Shards {
	out := cmp.Or(j.o.Shards, advantage.DefaultOut(j.env.Common.DataDir))
	sh := &Shards{Set: set, Dir: strings.TrimRight(out, "/") + "/" + set}
	if dir := localDir(out); dir != "" {
		if blob.IsPath(out) {
			dir = out // a path is reported as given, as the SFT folder is
		}
		sh.Dir = filepath.Join(dir, set)
	}
	b, err := blob.OpenBucket(ctx, out, blob.Config{Logger: j.log})
	if err != nil {
		j.log.Warn("shard manifest not read", "set", set, "err", err)
		return sh
	}
	m, err := shard.ReadManifest(ctx, b, set)
	if err != nil {
		j.log.Warn("shard manifest not read", "set", set, "err", err)
		return sh
	}
	sh.Rows, sh.Trajectories, sh.Groups, sh.ZeroVariance, sh.Files = m.Counts.Rows, m.Counts.Trajectories, m.Counts.Groups, m.Counts.ZeroVarianceGroups, len(m.Files)
	sh.JudgeVersion = m.JudgeVersion
	return sh
}

// localDir returns the folder out names (a path or a file:// URL, as
// blob.ParseURL reads --out), or "" when out is a bucket.
func localDir(out string) string {
	loc, err := blob.ParseURL(out, "")
	if err != nil || loc.Scheme != "file" {
		return ""
	}
	return loc.Dir
}

// shardFiles lists the files of the set in its folder dir, as its manifest
// does.
func shardFiles(dir string) []string {
	var m shard.Manifest
	if service.ReadJSON(filepath.Join(dir, shard.ManifestName), &m) != nil {
		return nil
	}
	var out []string
	for _, f := range m.Files {
		out = append(out, filepath.Join(dir, filepath.FromSlash(f.Path)))
	}
	return out
}

// sft builds the SFT set of runs into its folder.
func (j *job) sft(ctx context.Context, runs []string) (*SFT, error) {
	dir := j.o.SFTOut
	if dir == "" {
		dir = filepath.Join(j.env.Common.DataDir, "sft", j.o.Night)
	}
	manifest := filepath.Join(dir, "manifest.json")
	before, _ := os.ReadFile(manifest)
	env, err := j.stageEnv("sftpack build", j.stages.sftSec, false)
	if err != nil {
		return nil, err
	}
	o := j.stages.sft
	o.Runs, o.Out = runs, dir
	if _, err := sft.Execute(ctx, env, o); err != nil {
		return nil, j.stages.sftSec.Error(err)
	}
	m, err := sft.ReadManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("sftpack manifest: %w", err)
	}
	after, _ := os.ReadFile(manifest)
	s := &SFT{Dir: dir, Runs: runs, Samples: map[string]int{}, Changed: !bytes.Equal(before, after),
		JudgeVersion: m.JudgeVersion, OtherJudgeVersions: m.OtherJudgeVersions}
	for split, info := range m.Splits {
		s.Samples[split] = info.Samples
	}
	for _, c := range m.Runs {
		s.Trajectories += c.Trajectories
	}
	return s, nil
}

// DefaultReportSince is how far back the night's report goes by default.
const DefaultReportSince = "720h"

// report writes the night's report page: every run of the night's apps
// named as nightly names them, started since ReportSince, with the
// shard sets and the SFT sets under the data folder (or the night's
// --shards and the parent of --sft-out).
func (j *job) report(ctx context.Context, b *bus.Bus, start time.Time) (string, error) {
	since, err := rollout.ParseSince(cmp.Or(j.o.ReportSince, DefaultReportSince), start)
	if err != nil {
		return "", err
	}
	store, err := j.env.Store(ctx)
	if err != nil {
		return "", err
	}
	src := runreport.Sources{Bus: b, Topology: j.env.Common.Topology(), Store: store,
		ShardsDir: cmp.Or(j.o.Shards, filepath.Join(j.env.Common.DataDir, "shards")),
		SFTDir:    filepath.Join(j.env.Common.DataDir, "sft")}
	if j.o.SFTOut != "" {
		src.SFTDir = filepath.Dir(j.o.SFTOut)
	}
	var runs []string
	for _, app := range j.o.Apps {
		runs = append(runs, RunName("*", app))
	}
	o, err := runreport.BuildRange(ctx, src, runreport.RangeConfig{Runs: runs, Since: since})
	if err != nil {
		return "", err
	}
	if err := o.LoadImages(ctx, store); err != nil {
		return "", err
	}
	page := filepath.Join(j.dir, "report.html")
	if err := o.WriteHTMLFile(page, time.Now()); err != nil {
		return "", err
	}
	j.log.Info("report written", "file", page, "runs", len(o.Runs))
	return page, nil
}

// Print writes the summary as text: the closing summary of a night.
func (s *Summary) Print(w io.Writer) {
	status := "done"
	if !s.OK {
		status = "FAILED"
	}
	fmt.Fprintf(w, "night %s: %s in %.0fs; this invocation: %d new episodes, %d new judgements, %d new shard rows\n",
		s.Night, status, s.WallSeconds, s.New.Episodes, s.New.Judgements, s.New.Rows)
	for _, a := range s.Apps {
		fmt.Fprintf(w, "\n%s (run %s)\n", traj.PrintName(a.App), traj.PrintName(a.Run))
		if a.Err != "" {
			fmt.Fprintf(w, "  FAILED: %s\n", a.Err)
		}
		if r := a.Rollout; r != nil {
			fmt.Fprintf(w, "  trajectories: %d (%s); success %.1f%%, Average@%d %.3f, Pass@%d %.3f\n",
				r.Episodes+r.Skipped, counts(r.Outcomes), 100*r.Rate, r.Samples, r.AverageAtK, r.Samples, r.PassAtK)
		}
		if f := a.Judge; f != nil {
			dec := map[string]int{}
			for d, n := range f.Decisions {
				dec[string(d)] = n
			}
			fmt.Fprintf(w, "  judgements: %d (%s); %.2f calls per trajectory; precision %s, recall %s against the evaluator (%d evaluated; %d undecided left out, %d of them passed)\n",
				f.Trajectories, counts(dec), f.CallsPerTrajectory, ratio(f.Precision), ratio(f.Recall), f.Evaluated, f.EvaluatedUndecided, f.UndecidedPassed)
		}
		if sh := a.Shards; sh != nil {
			zv := 0.0
			if sh.Groups > 0 {
				zv = float64(sh.ZeroVariance) / float64(sh.Groups)
			}
			identical := "n/a"
			if a.Rollout != nil {
				identical = fmt.Sprintf("%.1f%%", 100*a.Rollout.IdenticalPlansShare)
			}
			fmt.Fprintf(w, "  shard rows: %d in %d groups of %d trajectories; zero-variance share %.1f%%; identical-plan share %s (steps whose plans were all the same)\n",
				sh.Rows, sh.Groups, sh.Trajectories, 100*zv, identical)
			fmt.Fprintf(w, "  shards: %d files in %s (judge version %s)\n", sh.Files, sh.Dir, cmp.Or(sh.JudgeVersion, "none yet"))
		}
		for _, n := range a.Skipped {
			fmt.Fprintf(w, "  skipped: %s\n", n)
		}
	}
	if t := s.SFT; t != nil {
		change := "rebuilt"
		if !t.Changed {
			change = "unchanged"
		}
		fmt.Fprintf(w, "\nSFT set: %d samples (train %d, val %d) of %d trajectories, %s: %s\n",
			sum(t.Samples), t.Samples["train"], t.Samples["val"], t.Trajectories, change, t.Dir)
		if len(t.OtherJudgeVersions) > 0 {
			fmt.Fprintf(w, "  skipped: judgements of judge versions %s (the set takes judge version %s only; sftpack build --judge-version ID makes a set of another)\n",
				counts(t.OtherJudgeVersions), t.JudgeVersion)
		}
	}
	if s.Exported != "" {
		fmt.Fprintf(w, "exported to %s\n", s.Exported)
	}
	for _, e := range s.Errors {
		fmt.Fprintf(w, "ERROR: %s\n", e)
	}
	if s.Report != "" {
		fmt.Fprintf(w, "report: %s\n", s.Report)
	}
	if s.ReportError != "" {
		fmt.Fprintf(w, "WARNING: report not written: %s\n", s.ReportError)
	}
	fmt.Fprintf(w, "summary: %s\n", s.SummaryFile)
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k, n := range m {
		if n > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func ratio(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", *p)
}
