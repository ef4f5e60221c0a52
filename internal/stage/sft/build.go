package sft

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Split names.
const (
	SplitTrain = "train"
	SplitVal   = "val"
)

// Config configures Build.
type Config struct {
	// Store is the blob store holding the judge's archive, the
	// screenshots and the prompt sets.
	Store *blob.Store
	// Dir is the folder the dataset is written to. It is created; it must
	// not exist or be empty.
	Dir string
	// Runs and Apps select archive records by run and app name: names or
	// path.Match globs (none: all).
	Runs, Apps []string
	// Since and Until bound the trajectories' start time: Since ≤
	// started_at < Until (zero: unbounded).
	Since, Until time.Time
	// Rules are the judgement, filter, split and shard settings (the
	// manifest's selection records them).
	Rules
	// Workers is how many records are read, and screenshots copied, at
	// once (default 8).
	Workers int
	// Producer is written into the manifest ("codapipe sftpack <version>").
	Producer string
	Log      *slog.Logger
	// Progress receives the progress bar (on a terminal) or nothing, with
	// log lines instead; nil: log lines only.
	Progress io.Writer
	// Report receives the counts per app and per task once the selection
	// is done, before anything is written; nil: none.
	Report io.Writer
}

// candidate is a clean success that passed the first filters, then the
// checks of the second pass.
type candidate struct {
	rec       record
	steps     int
	seq       string
	split     string
	samples   int
	promptSet string
}

// Build builds the dataset into cfg.Dir and returns its manifest (also
// written there, last). Bad input is skipped and listed in the manifest;
// errors are failures of the store or the file system, or a cancelled
// context.
func Build(ctx context.Context, cfg Config) (*Manifest, error) {
	if cfg.Store == nil || cfg.Dir == "" {
		return nil, errors.New("sft: Build needs a store and a folder")
	}
	cfg.Workers = service.Positive(cfg.Workers, 8)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.ValFraction < 0 || cfg.ValFraction > 1 {
		return nil, fmt.Errorf("sft: val fraction %v, want 0..1", cfg.ValFraction)
	}
	if err := prepareDir(cfg.Dir); err != nil {
		return nil, err
	}
	m := newManifest(cfg)
	prog := newProgress(cfg.Progress, cfg.Log)

	// Pass 1: every record of the selected runs and apps, summarized.
	keys, strays, err := listArchive(ctx, cfg.Store, cfg.Runs, cfg.Apps)
	if err != nil {
		return nil, err
	}
	for _, k := range strays {
		m.Skipped = append(m.Skipped, Skipped{Key: k, Reason: "not a judged-trajectory record (judged/<run>/<app>/<id>.<judge version>.json)"})
	}
	prog.begin("reading the judged archive", "records", len(keys))
	recs, err := readRecords(ctx, cfg.Store, keys, cfg.Workers, func() { prog.add(1, 0) })
	prog.end()
	if err != nil {
		return nil, err
	}
	m.Counts.Records = len(recs)
	for _, r := range recs {
		if r.Err != "" {
			m.Counts.Undecodable++
			m.Skipped = append(m.Skipped, Skipped{Key: r.Key, TrajectoryID: r.ID, Run: r.Run, App: r.App, Reason: r.Err})
		}
	}
	ids, groups := groupByTrajectory(recs)
	m.Counts.Trajectories = len(ids)
	// One judge version for the whole set.
	m.JudgeVersion = cfg.JudgeVersion
	if m.JudgeVersion == "" {
		m.JudgeVersion = setJudgeVersion(recs)
	}
	for _, r := range recs {
		if r.Err == "" && r.Version != m.JudgeVersion {
			m.OtherJudgeVersions[r.Version]++
		}
	}
	var cands []*candidate
	for _, id := range ids {
		rec, _ := chooseJudgement(groups[id], m.JudgeVersion)
		if rec == nil {
			m.Counts.NoJudgement++
			continue
		}
		if (!cfg.Since.IsZero() && rec.StartedAt.Before(cfg.Since)) || (!cfg.Until.IsZero() && !rec.StartedAt.Before(cfg.Until)) {
			m.Counts.OutOfRange++
			continue
		}
		m.Counts.Decisions[string(rec.Decision)]++
		if rec.Decision != traj.CleanSuccess {
			continue
		}
		if cfg.RequireEval && rec.EvalRan && !rec.EvalPassed {
			m.Counts.EvalFailed++
			continue
		}
		cands = append(cands, &candidate{rec: *rec})
	}

	// Pass 2: check that every step of each clean success can become a
	// sample; the trajectories that cannot are skipped whole.
	render := newRenderer(cfg.Store)
	skipped := make([]string, len(cands))
	prog.begin("checking the clean successes", "trajectories", len(cands))
	err = parallel(ctx, len(cands), cfg.Workers, func(ctx context.Context, i int) error {
		defer prog.add(1, 0)
		c := cands[i]
		jd, err := readJudged(ctx, cfg.Store, c.rec.Name)
		if err == nil {
			var ss []Sample
			if ss, err = render.samples(ctx, jd); err == nil {
				c.steps, c.samples, c.seq = len(jd.Trajectory.Steps), len(ss), actionSequence(&jd.Trajectory)
				c.promptSet = jd.Trajectory.Prompts
				return nil
			}
		}
		var ie *inputError
		if errors.As(err, &ie) {
			skipped[i] = ie.Reason
			return nil
		}
		return err
	})
	prog.end()
	if err != nil {
		return nil, err
	}
	var valid []*candidate
	for i, c := range cands {
		if skipped[i] != "" {
			m.Counts.Skipped++
			m.Skipped = append(m.Skipped, Skipped{Key: c.rec.Key, TrajectoryID: c.rec.ID, Run: c.rec.Run, App: c.rec.App, Task: c.rec.Task, Reason: skipped[i]})
			continue
		}
		valid = append(valid, c)
	}
	kept := selectKept(m, valid, cfg)
	sortSkipped(m.Skipped)
	count(m, kept)
	report(m, cfg.Report, cfg.Log)

	// Pass 3: write.
	w := &datasetWriter{cfg: cfg, m: m, render: render, prog: prog, images: newImageFiles(cfg.Dir, cfg.Store)}
	if err := w.write(ctx, kept); err != nil {
		return nil, err
	}
	return m, nil
}

