// Package chaos checks that a pipeline run lost and duplicated nothing.
// Account reads what the run left — the streams (raw trajectories, judged
// trajectories, dead letters, shard manifests), the judged archive in the
// blob store, the shard sets' files and the SFT dataset — and follows every
// planned episode through the stages: one trajectory (or an accounted
// environment error or dead letter), one judgement per judge version, its
// labelled steps' rows exactly once across the shard files, and a clean
// success's steps exactly once in the SFT set. Report.Print prints the
// counts as a table. The chaos test (TestAcceptChaos, `make chaos`) runs the
// pipeline as separate processes under kills and outages and then calls it;
// it serves any other run as well.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/stage/sft"
	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
	"github.com/nats-io/nats.go/jetstream"
)

// The rollout's trajectory headers (internal/stage/rollout: HeaderRun, ...),
// repeated here so that the check does not link the rollout stage.
const (
	headerRun     = "Coda-Run"
	headerTask    = "Coda-Task"
	headerSample  = "Coda-Sample"
	headerOutcome = "Coda-Outcome"
)

// Run is one planned rollout run: every task of Tasks, Samples times.
type Run struct {
	Name    string
	App     string
	Tasks   []string // task ids
	Samples int
}

// Config says what a run planned and where its outputs are.
type Config struct {
	// Bus reaches the streams; it needs the claim store to read bodies
	// that travelled by claim check.
	Bus *bus.Bus
	// Archive is the blob store's bucket holding the judged archive
	// (judged/...).
	Archive blob.Bucket
	// Runs are the planned runs.
	Runs []Run
	// ShardSets are the local folders of the shard sets (each with its
	// manifest.json) that should hold the rows of the runs' clean
	// successes (step mode, clean labels).
	ShardSets []string
	// SFTDir is the SFT dataset folder built from the runs ("" skips that
	// stage).
	SFTDir string
	// MaxIDs bounds the ids listed per kind of problem (default 20).
	MaxIDs int
}

// Stage is one stage's counts.
type Stage struct {
	Name string
	// Planned items; Present of them are there exactly once or more;
	// Accounted are missing for a recorded reason (dead letter, environment
	// error, a rule of the stage); Lost are missing without one;
	// Duplicated counts the extra copies (and items nobody planned).
	Planned, Present, Accounted, Lost, Duplicated int
	// Note explains the stage's unit and what Accounted is.
	Note string
}

// DeadLetter is one message of the dead-letter stream.
type DeadLetter struct {
	Subject  string // where it went (coda.dlq.<kind>.<app>)
	Consumer string // the consumer that gave up on it ("" rollout's invalid trajectories)
	MsgID    string
	Reason   string
}

// Report is what Account found.
type Report struct {
	Stages []Stage
	// DeadLetters are every dead letter, in stream order.
	DeadLetters []DeadLetter
	// Versions are the judge versions seen.
	Versions []string
	// Manifests counts the shard manifests published on the manifest
	// stream, by set.
	Manifests map[string]int
	// Problems name the lost and duplicated items (at most MaxIDs per
	// kind), and anything the check could not read.
	Problems []string
	// Malformed model output met, from the judged trajectories
	// (environment errors excluded): the planner's plans and those that do
	// not parse as UI-TARS text, the candidates and those left without an
	// action (the executor's answer did not parse either).
	Plans, MalformedPlans, Candidates, Unparsed int
	// Extra rows printed under the table (the chaos test's kill counts).
	Extra [][2]string
}

// OK reports whether nothing was lost or duplicated at any stage.
func (r *Report) OK() bool {
	for _, s := range r.Stages {
		if s.Lost > 0 || s.Duplicated > 0 {
			return false
		}
	}
	return true
}

// Stage returns the stage named name (nil: none).
func (r *Report) Stage(name string) *Stage {
	for i := range r.Stages {
		if r.Stages[i].Name == name {
			return &r.Stages[i]
		}
	}
	return nil
}

