package judge

import (
	"context"
	"errors"
	"fmt"
	"github.com/codapipe/codapipe/internal/contract/scienceboard/appname"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/contract/imaging"
	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/codasim"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/judge/report"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Options are the judge command's settings as the command line gives
// them.
type Options struct {
	Judges []string // URL=MODEL, one per endpoint of the ensemble
	Apps   []string
	Runs   []string // --runs: only these runs' trajectories
	Policy Policy
	// DefaultStages makes Policy a Staged one with DefaultStages for the
	// number of judge models (known once the endpoints are: --sim serves
	// two).
	DefaultStages bool
	Limits        Limits
	Workers       int    // trajectories judged at once
	Prompts       string // folder with judge.tmpl; "" ours
	Durable       string
	// MaxDeliver bounds deliveries of one trajectory (see ServiceConfig).
	MaxDeliver int
	AckWait    time.Duration // see ServiceConfig
	// OutageBudget: see ServiceConfig; outageProbe is its OutageProbe
	// (tests).
	OutageBudget time.Duration
	outageProbe  time.Duration
	VoteTTL      time.Duration
	Summary      string // write the Stats as JSON here

	// Sim judges with the SIMULATOR's judge endpoint (codasim.Start: the
	// codasim process, models only); SimConfig is a JSON file with the
	// simulator's configuration, whose "models" part configures it;
	// TimeScale scales its latencies; Seed seeds it (0: the config's,
	// else 1).
	Sim       bool
	SimConfig string
	TimeScale float64
	Seed      int64

	// Progress logs the counts while draining, every --progress-every
	// (ServiceConfig.ProgressEvery); a long-running worker always does.
	Progress bool
}

// ErrNotConfigured is returned when no judge endpoint is configured and
// the simulator is not asked for.
var ErrNotConfigured = service.Usage(errors.New("no judge endpoint"))

// Execute runs the judge service as the command does: it starts the
// SIMULATOR's judge for --sim, opens the bus, the blob store and the vote
// cache through env, and serves until ctx ends or, with --drain, until
// nothing is left to judge.
func Execute(ctx context.Context, env *service.Env, o Options) (Stats, error) {
	log := env.Log
	if len(o.Judges) == 0 && !o.Sim {
		return Stats{}, fmt.Errorf("%w: give --judge URL=MODEL (repeat it for an ensemble), or --sim to judge with the built-in SIMULATOR's judge", ErrNotConfigured)
	}
	var err error
	if o.Apps, err = appname.Check("--app", o.Apps); err != nil {
		return Stats{}, service.Usage(err)
	}
	o.Runs = service.NameList(o.Runs)
	if err := service.CheckNames("--runs", traj.RunName, o.Runs...); err != nil {
		return Stats{}, service.Usage(err)
	}
	var specs []EndpointSpec
	for _, v := range o.Judges {
		s, err := ParseEndpoint(v)
		if err != nil {
			return Stats{}, service.Usage(err)
		}
		specs = append(specs, s)
	}
	prompt, err := LoadPrompt(o.Prompts)
	if err != nil {
		return Stats{}, service.Usage(err)
	}
	if o.Sim && len(specs) == 0 {
		r := codasim.Request{TimeScale: o.TimeScale, Config: o.SimConfig, Stderr: env.Stderr}
		if o.Seed != 0 {
			r.Seed = &o.Seed
		}
		world, err := codasim.Start(ctx, r)
		if err != nil {
			return Stats{}, err
		}
		defer world.Close()
		for _, j := range world.Judges {
			specs = append(specs, EndpointSpec{URL: j.URL, Model: j.Model})
		}
		log.Info("SIMULATOR started: a simulated judge stands in for a VLM judge (for checking a pipeline, not for training data)", "judge", world.Judges[0].URL, "models", len(specs), "process", world.Process)
	}
	if o.DefaultStages {
		o.Policy = o.Policy.WithStages(DefaultStages(len(specs)))
	}
	if err := o.Policy.Validate(); err != nil {
		return Stats{}, service.Usage(err)
	}
	if err := o.Policy.CheckModels(len(specs)); err != nil { // before opening anything
		return Stats{}, service.Usage(err)
	}
	store, err := env.Store(ctx)
	if err != nil {
		return Stats{}, err
	}
	b, err := env.Bus(ctx)
	if err != nil {
		return Stats{}, err
	}
	cache, err := OpenCache(ctx, b, env.Common.Topology(), o.VoteTTL)
	if err != nil {
		return Stats{}, err
	}
	j, err := New(Config{
		Endpoints: specs, Limits: o.Limits, Policy: o.Policy, Prompt: prompt,
		Store: store, Cache: cache, Metrics: NewMetrics(env.Metrics), Log: log,
	})
	if err != nil {
		return Stats{}, service.Usage(err)
	}
	cfg := ServiceConfig{
		Judge: j, Bus: b, Archive: store, Apps: o.Apps, Runs: o.Runs, Durable: o.Durable, Workers: o.Workers,
		MaxDeliver: o.MaxDeliver, AckWait: o.AckWait, Drain: env.Common.Drain, Log: log,
		OutageBudget: o.OutageBudget, OutageProbe: o.outageProbe, Registerer: env.Metrics,
	}
	runs, lerr := ledger.Open(ctx, b, env.Common.Topology())
	if lerr == nil {
		cfg.Ledger = runs // a drain compares what it received with it
	}
	if len(o.Runs) > 0 {
		if lerr != nil {
			return Stats{}, lerr
		}
		var err error
		if cfg.RunsStart, err = RunsStart(ctx, o.Runs, time.Now(), runs.Started); err != nil {
			log.Warn("judge: the runs' start is not known; a new consumer for them reads the whole stream", "err", err)
		}
	}
	if o.Progress || !env.Common.Drain {
		cfg.ProgressEvery = env.Common.ProgressEvery()
	}
	st, err := Serve(ctx, cfg)
	if err == nil && st.TooLarge > 0 {
		err = fmt.Errorf("judge: %d trajectories went to the dead letters because a judge answer was too large for the bus (%w): lower --max-answer-bytes, or raise the NATS server's max_payload", st.TooLarge, bus.ErrTooLarge)
	}
	if o.Summary != "" {
		if werr := service.WriteSummary(o.Summary, versioned{service.Version().String(), st}); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	return st, err
}

// versioned is the --summary document: the build, then the Stats.
type versioned struct {
	CodapipeVersion string `json:"codapipe_version"`
	Stats
}

// PrintStats writes what a judge run did in one paragraph.
func PrintStats(w io.Writer, st Stats) {
	n := st.Trajectories()
	judged := n - st.Decisions[traj.NotJudged]
	cpt := 0.0
	if judged > 0 {
		cpt = float64(st.Calls) / float64(judged)
	}
	fmt.Fprintf(w, "judge: %d trajectories: %d clean success, %d success with redundancy, %d failure, %d undecided, %d not judged (environment errors)\n",
		n, st.Decisions[traj.CleanSuccess], st.Decisions[traj.RedundantSuccess], st.Decisions[traj.Failure], st.Decisions[traj.Undecided], st.Decisions[traj.NotJudged])
	fmt.Fprintf(w, "judge: %d model calls (%.2f per judged trajectory), %d republished from the archive, %d dead-lettered, %d retried\n",
		st.Calls, cpt, st.Republished, st.DeadLettered, st.Retried)
	if len(st.Unusable) > 0 {
		fmt.Fprintf(w, "judge: votes without a verdict: %s; undecided by reason: %s\n", reasons(st.Unusable), reasons(st.Undecided))
		if st.Example != "" {
			fmt.Fprintf(w, "judge: e.g. %s\n", st.Example)
		}
	}
	if st.Outages > 0 {
		fmt.Fprintf(w, "judge: %d judge endpoint outages waited out or stopped at (%d interrupted judgings done again, no delivery spent, no vote unusable)\n", st.Outages, st.OutageHeld)
	}
	if st.OtherRuns > 0 {
		fmt.Fprintf(w, "judge: %d trajectories of other runs than --runs passed over (left to the judge consumers without --runs)\n", st.OtherRuns)
	}
	if len(st.Missing) > 0 {
		fmt.Fprintf(w, "judge: WARNING: the stream %s is missing %d messages (sequences %s), never judged: lost to store damage or removed; rollout --verify --run <run> runs them again\n",
			bus.StreamName(bus.Raw), st.Missing.Messages(), st.Missing)
	}
	for _, run := range slices.Sorted(maps.Keys(st.Unreceived)) {
		fmt.Fprintf(w, "judge: WARNING: run %s: %d trajectories its ledger lists as published were neither judged nor dead-lettered: lost from the stream (a damaged store?); rollout --verify --run %s runs them again\n",
			traj.PrintName(run), st.Unreceived[run], traj.PrintName(run))
	}
}

const usage = `judge — score trajectories with VLM judges and publish judgements.

Usage:
  judge --judge URL=MODEL [--judge URL=MODEL ...] [--app APP] [--runs NAME[,NAME]] [--stages STAGES]
        [--votes K --rule unanimous|majority] [--lowres WxH] [--drain] [--nats URL] [--store URL] [--sim]
  judge report [--run NAME] [--app APP] [--json]   precision/recall of the judgements in the archive

A durable consumer of the raw trajectories on NATS JetStream (coda.traj.>, or one app's with --app);
many judge processes with the same settings share the work. --runs judges only those runs'
trajectories, on a consumer of its own (judge_<version>[_<app>]_runs<hash>) that passes over the
others without taking them from any other judge consumer. Each trajectory is shown to the judge
models as its task, its keyframes (every step's screenshot and the final screen, at most
--max-frames) and the agent's answer. The votes are cast in stages (--stages): a stage of a
judge model's votes that does not count enough successes fails the trajectory there, and the
next stage is asked only when it passed (the default: one vote, the second model's two votes,
one low-resolution vote, then 2 of 4 votes; with one --judge, one vote, a low-resolution one,
then 3 of 4). --stages none casts K votes (--votes) over the endpoints round-robin, the first at
low resolution with --lowres (a failure there is final), combined by --rule. Votes stop as soon
as the rest cannot change the decision (a stage's votes are all cast unless it fails: they may
still see redundant steps). Every answered call is kept in a
vote cache first, so a redelivery never asks twice. The judged trajectory goes to the archive
in the blob store (judged/<run>/<app>/<id>.<version>.json) and to coda.judged.<app>.
Environment-error trajectories are recorded as not judged, without a model call. --sim judges
with the built-in SIMULATOR's judge. See docs/judge.md.`

// Command is the judge command with its report subcommand.
func Command() service.Command { return service.Stage[Options](command).Command() }

// ParseOptions reads judge's own flags (not the common ones) from args
// and the environment as the command does, for a job that runs judge in
// its own process (nightly): the Options Execute takes, and the secrets
// the flags carry.
func ParseOptions(args []string) (Options, *redact.Secrets, error) {
	return service.Stage[Options](command).Parse(args)
}

// command is the judge command and the resolution of its Options once
// its flags are parsed.
func command() (service.Command, func() (Options, error)) {
	o := Options{Policy: CODAPolicy()}
	var rule, temps, topps, lowres, stages string
	var flags *service.Flags
	resolve := func() (Options, error) {
		var err error
		o.Policy.Rule = Rule(strings.TrimSpace(rule))
		if err := o.setStages(flags, stages); err != nil {
			return o, service.Usage(err)
		}
		if o.Policy.Temperatures, err = ParseFloats(temps); err != nil {
			return o, service.Usage(fmt.Errorf("--temperature %w", err))
		}
		if o.Policy.TopPs, err = ParseFloats(topps); err != nil {
			return o, service.Usage(fmt.Errorf("--top-p %w", err))
		}
		o.Policy.LowRes = Size{}
		switch {
		case strings.TrimSpace(lowres) != "":
			if o.Policy.LowRes, err = ParseSize(lowres); err != nil {
				return o, service.Usage(fmt.Errorf("--lowres: %w", err))
			}
		case o.Policy.Rule == Staged && !flags.Given("lowres"):
			o.Policy.LowRes = DefaultLowRes
		}
		o.Progress = true
		return o, nil
	}
	return service.Command{
		Name: "judge", Summary: "score trajectories with VLM judges (voting, multi-resolution, ensembles) and publish judgements",
		Usage: usage, Common: true, Consumer: true,
		Flags: func(fs *service.Flags) {
			flags = fs
			fs.Group(service.GroupEndpoints)
			fs.Strings(&o.Judges, "judge", "CODAPIPE_JUDGE", "judge endpoint as URL=MODEL (OpenAI-compatible base URL and model name); several make an ensemble")
			fs.Secret(&o.Limits.APIKey, "judge-key", "CODAPIPE_JUDGE_KEY", "API key sent as a bearer token to the judge endpoints (an endpoint with user:password@ in its URL gets basic authentication instead)")
			fs.Int(&o.Limits.Concurrency, "endpoint-concurrency", "CODAPIPE_JUDGE_ENDPOINT_CONCURRENCY", 8, "most calls in flight to one endpoint")
			fs.Float64(&o.Limits.Rate, "rate", "CODAPIPE_JUDGE_RATE", 0, "most requests per second to one endpoint (token bucket; 0: unlimited)")
			fs.Duration(&o.Limits.AttemptTimeout, "attempt-timeout", "CODAPIPE_JUDGE_ATTEMPT_TIMEOUT", 2*time.Minute, "deadline of one HTTP attempt of a judge call")
			fs.Int(&o.Limits.Attempts, "attempts", "CODAPIPE_JUDGE_ATTEMPTS", 4, "attempts of one judge call (429, 5xx and transport errors are retried with backoff and jitter)")
			fs.Int64(&o.Limits.MaxAnswerBytes, "max-answer-bytes", "CODAPIPE_JUDGE_MAX_ANSWER_BYTES", model.DefaultMaxAnswerBytes, "the longest answer body read from a judge endpoint; a longer one fails the call, unretried")
			fs.Int64(&o.Limits.MaxImagePixels, "max-image-pixels", "CODAPIPE_MAX_IMAGE_PIXELS", imaging.DefaultMaxPixels, "the most pixels of one screenshot, read from its header before it is decoded; a trajectory with a larger one goes to the dead letters")
			fs.Int64(&o.Limits.MaxRequestPixels, "max-request-pixels", "CODAPIPE_JUDGE_MAX_REQUEST_PIXELS", DefaultMaxRequestPixels, "the most pixels of the frames of one judge call together, as sent; a trajectory beyond it goes to the dead letters")
			fs.Duration(&o.Limits.Backoff, "backoff", "CODAPIPE_JUDGE_BACKOFF", time.Second, "first retry wait of a judge call, doubling per attempt")
			fs.String(&o.Prompts, "prompts", "CODAPIPE_PROMPTS", "", "the judge's prompt set: a shipped one by name ("+strings.Join(PromptSets, ", ")+"; default coda) or a folder with a judge.tmpl and, when its answers are not coda's result dict, an answer.json saying how to read them (docs/judge.md)")
			fs.Group("Voting")
			fs.String(&stages, "stages", "CODAPIPE_JUDGE_STAGES", "", "the votes as stages [NEED/]VOTES[@MODEL][:low], comma-separated: each stage's VOTES votes of judge model MODEL (the n-th --judge, default 1) must count NEED successes (default all) or the trajectory fails there; :low votes see --lowres frames (default "+FormatStages(DefaultStages(1))+" with one judge model, "+FormatStages(DefaultStages(2))+" with two or more; none, or --votes or --rule given: a voting rule instead)")
			fs.Int(&o.Policy.Votes, "votes", "CODAPIPE_JUDGE_VOTES", 4, "with --stages none: K votes per trajectory (the low-resolution one included), over the endpoints round-robin")
			fs.String(&rule, "rule", "CODAPIPE_JUDGE_RULE", string(Unanimous), "with --stages none: unanimous (success only if every vote says so) or majority")
			fs.String(&lowres, "lowres", "CODAPIPE_JUDGE_LOWRES", "", "WxH: the size low-resolution votes' frames are scaled to fit (default "+DefaultLowRes.String()+" for --stages; with --stages none: the first vote is low-resolution and a failure there is final, empty: off)")
			fs.Int(&o.Policy.MaxFrames, "max-frames", "CODAPIPE_JUDGE_MAX_FRAMES", DefaultMaxFrames, "most screenshots per call; longer trajectories are subsampled evenly, first and final screen kept")
			fs.Int(&o.Policy.MalformedRetries, "malformed-retries", "CODAPIPE_JUDGE_MALFORMED_RETRIES", 2, "times a vote whose answer holds no verdict in the prompt set's answer format is asked again")
			fs.Int(&o.Policy.TruncatedMaxTokens, "truncated-max-tokens", "CODAPIPE_JUDGE_TRUNCATED_MAX_TOKENS", 0, "max_tokens of the one call a vote makes again when its answer was cut at --max-tokens (finish_reason length); cut again, the vote is unusable (0: twice --max-tokens)")
			fs.Bool(&o.Policy.BatchVotes, "batch-votes", "CODAPIPE_JUDGE_BATCH_VOTES", false, "ask the votes after the first in one call per stage (or run of votes of one endpoint) with n answers (the server prefills the prompt once; one that ignores n gets further calls); decisions as without it (default true for --stages, false for --stages none)")
			fs.Bool(&o.Policy.NoEarlyExit, "no-early-exit", "CODAPIPE_JUDGE_NO_EARLY_EXIT", false, "cast every vote even when the decision is settled (to measure early exit)")
			fs.Group(service.GroupSampling)
			fs.String(&temps, "temperature", "CODAPIPE_JUDGE_TEMPERATURE", "1", "sampling temperature of the votes in [0,2] (0 is greedy; sent as it is), one value or one per vote separated by commas")
			fs.String(&topps, "top-p", "CODAPIPE_JUDGE_TOP_P", "0.6", "top_p of the votes in (0,1], one value or one per vote separated by commas")
			fs.Int(&o.Policy.Sampling.TopK, "top-k", "CODAPIPE_JUDGE_TOP_K", -1, "top_k of the votes (-1: off; 1 is greedy); sent with every call so the server's generation defaults never decide it")
			fs.Float64(&o.Policy.Sampling.MinP, "min-p", "CODAPIPE_JUDGE_MIN_P", 0, "min_p of the votes in [0,1] (0: off)")
			fs.Float64(&o.Policy.Sampling.RepetitionPenalty, "repetition-penalty", "CODAPIPE_JUDGE_REPETITION_PENALTY", 1, "repetition_penalty of the votes, > 0 (1: off)")
			fs.Float64(&o.Policy.Sampling.PresencePenalty, "presence-penalty", "CODAPIPE_JUDGE_PRESENCE_PENALTY", 0, "presence_penalty of the votes in [-2,2] (0: off)")
			fs.Float64(&o.Policy.Sampling.FrequencyPenalty, "frequency-penalty", "CODAPIPE_JUDGE_FREQUENCY_PENALTY", 0, "frequency_penalty of the votes in [-2,2] (0: off)")
			fs.Strings(&o.Policy.Sampling.Stop, "stop", "CODAPIPE_JUDGE_STOP", "stop string of the votes (default none)")
			fs.Int(&o.Policy.Sampling.MaxTokens, "max-tokens", "CODAPIPE_JUDGE_MAX_TOKENS", 4096, "most tokens of one judge answer (> 0; sent with every call)")
			fs.Group(service.GroupRun)
			fs.List(&o.Apps, "app", "CODAPIPE_APP", "only judge these applications' trajectories (default all)")
			fs.List(&o.Runs, "runs", "CODAPIPE_JUDGE_RUNS", "only judge these runs' trajectories (rollout --run names), on a consumer of their own that leaves the other runs' to the other judge consumers (default all)")
			fs.Int(&o.Workers, "concurrency", "CODAPIPE_JUDGE_CONCURRENCY", 8, "trajectories judged at once by this process")
			fs.String(&o.Durable, "durable", "CODAPIPE_JUDGE_DURABLE", "", "consumer name shared by the judge processes (default judge_<version>[_<app>][_runs<hash>]: a new judge version judges the stream again; with --runs, _runs<hash> is appended to a name given here too)")
			fs.Int(&o.MaxDeliver, "max-deliver", "CODAPIPE_JUDGE_MAX_DELIVER", 10, "deliveries of one trajectory; a call that fails while its endpoint answers waits and retries until the last delivery, which judges with the votes it gets (an endpoint outage spends none: --outage-budget)")
			service.OutageBudgetFlag(fs, &o.OutageBudget, model.DefaultOutageBudget, "the trajectories left are judged by the next judge on the stream")
			fs.Duration(&o.AckWait, "ack-wait", "CODAPIPE_JUDGE_ACK_WAIT", time.Minute, "a trajectory whose judge process died is judged again this long after its last heartbeat")
			fs.Duration(&o.VoteTTL, "vote-ttl", "CODAPIPE_JUDGE_VOTE_TTL", DefaultVoteTTL, "how long the vote cache keeps an answered call (when the bucket is created)")
			fs.Group(service.GroupSim)
			fs.Bool(&o.Sim, "sim", "CODAPIPE_SIM", false, "judge with the SIMULATOR's judge endpoint (codasim, started for this run; for checking a pipeline, not for training data)")
			codasim.Flags(fs, &o.SimConfig, &o.TimeScale, nil, "with --sim: ")
			fs.Int64(&o.Seed, "seed", "CODAPIPE_SEED", 0, "with --sim: seed of the simulator (0: the --sim-config's seed, else 1)")
			fs.Group(service.GroupOutput)
			fs.String(&o.Summary, "summary", "CODAPIPE_SUMMARY", "", "write the run's counts as JSON to this file")
		},
		Run: func(ctx context.Context, env *service.Env) error {
			o, err := resolve()
			if err != nil {
				return err
			}
			st, err := Execute(ctx, env, o)
			err = service.WorkerStopped(ctx, env.Common.Drain, err)
			if err == nil || st.Trajectories() > 0 {
				PrintStats(env.Stdout, st)
			}
			return err
		},
		Sub: []service.Command{reportCommand()},
	}, resolve
}

// setStages sets the policy's stages from --stages (v) and whether
// --votes, --rule and --batch-votes were given: the default stages unless
// --votes or --rule asks for a voting rule or v is "none".
func (o *Options) setStages(fs *service.Flags, v string) error {
	voting := fs.Given("votes") || fs.Given("rule")
	v = strings.TrimSpace(v)
	o.DefaultStages, o.Policy.Stages = false, nil // a command may run more than once
	if o.Policy.Rule == Staged {
		return fmt.Errorf("--rule %s: want unanimous or majority (stages are set by --stages)", Staged)
	}
	switch {
	case v == "none" || (v == "" && voting):
		return nil
	case voting:
		return fmt.Errorf("--votes and --rule are for --stages none; --stages %s counts its own votes", v)
	case v == "":
		o.DefaultStages = true
		o.Policy = o.Policy.WithStages(DefaultStages(1)) // until the endpoints are known
	default:
		st, err := ParseStages(v)
		if err != nil {
			return fmt.Errorf("--stages: %w", err)
		}
		o.Policy = o.Policy.WithStages(st)
	}
	if !fs.Given("batch-votes") {
		o.Policy.BatchVotes = true
	}
	return nil
}

func reportCommand() service.Command {
	var cfg report.Config
	var asJSON bool
	return service.Command{
		Name: "judge report", Summary: "precision, recall and decisions of the judgements in the archive",
		Usage: `Usage: judge report [--run NAME] [--app APP] [--judge-version ID] [--json] [--store URL]

Reads the judged archive in the blob store and prints, per app and overall: decisions (clean
success, success with redundancy, failure, undecided, not judged), model calls per trajectory,
judging latency, and the precision / recall / F1 of "clean success" against the task's own
evaluator on the trajectories it could check. One judge version at a time: by default the one
judged last.`,
		Common: true,
		Flags: func(fs *service.Flags) {
			fs.String(&cfg.Run, "run", "CODAPIPE_RUN", "", "only this run")
			fs.String(&cfg.App, "app", "", "", "only this application")
			fs.String(&cfg.Version, "judge-version", "", "", "judge version id to report on (default: the one judged last)")
			fs.Bool(&asJSON, "json", "", false, "print one JSON document instead of a table")
		},
		Run: func(ctx context.Context, env *service.Env) error {
			if cfg.Run != "" {
				if err := service.CheckNames("--run", traj.RunName, cfg.Run); err != nil {
					return service.Usage(err)
				}
			}
			if cfg.App != "" {
				apps, err := appname.Check("--app", []string{cfg.App})
				if err != nil {
					return service.Usage(err)
				}
				cfg.App = apps[0]
			}
			store, err := env.Store(ctx)
			if err != nil {
				return err
			}
			r, err := report.Build(ctx, store, cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return r.WriteJSON(env.Stdout)
			}
			r.Print(env.Stdout)
			return nil
		},
	}
}

// Main runs the judge command with its arguments (without the program
// name) and returns the process exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return service.MainContext(ctx, Command(), args, stdout, stderr)
}