// prepareDir creates dir, which must not exist or be empty.
func prepareDir(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case len(ents) > 0:
		return fmt.Errorf("sft: %s is not empty", dir)
	}
	return nil
}

func newManifest(cfg Config) *Manifest {
	m := &Manifest{
		Kind: ManifestKind, Producer: cfg.Producer, Layout: Layout,
		Selection: Selection{
			Runs: nonNil(cfg.Runs), Apps: nonNil(cfg.Apps), Rules: cfg.Rules,
		},
		Splits: map[string]SplitInfo{}, Apps: map[string]Count{}, Tasks: map[string]TaskCount{}, Runs: map[string]Count{},
		JudgeVersions: map[string]JudgeVersionCount{}, OtherJudgeVersions: map[string]int{}, PromptSets: []string{}, Skipped: []Skipped{}, Files: []File{},
	}
	if !cfg.Since.IsZero() {
		m.Selection.Since = cfg.Since.UTC().Format(time.RFC3339Nano)
	}
	if !cfg.Until.IsZero() {
		m.Selection.Until = cfg.Until.UTC().Format(time.RFC3339Nano)
	}
	m.Counts.Decisions = map[string]int{}
	for _, d := range traj.Decisions {
		m.Counts.Decisions[string(d)] = 0
	}
	return m
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// selectKept de-duplicates the valid clean successes per task (the same
// executed action sequence: the smallest trajectory id is kept), applies
// MaxPerTask (fewest steps first, then the smallest id) and assigns each
// task its split. The result is sorted by task, then trajectory id.
func selectKept(m *Manifest, valid []*candidate, cfg Config) []*candidate {
	byTask := map[string][]*candidate{}
	var tasks []string
	for _, c := range valid {
		if _, ok := byTask[c.rec.Task]; !ok {
			tasks = append(tasks, c.rec.Task)
		}
		byTask[c.rec.Task] = append(byTask[c.rec.Task], c)
	}
	slices.Sort(tasks)
	var kept []*candidate
	for _, task := range tasks {
		cs := byTask[task]
		slices.SortFunc(cs, func(a, b *candidate) int { return strings.Compare(a.rec.ID, b.rec.ID) })
		seen := map[string]bool{}
		var uniq []*candidate
		for _, c := range cs {
			if seen[c.seq] {
				m.Counts.Duplicates++
				continue
			}
			seen[c.seq] = true
			uniq = append(uniq, c)
		}
		if cfg.MaxPerTask > 0 && len(uniq) > cfg.MaxPerTask {
			slices.SortStableFunc(uniq, func(a, b *candidate) int { return a.steps - b.steps })
			m.Counts.OverLimit += len(uniq) - cfg.MaxPerTask
			uniq = uniq[:cfg.MaxPerTask]
			slices.SortFunc(uniq, func(a, b *candidate) int { return strings.Compare(a.rec.ID, b.rec.ID) })
		}
		split := SplitOf(task, cfg.Seed, cfg.ValFraction)
		for _, c := range uniq {
			c.split = split
		}
		kept = append(kept, uniq...)
	}
	return kept
}

// SplitOf is the split of a task: val when the first 53 bits of
// SHA-256("<seed>\x00<task id>"), as a fraction of 2^53, are below
// valFraction. A task's split depends on the seed and its id alone, so
// it stays where it is as the corpus grows.
func SplitOf(task string, seed int64, valFraction float64) string {
	h := sha256.Sum256([]byte(strconv.FormatInt(seed, 10) + "\x00" + task))
	u := binary.BigEndian.Uint64(h[:8]) >> 11
	if float64(u)/(1<<53) < valFraction {
		return SplitVal
	}
	return SplitTrain
}

// count fills the per-app, per-task, per-run and per-split counts of the
// kept trajectories.
func count(m *Manifest, kept []*candidate) {
	splitTasks := map[string]map[string]bool{}
	for _, c := range kept {
		r := &c.rec
		m.Counts.Kept++
		m.Counts.Samples += c.samples
		a, ru := m.Apps[r.App], m.Runs[r.Run]
		a.Add(c.samples)
		ru.Add(c.samples)
		m.Apps[r.App], m.Runs[r.Run] = a, ru
		t := m.Tasks[r.Task]
		t.App, t.Split = r.App, c.split
		t.Add(c.samples)
		m.Tasks[r.Task] = t
		jv := m.JudgeVersions[r.Version]
		jv.JudgeVersion = r.Judge
		jv.Add(c.samples)
		m.JudgeVersions[r.Version] = jv
		s, ok := m.Splits[c.split]
		if !ok {
			s = SplitInfo{JSONL: c.split + ".jsonl", Parquet: []string{}}
			splitTasks[c.split] = map[string]bool{}
		}
		s.Add(c.samples)
		splitTasks[c.split][r.Task] = true
		m.Splits[c.split] = s
	}
	for name, ts := range splitTasks {
		s := m.Splits[name]
		s.Tasks = len(ts)
		m.Splits[name] = s
	}
}

// report prints what the selection kept, per app and per task, and logs
// the counts (per app at debug).
func report(m *Manifest, w io.Writer, log *slog.Logger) {
	c := m.Counts
	log.Info("sftpack: selected", "records", c.Records, "undecodable", c.Undecodable, "trajectories", c.Trajectories,
		"no_judgement", c.NoJudgement, "out_of_range", c.OutOfRange, "clean_successes", c.Decisions[string(traj.CleanSuccess)],
		"eval_failed", c.EvalFailed, "skipped", c.Skipped, "duplicates", c.Duplicates, "over_limit", c.OverLimit,
		"kept", c.Kept, "samples", c.Samples)
	apps := slices.Sorted(maps.Keys(m.Apps))
	for _, app := range apps {
		a := m.Apps[app]
		log.Debug("sftpack: app", "app", app, "trajectories", a.Trajectories, "samples", a.Samples)
	}
	if w == nil {
		return
	}
	var ds []string
	for _, d := range traj.Decisions {
		ds = append(ds, fmt.Sprintf("%s %d", d, c.Decisions[string(d)]))
	}
	fmt.Fprintf(w, "sftpack: %d archive records (%d undecodable) of %d trajectories; judgements: %s\n",
		c.Records, c.Undecodable, c.Trajectories, strings.Join(ds, ", "))
	fmt.Fprintf(w, "sftpack: %d without a usable judgement, %d out of the time range, %d evaluator failures, %d skipped as bad input, %d duplicates, %d over --max-per-task\n",
		c.NoJudgement, c.OutOfRange, c.EvalFailed, c.Skipped, c.Duplicates, c.OverLimit)
	if m.JudgeVersion != "" {
		fmt.Fprintf(w, "sftpack: judge version %s: the set's one judge version\n", m.JudgeVersion)
	}
	for _, v := range slices.Sorted(maps.Keys(m.OtherJudgeVersions)) {
		fmt.Fprintf(w, "sftpack: %d judgements of judge version %s skipped: the set is bound to judge version %s; sftpack build --judge-version %s builds a set of those\n",
			m.OtherJudgeVersions[v], v, m.JudgeVersion, v)
	}
	tr, va := m.Splits[SplitTrain], m.Splits[SplitVal]
	fmt.Fprintf(w, "sftpack: keeping %d trajectories (%d samples) of %d tasks in %d apps: train %d tasks / %d samples, val %d tasks / %d samples\n",
		c.Kept, c.Samples, len(m.Tasks), len(m.Apps), tr.Tasks, tr.Samples, va.Tasks, va.Samples)
	if len(apps) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "app\ttasks\ttrajectories\tsamples")
	tasksPer := map[string]int{}
	for _, t := range m.Tasks {
		tasksPer[t.App]++
	}
	for _, app := range apps {
		a := m.Apps[app]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", traj.PrintName(app), tasksPer[app], a.Trajectories, a.Samples)
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "task\tapp\tsplit\ttrajectories\tsamples")
	for _, task := range slices.Sorted(maps.Keys(m.Tasks)) {
		t := m.Tasks[task]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", traj.PrintName(task), traj.PrintName(t.App), t.Split, t.Trajectories, t.Samples)
	}
	tw.Flush()
}