// Print writes the report as a table: one line per stage, the dead letters
// by reason, the extra rows and the problems.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "%-14s %8s %8s %9s %6s %10s  %s\n", "stage", "planned", "present", "accounted", "lost", "duplicated", "unit / accounted as")
	for _, s := range r.Stages {
		fmt.Fprintf(w, "%-14s %8d %8d %9d %6d %10d  %s\n", s.Name, s.Planned, s.Present, s.Accounted, s.Lost, s.Duplicated, s.Note)
	}
	byReason := map[string]int{}
	for _, d := range r.DeadLetters {
		byReason[d.Consumer+": "+shorten(d.Reason, 100)]++
	}
	fmt.Fprintf(w, "dead letters: %d\n", len(r.DeadLetters))
	for _, k := range sortedKeys(byReason) {
		fmt.Fprintf(w, "  %5d  %s\n", byReason[k], k)
	}
	fmt.Fprintf(w, "judge versions: %s\n", strings.Join(r.Versions, ", "))
	fmt.Fprintf(w, "malformed planner answers: %d of %d plans (%.1f%%); candidates without an action: %d of %d (%.1f%%)\n",
		r.MalformedPlans, r.Plans, pct(r.MalformedPlans, r.Plans), r.Unparsed, r.Candidates, pct(r.Unparsed, r.Candidates))
	for _, set := range sortedKeys(r.Manifests) {
		fmt.Fprintf(w, "shard manifests published for set %s: %d\n", set, r.Manifests[set])
	}
	for _, e := range r.Extra {
		fmt.Fprintf(w, "%-28s %s\n", e[0]+":", e[1])
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "PROBLEM: %s\n", p)
	}
}

// account is one Account call's state.
type account struct {
	cfg Config
	r   *Report
	// trajectories by id, from the raw stream.
	trajs map[string]*trajInfo
	// judged by trajectory id and version: the judged messages' sequences.
	judged map[string]map[string][]uint64
	// deadByID: dead letters by the message id they carry.
	deadByID map[string][]DeadLetter
	// deadEpisodes: episodes whose trajectory rollout dead-lettered as
	// invalid (its dead letter keeps the trajectory headers).
	deadEpisodes map[episodeKey]bool
}

// timeZero makes Scan read a stream from its start.
var timeZero time.Time

type trajInfo struct {
	run, task string
	sample    int
	outcome   string
	seqs      []uint64
}

// Account reads the outputs of cfg.Runs and counts every stage. Its error
// is for what it could not read at all (a stream, the archive listing);
// damaged items are Problems. It only reads, so a transient NATS error
// (a leader election, a node catching up) makes it start again, for up to
// two minutes (bus.RetryTransient).
func Account(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.MaxIDs <= 0 {
		cfg.MaxIDs = 20
	}
	var rep *Report
	err := bus.RetryTransient(ctx, 2*time.Minute, func(ctx context.Context) error {
		var err error
		rep, err = account1(ctx, cfg)
		return err
	}, nil)
	return rep, err
}

// account1 is one pass of Account.
func account1(ctx context.Context, cfg Config) (*Report, error) {
	a := &account{cfg: cfg, r: &Report{Manifests: map[string]int{}},
		trajs: map[string]*trajInfo{}, judged: map[string]map[string][]uint64{}, deadByID: map[string][]DeadLetter{},
		deadEpisodes: map[episodeKey]bool{}}
	if err := a.deadLetters(ctx); err != nil {
		return nil, err
	}
	if err := a.trajectories(ctx); err != nil {
		return nil, err
	}
	judgedDocs, err := a.judgements(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.archive(ctx); err != nil {
		return nil, err
	}
	if err := a.manifests(ctx); err != nil {
		return nil, err
	}
	a.shards(ctx, judgedDocs)
	if cfg.SFTDir != "" {
		a.sft(judgedDocs)
	}
	return a.r, nil
}

func (a *account) problem(format string, args ...any) {
	a.r.Problems = append(a.r.Problems, fmt.Sprintf(format, args...))
}

// idProblem is one kind of problem a stage found: the message, a format
// taking the number of items (%d) and their list (%s), and the items.
type idProblem struct {
	format string
	ids    []string
}

// addStage appends stage s to the report, and the problems that name any
// item to its problems, in order.
func (a *account) addStage(s Stage, problems ...idProblem) {
	for _, p := range problems {
		if len(p.ids) > 0 {
			a.problem(p.format, len(p.ids), a.list(p.ids))
		}
	}
	a.r.Stages = append(a.r.Stages, s)
}

// list names at most MaxIDs items.
func (a *account) list(ids []string) string {
	sort.Strings(ids)
	if len(ids) > a.cfg.MaxIDs {
		return strings.Join(ids[:a.cfg.MaxIDs], " ") + fmt.Sprintf(" … (%d more)", len(ids)-a.cfg.MaxIDs)
	}
	return strings.Join(ids, " ")
}

func (a *account) deadLetters(ctx context.Context) error {
	return a.cfg.Bus.Scan(ctx, bus.Dead, bus.AllSubjects(bus.Dead), timeZero, func(m bus.Stored) error {
		d := DeadLetter{
			Subject:  m.Header.Get(bus.HeaderDeadSubject),
			Consumer: m.Header.Get(bus.HeaderDeadConsumer),
			MsgID:    m.Header.Get(bus.HeaderDeadMsgID),
			Reason:   m.Header.Get(bus.HeaderDeadReason),
		}
		if d.MsgID == "" { // rollout's invalid trajectory: its own id
			d.MsgID = m.Header.Get(jetstream.MsgIDHeader)
		}
		if d.Consumer == "" {
			d.Consumer = "rollout (invalid trajectory)"
			if k, err := strconv.Atoi(m.Header.Get(headerSample)); err == nil {
				a.deadEpisodes[episodeKey{m.Header.Get(headerRun), m.Header.Get(headerTask), k}] = true
			}
		}
		a.r.DeadLetters = append(a.r.DeadLetters, d)
		a.deadByID[d.MsgID] = append(a.deadByID[d.MsgID], d)
		return nil
	})
}

type episodeKey struct {
	run, task string
	sample    int
}

// trajectories: every planned episode has exactly one trajectory.
func (a *account) trajectories(ctx context.Context) error {
	planned := map[episodeKey]bool{}
	apps := map[string]bool{}
	for _, r := range a.cfg.Runs {
		apps[r.App] = true
		for _, t := range r.Tasks {
			for k := range r.Samples {
				planned[episodeKey{r.Name, t, k}] = true
			}
		}
	}
	runs := a.runNames()
	byEpisode := map[episodeKey][]string{}
	for _, app := range sortedKeys(apps) {
		err := a.cfg.Bus.Scan(ctx, bus.Raw, bus.Subject(bus.Raw, app), timeZero, func(m bus.Stored) error {
			id := m.Header.Get(jetstream.MsgIDHeader)
			k, err := strconv.Atoi(m.Header.Get(headerSample))
			if err != nil {
				a.problem("raw trajectory seq %d (%s): sample header %q", m.Seq, id, m.Header.Get(headerSample))
			}
			ek := episodeKey{m.Header.Get(headerRun), m.Header.Get(headerTask), k}
			if !runs[ek.run] {
				return nil // another run's trajectory
			}
			ti := a.trajs[id]
			if ti == nil {
				ti = &trajInfo{run: ek.run, task: ek.task, sample: ek.sample, outcome: m.Header.Get(headerOutcome)}
				a.trajs[id] = ti
				byEpisode[ek] = append(byEpisode[ek], id)
			}
			ti.seqs = append(ti.seqs, m.Seq)
			return nil
		})
		if err != nil {
			return err
		}
	}
	s := Stage{Name: "trajectories", Planned: len(planned), Note: "episodes (task × sample); accounted: env_error trajectories, dead-lettered invalid ones"}
	var lost, dup, extra []string
	for ek := range planned {
		ids := byEpisode[ek]
		switch {
		case len(ids) == 0:
			if a.deadForEpisode(ek) {
				s.Accounted++
				continue
			}
			s.Lost++
			lost = append(lost, fmt.Sprintf("%s/%s#%d", ek.run, ek.task, ek.sample))
			continue
		case len(ids) > 1:
			s.Duplicated += len(ids) - 1
			dup = append(dup, fmt.Sprintf("%s/%s#%d=%s", ek.run, ek.task, ek.sample, strings.Join(ids, ",")))
		}
		ti := a.trajs[ids[0]]
		if len(ti.seqs) > 1 {
			s.Duplicated += len(ti.seqs) - 1
			dup = append(dup, fmt.Sprintf("%s stored %d times", ids[0], len(ti.seqs)))
		}
		if ti.outcome == string(traj.OutcomeEnvError) {
			s.Accounted++
		} else {
			s.Present++
		}
	}
	for ek, ids := range byEpisode {
		if !planned[ek] {
			s.Duplicated += len(ids)
			extra = append(extra, fmt.Sprintf("%s/%s#%d", ek.run, ek.task, ek.sample))
		}
	}
	a.addStage(s,
		idProblem{"trajectories lost (%d): %s", lost},
		idProblem{"trajectories duplicated (%d episodes): %s", dup},
		idProblem{"trajectories of episodes nobody planned (%d): %s", extra})
	return nil
}

// runNames is the set of the planned runs' names.
func (a *account) runNames() map[string]bool {
	runs := map[string]bool{}
	for _, r := range a.cfg.Runs {
		runs[r.Name] = true
	}
	return runs
}

// deadForEpisode: rollout dead-lettered the episode's trajectory as
// invalid.
func (a *account) deadForEpisode(ek episodeKey) bool { return a.deadEpisodes[ek] }

// ours reports whether trajectory id belongs to the planned runs.
func (a *account) ours(id string) bool { _, ok := a.trajs[id]; return ok }

// judgements: every trajectory but the environment errors has exactly one
// judgement per judge version. It returns the judged documents by
// trajectory id (the latest version's when there are several).
func (a *account) judgements(ctx context.Context) (map[string]*traj.Judged, error) {
	err := a.cfg.Bus.Scan(ctx, bus.Judged, bus.AllSubjects(bus.Judged), timeZero, func(m bus.Stored) error {
		mid := m.Header.Get(jetstream.MsgIDHeader)
		id, ver, ok := strings.Cut(mid, ".")
		if !ok {
			a.problem("judged message seq %d has message id %q, not <trajectory>.<version>", m.Seq, mid)
			return nil
		}
		if !a.ours(id) {
			return nil
		}
		if a.judged[id] == nil {
			a.judged[id] = map[string][]uint64{}
		}
		a.judged[id][ver] = append(a.judged[id][ver], m.Seq)
		return nil
	})
	if err != nil {
		return nil, err
	}
	versions := map[string]bool{}
	for _, byVer := range a.judged {
		for v := range byVer {
			versions[v] = true
		}
	}
	a.r.Versions = sortedKeys(versions)
	s := Stage{Name: "judgements", Note: "trajectory × judge version (env errors excluded); accounted: dead-lettered by the judge"}
	docs := map[string]*traj.Judged{}
	var lost, dup, unreadable []string
	for _, id := range sortedKeys(a.trajs) {
		ti := a.trajs[id]
		envErr := ti.outcome == string(traj.OutcomeEnvError)
		for _, v := range a.r.Versions {
			seqs := a.judged[id][v]
			if envErr {
				if len(seqs) > 1 {
					s.Duplicated += len(seqs) - 1
					dup = append(dup, id+"."+v)
				}
				continue
			}
			s.Planned++
			switch {
			case len(seqs) == 0:
				if a.deadFrom(id, "judge") {
					s.Accounted++
				} else {
					s.Lost++
					lost = append(lost, id+"."+v)
				}
				continue
			case len(seqs) > 1:
				s.Duplicated += len(seqs) - 1
				dup = append(dup, id+"."+v)
			}
			s.Present++
			// A judgement that cannot be read is as good as lost: the
			// stages after it cannot have used it.
			body, _, err := a.cfg.Bus.Get(ctx, bus.Judged, seqs[0])
			var jd *traj.Judged
			if err == nil {
				jd, err = traj.DecodeJudged(body)
			}
			if err != nil {
				unreadable = append(unreadable, fmt.Sprintf("%s.%s (%v)", id, v, err))
				s.Present--
				s.Lost++
				continue
			}
			for _, st := range jd.Trajectory.Steps {
				for _, c := range st.Candidates {
					a.r.Candidates++
					a.r.Plans++
					if c.Action == nil {
						a.r.Unparsed++
					}
					if _, err := uitars.Parse(c.Plan, uitars.DefaultOptions()); err != nil {
						a.r.MalformedPlans++
					}
				}
			}
			if prev := docs[id]; prev == nil || jd.Judgement.JudgedAt.After(prev.Judgement.JudgedAt) {
				docs[id] = jd
			}
		}
	}
	if len(a.r.Versions) == 0 {
		// No judgement at all: every judgeable trajectory is lost.
		for id, ti := range a.trajs {
			if ti.outcome != string(traj.OutcomeEnvError) {
				s.Planned++
				s.Lost++
				lost = append(lost, id)
			}
		}
	}
	a.addStage(s,
		idProblem{"judgements lost (%d): %s", lost},
		idProblem{"judgements duplicated (%d): %s", dup},
		idProblem{"judged messages unreadable (%d): %s", unreadable})
	return docs, nil
}

// deadFrom: a dead letter of a consumer whose name starts with prefix
// carries message id id.
func (a *account) deadFrom(id, prefix string) bool {
	for _, d := range a.deadByID[id] {
		if strings.HasPrefix(d.Consumer, prefix) {
			return true
		}
	}
	return false
}

// archive: every judged message has its archive record, and no record is
// there without one.
func (a *account) archive(ctx context.Context) error {
	s := Stage{Name: "archive", Note: "judged trajectory × version with a record in the blob store"}
	seen := map[string]bool{}
	var extra, lost []string
	for run := range a.runNames() {
		for info, err := range a.cfg.Archive.List(ctx, archive.Prefix+bus.KeyToken(run)+"/") {
			if err != nil {
				return fmt.Errorf("chaos: list the archive of %s: %w", run, err)
			}
			n, ok := archive.Parse(info.Key)
			if !ok {
				a.problem("archive key %q is not an archive name", info.Key)
				continue
			}
			k := n.ID + "." + n.Version
			seen[k] = true
			if a.judged[n.ID][n.Version] == nil {
				extra = append(extra, k)
			}
		}
	}
	for id, byVer := range a.judged {
		for v := range byVer {
			s.Planned++
			if seen[id+"."+v] {
				s.Present++
			} else {
				s.Lost++
				lost = append(lost, id+"."+v)
			}
		}
	}
	// A record without its message: the judge archived and died before
	// publishing, and nothing judged it again.
	s.Lost += len(extra)
	a.addStage(s,
		idProblem{"archive records missing for judged messages (%d): %s", lost},
		idProblem{"archive records without a judged message (%d): %s", extra})
	return nil
}

// manifests counts the shard manifests published per set.
func (a *account) manifests(ctx context.Context) error {
	return a.cfg.Bus.Scan(ctx, bus.Manifest, bus.AllSubjects(bus.Manifest), timeZero, func(m bus.Stored) error {
		a.r.Manifests[manifestSet(m)]++
		return nil
	})
}

func manifestSet(m bus.Stored) string {
	id := m.Header.Get(jetstream.MsgIDHeader)
	if i := strings.LastIndexByte(id, '.'); i > 0 {
		return id[:i] // advantage's "<set>.<commits>"
	}
	return id
}

type stepKey struct {
	id   string
	step int
}

// shards: every labelled step of a judged trajectory has its group's rows
// exactly once across the shard files of the sets.
func (a *account) shards(ctx context.Context, docs map[string]*traj.Judged) {
	s := Stage{Name: "shard rows", Note: "labelled steps (clean successes' steps) with their group's rows; duplicated: rows"}
	type group struct {
		size  int
		cands map[int]int
	}
	groups := map[stepKey]*group{}
	var unread []string
	dupRows := 0
	var dup []string
	for _, dir := range a.cfg.ShardSets {
		var m shard.Manifest
		body, err := os.ReadFile(filepath.Join(dir, shard.ManifestName))
		if err == nil {
			err = json.Unmarshal(body, &m)
		}
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				unread = append(unread, dir+" (no manifest)")
			} else {
				unread = append(unread, fmt.Sprintf("%s (%v)", dir, err))
			}
			continue
		}
		for _, f := range m.Files {
			format := f.Format
			if format == "" {
				format = m.Format
			}
			err := shard.ReadFile(ctx, filepath.Join(dir, filepath.FromSlash(f.Path)), format, func(row *shard.Row) error {
				k := stepKey{row.TrajectoryID, int(row.Step)}
				g := groups[k]
				if g == nil {
					g = &group{size: int(row.GroupSize), cands: map[int]int{}}
					groups[k] = g
				}
				g.cands[int(row.Candidate)]++
				if g.cands[int(row.Candidate)] > 1 {
					dupRows++
					dup = append(dup, fmt.Sprintf("%s/%d/c%d", row.TrajectoryID, row.Step, row.Candidate))
				}
				return nil
			})
			if err != nil {
				unread = append(unread, fmt.Sprintf("%s (%v)", f.Path, err))
			}
		}
	}
	want := map[stepKey]bool{}
	var lost, short []string
	for _, id := range sortedKeys(docs) {
		jd := docs[id]
		labels, err := grpo.LabelSteps(&jd.Trajectory, &jd.Judgement, grpo.LabelModeClean)
		if err != nil {
			a.problem("labels of %s: %v", id, err)
			continue
		}
		for i, l := range labels {
			if l != grpo.LabelPositive {
				continue
			}
			k := stepKey{id, i}
			want[k] = true
			s.Planned++
			g := groups[k]
			switch {
			case g == nil:
				s.Lost++
				lost = append(lost, fmt.Sprintf("%s/%d", id, i))
			case len(g.cands) < g.size:
				s.Lost++
				short = append(short, fmt.Sprintf("%s/%d (%d of %d rows)", id, i, len(g.cands), g.size))
			default:
				s.Present++
			}
		}
	}
	var extra []string
	for k := range groups {
		if !want[k] && a.ours(k.id) {
			extra = append(extra, fmt.Sprintf("%s/%d", k.id, k.step))
		}
	}
	s.Duplicated = dupRows + len(extra)
	if len(unread) > 0 && s.Lost == 0 && s.Present == 0 && s.Planned > 0 {
		s.Lost = s.Planned
	}
	a.addStage(s,
		idProblem{"shard sets or files not read (%d): %s", unread},
		idProblem{"labelled steps without rows (%d): %s", lost},
		idProblem{"labelled steps with rows missing (%d): %s", short},
		idProblem{"shard rows duplicated (%d): %s", dup},
		idProblem{"shard rows of steps that are not labelled (%d steps): %s", extra})
}