// datasetWriter writes the kept trajectories' samples.
type datasetWriter struct {
	cfg    Config
	m      *Manifest
	render *renderer
	prog   *progress
	images *imageFiles
}

// jsonlRecord is one line of train.jsonl / val.jsonl.
type jsonlRecord struct {
	Messages     []Message `json:"messages"`
	Images       []string  `json:"images"`
	ID           string    `json:"id"`
	App          string    `json:"app"`
	Task         string    `json:"task"`
	Run          string    `json:"run"`
	TrajectoryID string    `json:"trajectory_id"`
	Step         int       `json:"step"`
	JudgeVersion string    `json:"judge_version"`
}

func (w *datasetWriter) write(ctx context.Context, kept []*candidate) error {
	prompts := map[string]bool{}
	for _, split := range []string{SplitTrain, SplitVal} {
		if _, ok := w.m.Splits[split]; !ok {
			continue // no samples: no file, and no mention in dataset_info.json or the commands
		}
		var list []*candidate
		for _, c := range kept {
			if c.split == split {
				list = append(list, c)
			}
		}
		files, err := w.writeSplit(ctx, split, list, prompts)
		if err != nil {
			return err
		}
		w.m.Files = append(w.m.Files, files...)
		s := w.m.Splits[split]
		for _, f := range files[1:] {
			s.Parquet = append(s.Parquet, f.Path)
		}
		w.m.Splits[split] = s
	}
	w.m.PromptSets = slices.Sorted(maps.Keys(prompts))
	imgs := w.images.files()
	w.m.Counts.Images = len(imgs)
	w.m.Files = append(w.m.Files, imgs...)

	info, err := traj.Marshal(datasetInfo(w.m))
	if err != nil {
		return err
	}
	f, err := writeFile(w.cfg.Dir, DatasetInfoName, info)
	if err != nil {
		return err
	}
	w.m.Files = append(w.m.Files, f)
	w.m.Training = training(w.m)
	if f, err = writeFile(w.cfg.Dir, ReadmeName, readme(w.m)); err != nil {
		return err
	}
	w.m.Files = append(w.m.Files, f)
	sortFiles(w.m.Files)
	body, err := traj.Marshal(w.m)
	if err != nil {
		return err
	}
	_, err = writeFile(w.cfg.Dir, ManifestName, body)
	return err
}