// sft: every clean success's steps are in the SFT set exactly once, or the
// build's manifest accounts for the trajectory (the same executed actions
// as a kept one of its task, a skip with its reason, the evaluator, the
// per-task limit).
func (a *account) sft(docs map[string]*traj.Judged) {
	s := Stage{Name: "sft samples", Note: "clean successes' steps; accounted: the steps of trajectories the build left out for a recorded reason"}
	m, err := sft.ReadManifest(a.cfg.SFTDir)
	if err != nil {
		a.problem("SFT manifest: %v", err)
		a.addStage(s)
		return
	}
	samples := map[stepKey]int{}
	kept := map[string]bool{}
	for split := range m.Splits {
		path := filepath.Join(a.cfg.SFTDir, split+".jsonl")
		if err := readJSONL(path, func(id string, step int) {
			samples[stepKey{id, step}]++
			kept[id] = true
		}); err != nil {
			a.problem("SFT split %s: %v", split, err)
		}
	}
	clean := 0
	var lost, dup []string
	for _, id := range sortedKeys(docs) {
		jd := docs[id]
		if jd.Judgement.Decision != traj.CleanSuccess || jd.Trajectory.Outcome.Kind == traj.OutcomeEnvError {
			continue
		}
		clean++
		n := len(jd.Trajectory.Steps)
		s.Planned += n
		if !kept[id] {
			// Left out: counted against the manifest's reasons below.
			s.Accounted += n
			continue
		}
		for i := range n {
			switch c := samples[stepKey{id, i}]; {
			case c == 0:
				s.Lost++
				lost = append(lost, fmt.Sprintf("%s/%d", id, i))
			case c > 1:
				s.Duplicated += c - 1
				dup = append(dup, fmt.Sprintf("%s/%d ×%d", id, i, c))
				s.Present++
			default:
				s.Present++
			}
		}
	}
	for k, c := range samples {
		if d := docs[k.id]; d == nil || d.Judgement.Decision != traj.CleanSuccess || k.step >= len(d.Trajectory.Steps) {
			if a.ours(k.id) {
				s.Duplicated += c
				dup = append(dup, fmt.Sprintf("%s/%d (not a clean success's step)", k.id, k.step))
			}
		}
	}
	// The trajectories left out must be what the manifest says it left out.
	c := m.Counts
	leftOut := c.Duplicates + c.Skipped + c.EvalFailed + c.OverLimit
	if got := clean - len(kept); got != leftOut {
		a.problem("SFT: %d clean successes, %d kept, so %d left out; the manifest accounts for %d (duplicates %d, skipped %d, eval failed %d, over limit %d)",
			clean, len(kept), got, leftOut, c.Duplicates, c.Skipped, c.EvalFailed, c.OverLimit)
		if got > leftOut {
			// Treat the unexplained ones as lost (their steps are not known
			// one by one: count trajectories).
			s.Lost += got - leftOut
		}
	}
	a.addStage(s,
		idProblem{"SFT samples missing (%d): %s", lost},
		idProblem{"SFT samples duplicated (%d): %s", dup})
}

func readJSONL(path string, fn func(id string, step int)) error {
	body, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for i, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		if line == "" {
			continue
		}
		var rec struct {
			TrajectoryID string `json:"trajectory_id"`
			Step         int    `json:"step"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		fn(rec.TrajectoryID, rec.Step)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