// writeSplit writes one split's JSONL and Parquet shards; the JSONL file
// comes first in the result.
func (w *datasetWriter) writeSplit(ctx context.Context, split string, list []*candidate, prompts map[string]bool) (_ []File, err error) {
	name := split + ".jsonl"
	jf, err := os.OpenFile(filepath.Join(w.cfg.Dir, name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644) // 0644 less the umask
	if err != nil {
		return nil, err
	}
	defer func() {
		if jf != nil {
			jf.Close()
		}
	}()
	hw := newHashWriter(jf)
	bw := bufio.NewWriterSize(hw, 1<<20)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	pw := newParquetWriter(w.cfg.Dir, split, w.cfg.ShardBytes)
	finished := false
	defer func() {
		if !finished {
			pw.Abort()
		}
	}()

	w.prog.begin("writing "+split, "trajectories", len(list))
	defer w.prog.end()
	chunk := max(1, 4*w.cfg.Workers)
	for start := 0; start < len(list); start += chunk {
		batch := list[start:min(start+chunk, len(list))]
		out := make([][]Sample, len(batch))
		err := parallel(ctx, len(batch), w.cfg.Workers, func(ctx context.Context, i int) error {
			c := batch[i]
			jd, err := readJudged(ctx, w.cfg.Store, c.rec.Name)
			if err == nil {
				out[i], err = w.render.samples(ctx, jd)
			}
			var ie *inputError
			if errors.As(err, &ie) {
				return fmt.Errorf("sft: trajectory %s (%s) changed since it was checked: %s", c.rec.ID, c.rec.Key, ie.Reason)
			}
			if err != nil {
				return err
			}
			if len(out[i]) != c.samples {
				return fmt.Errorf("sft: trajectory %s (%s) changed since it was checked: %d samples, then %d", c.rec.ID, c.rec.Key, c.samples, len(out[i]))
			}
			for _, s := range out[i] {
				for _, sha := range s.Images {
					if err := w.images.ensure(ctx, sha); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		n := 0
		for i, ss := range out {
			prompts[batch[i].promptSet] = true
			for k := range ss {
				s := &ss[k]
				paths := make([]string, len(s.Images))
				imgs := make([][]byte, len(s.Images))
				for j, sha := range s.Images {
					paths[j] = ImagePath(sha)
					if imgs[j], err = os.ReadFile(filepath.Join(w.cfg.Dir, filepath.FromSlash(paths[j]))); err != nil {
						return nil, err
					}
				}
				rec := jsonlRecord{Messages: s.Messages, Images: paths, ID: s.ID, App: s.App, Task: s.Task, Run: s.Run,
					TrajectoryID: s.TrajectoryID, Step: s.Step, JudgeVersion: s.JudgeVersion}
				if err := enc.Encode(&rec); err != nil {
					return nil, err
				}
				if err := pw.Add(s, imgs); err != nil {
					return nil, err
				}
				n++
			}
		}
		w.prog.add(len(batch), n)
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	err = jf.Close()
	jf = nil
	if err != nil {
		return nil, err
	}
	finished = true
	shards, err := pw.Finish()
	if err != nil {
		return nil, err
	}
	return append([]File{{Path: name, Bytes: hw.n, SHA256: hw.sum()}}, shards...), nil
}

// datasetInfo is LLaMA-Factory's dataset_info.json for the splits that
// have samples (Manifest.Splits): codapipe_sft_train (train.jsonl) and
// codapipe_sft_val (val.jsonl), sharegpt formatting with role/content
// tags.
func datasetInfo(m *Manifest) map[string]llamaFactoryDataset {
	out := map[string]llamaFactoryDataset{}
	for _, split := range []string{SplitTrain, SplitVal} {
		if _, ok := m.Splits[split]; !ok {
			continue
		}
		out[DatasetName(split)] = llamaFactoryDataset{
			FileName: split + ".jsonl", Formatting: "sharegpt",
			Columns: llamaFactoryColumns{Messages: "messages", Images: "images"},
			Tags:    llamaFactoryTags{RoleTag: "role", ContentTag: "content", UserTag: RoleUser, AssistantTag: RoleAssistant, SystemTag: RoleSystem},
		}
	}
	return out
}

// DatasetName is the name dataset_info.json gives a split.
func DatasetName(split string) string { return "codapipe_sft_" + split }

type llamaFactoryDataset struct {
	FileName   string              `json:"file_name"`
	Formatting string              `json:"formatting"`
	Columns    llamaFactoryColumns `json:"columns"`
	Tags       llamaFactoryTags    `json:"tags"`
}

type llamaFactoryColumns struct {
	Messages string `json:"messages"`
	Images   string `json:"images"`
}

type llamaFactoryTags struct {
	RoleTag      string `json:"role_tag"`
	ContentTag   string `json:"content_tag"`
	UserTag      string `json:"user_tag"`
	AssistantTag string `json:"assistant_tag"`
	SystemTag    string `json:"system_tag"`
}

// writeFile writes a small file of the dataset and describes it.
func writeFile(dir, rel string, body []byte) (File, error) {
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(rel)), body, 0o644); err != nil {
		return File{}, err
	}
	sum := sha256.Sum256(body)
	return File{Path: rel, Bytes: int64(len(body)), SHA256: hex.EncodeToString(sum[:])}, nil
}

// imageFiles copies screenshots from the store into images/, each once.
type imageFiles struct {
	dir   string
	store *blob.Store

	mu sync.Mutex
	m  map[string]*imageFile
}

type imageFile struct {
	once sync.Once
	size int64
	err  error
}

func newImageFiles(dir string, store *blob.Store) *imageFiles {
	return &imageFiles{dir: dir, store: store, m: map[string]*imageFile{}}
}

// ensure copies the screenshot sha into images/<sha>.png unless it is
// there already.
func (f *imageFiles) ensure(ctx context.Context, sha string) error {
	f.mu.Lock()
	e := f.m[sha]
	if e == nil {
		e = &imageFile{}
		f.m[sha] = e
	}
	f.mu.Unlock()
	e.once.Do(func() { e.size, e.err = f.copy(ctx, sha) })
	return e.err
}

func (f *imageFiles) copy(ctx context.Context, sha string) (int64, error) {
	dir := filepath.Join(f.dir, ImagesDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	rc, err := f.store.Get(ctx, sha)
	if err != nil {
		return 0, fmt.Errorf("sft: screenshot %s: %w", sha, err)
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(dir, ".partial-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	hw := newHashWriter(tmp)
	if _, err := io.Copy(hw, rc); err != nil {
		tmp.Close()
		return 0, fmt.Errorf("sft: screenshot %s: %w", sha, err)
	}
	if got := hw.sum(); got != sha {
		tmp.Close()
		return 0, fmt.Errorf("sft: screenshot %s: the store gave content with SHA-256 %s: %w", sha, got, blob.ErrChecksumMismatch)
	}
	if err := blob.Publish(tmp); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, sha+".png")); err != nil {
		return 0, err
	}
	return hw.n, nil
}

// files describes the images copied, sorted by path.
func (f *imageFiles) files() []File {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]File, 0, len(f.m))
	for sha, e := range f.m {
		out = append(out, File{Path: ImagePath(sha), Bytes: e.size, SHA256: sha})
	}
	sortFiles(out)
	return out
}
