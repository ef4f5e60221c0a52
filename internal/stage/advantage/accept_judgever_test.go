package advantage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/contract/shard/shardtest"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Acceptance (issue 35, item 1): the README path — a judged run, advantage
// --drain --runs, the run judged again by another policy (judge --rule
// majority: another judge version, another message per trajectory), and
// advantage --drain --runs again — leaves no (trajectory, step,
// candidate) twice in any set: the set is bound to the first judge
// version, the other version's judgements are acknowledged unwritten, and
// the output and the --summary file say which and why. --judge-version
// with the other version makes another set, in its own folder, of those.
func TestAcceptReJudgedRunWritesNoRowTwice(t *testing.T) {
	p := pipetest.Shared(t, smallSpec)
	p.RequireCleanSuccesses(t, 1, 1)
	dir, first, run := p.Dir, p.Judged, smallSpec.Run
	v1 := first[0].Judgement.Judge.ID()
	out := filepath.Join(t.TempDir(), "shards")
	advantageCLI(t, dir, "--out", out, "--runs", run)

	// Judge the run again with another policy, as the README's user did.
	simCfg := filepath.Join(t.TempDir(), "sim.json")
	if err := os.WriteFile(simCfg, []byte(smallSpec.Sim), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var jout, jerr bytes.Buffer
	if code := service.MainContext(ctx, judgeCommand, []string{"--data", dir, "--log-level", "warn", "--sim", "--drain", "--max-frames", "4",
		"--rule", "majority", "--sim-config", simCfg}, &jout, &jerr); code != 0 {
		t.Fatalf("judge --rule majority: exit %d\n%s", code, jerr.String())
	}
	docs, _ := pipetest.Archived(t, p.Store(t).Bucket())
	var second []*traj.Judged
	v2 := ""
	for _, jd := range docs {
		if v := jd.Judgement.Judge.ID(); v != v1 {
			v2 = v
			second = append(second, jd)
		}
	}
	if len(second) != len(first) {
		t.Fatalf("the second judge wrote %d judgements of another version, want %d", len(second), len(first))
	}

	summary := filepath.Join(t.TempDir(), "summary.json")
	printed := advantageCLI(t, dir, "--out", out, "--runs", run, "--summary", summary)
	sets := shardtest.CheckNoDuplicates(t, out)
	if len(sets) != 1 {
		t.Fatalf("%d shard sets after the second drain, want 1", len(sets))
	}
	if m := sets[0].Manifest; m.JudgeVersion != v1 || len(sets[0].Rows) != len(expectedKeys(t, first)) {
		t.Errorf("the set: judge version %q, %d rows; want %s and the first judgements' %d rows", m.JudgeVersion, len(sets[0].Rows), v1, len(expectedKeys(t, first)))
	}
	note := fmt.Sprintf("%d judgements of judge version %s skipped: the set is bound to judge version %s; advantage --judge-version %s", len(first), v2, v1, v2)
	if !strings.Contains(printed, note) {
		t.Errorf("advantage printed\n%s\nwithout %q", printed, note)
	}
	var st Stats
	pipetest.ReadJSON(t, summary, &st)
	if st.JudgeVersion != v1 || st.OtherJudgeVersion[v2] != len(first) || len(st.Notes) != 1 || !strings.HasPrefix(st.Notes[0], note) || st.DeadLettered != 0 {
		t.Errorf("summary: judge version %q, other versions %v, notes %q, %d dead-lettered; want %s, {%s: %d} and the note",
			st.JudgeVersion, st.OtherJudgeVersion, st.Notes, st.DeadLettered, v1, v2, len(first))
	}

	// The other judgement's set is an explicit new one.
	advantageCLI(t, dir, "--out", out, "--runs", run, "--judge-version", v2)
	sets = shardtest.CheckNoDuplicates(t, out)
	if len(sets) != 2 {
		t.Fatalf("%d shard sets after --judge-version, want 2", len(sets))
	}
	for _, s := range sets {
		if s.Manifest.JudgeVersion == v2 && len(s.Rows) != len(expectedKeys(t, second)) {
			t.Errorf("the set of version %s holds %d rows, want %d", v2, len(s.Rows), len(expectedKeys(t, second)))
		}
	}
}

// One judged trajectory published twice under the same message id (as
// after the stream's de-duplication window, 48 h by default, when the
// judge republishes it from its archive) and judged again by the same
// version is written once: a set's commit records keep the ids of the
// messages they hold, whatever the stream stores. Judgements of another
// version published meanwhile are acknowledged unwritten in either
// mode, whichever version the set took first.
func TestJudgeVersionBoundInEachMode(t *testing.T) {
	forDrainModes(t, func(t *testing.T, mode string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		p := pipetest.Shared(t, smallSpec)
		p.RequireCleanSuccesses(t, 1, 1)
		srv := natstest.Start(t)
		b := pipetest.Bus(t, srv.URL())
		top := bus.DefaultTopology()
		top.Duplicates = 100 * time.Millisecond // a window that passes in the test
		if err := b.EnsureTopology(ctx, top); err != nil {
			t.Fatal(err)
		}
		store := p.Store(t)
		v1 := p.Judged[0].Judgement.Judge.ID()
		publish := func(jd *traj.Judged, republish bool) {
			t.Helper()
			body, err := traj.MarshalCompact(jd)
			if err != nil {
				t.Fatal(err)
			}
			v := jd.Judgement.Judge.ID()
			key := archive.Key(jd.Trajectory.Run, jd.Trajectory.Task.App, jd.Trajectory.ID, v)
			if _, err := store.Bucket().Put(ctx, key, bytes.NewReader(body), int64(len(body)), blob.PutOptions{ContentType: "application/json"}); err != nil {
				t.Fatal(err)
			}
			send := func() bool {
				ack, err := b.Publish(ctx, bus.Subject(bus.Judged, jd.Trajectory.Task.App), archive.MessageID(jd.Trajectory.ID, v), body, nil)
				if err != nil {
					t.Fatalf("publish %s: %v", jd.Trajectory.ID, err)
				}
				return !ack.Duplicate
			}
			if !republish {
				if !send() {
					t.Fatalf("publish %s: a duplicate", jd.Trajectory.ID)
				}
				return
			}
			// Past the de-duplication window the same id is a new message.
			poll.Until(t, "the judgement stored again as a new message", 10*time.Second, send)
		}
		var again []*traj.Judged
		for _, jd := range p.Judged {
			publish(jd, false)
			publish(jd, true) // the same id again, next to it: a new message
			cp := *jd
			cp.Judgement.Judge.Policy += "+other" // another judge version
			again = append(again, &cp)
		}
		for _, jd := range again {
			publish(jd, false)
		}
		v2 := again[0].Judgement.Judge.ID()
		out, err := blob.OpenBucket(ctx, filepath.Join(t.TempDir(), "shards"), blob.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Bus: b, Store: store, Out: out, OutURL: "test", Mode: mode, Select: Selection{Since: SinceAll},
			Workers: 4, AckWait: 5 * time.Second, MaxDelay: 100 * time.Millisecond, Drain: true, Log: quietLog()}
		st, err := Serve(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Either version may come first to the consumer's workers; v1's
		// judgements are on the stream twice.
		n := len(p.Judged)
		bound, other, others, boundMsgs := v1, v2, n, 2*n
		if st.JudgeVersion == v2 {
			bound, other, others, boundMsgs = v2, v1, 2*n, n
		}
		if st.JudgeVersion != bound || st.OtherJudgeVersion[other] != others || st.DeadLettered != 0 {
			t.Errorf("stats: judge version %q, others %v, %d dead-lettered; want one of %s, %s and %d of the other",
				st.JudgeVersion, st.OtherJudgeVersion, st.DeadLettered, v1, v2, others)
		}
		m, err := shard.ReadManifest(ctx, out, st.Set)
		if err != nil {
			t.Fatal(err)
		}
		if m.JudgeVersion != bound {
			t.Errorf("manifest judge version %q, want %s", m.JudgeVersion, bound)
		}
		want := len(expectedKeys(t, p.Judged))
		if mode == ModeOutcome {
			rows, _ := expectedServiceRows(t, store, p.Judged, readerCase{mode: ModeOutcome, est: grpo.DefaultEstimator()})
			want = len(rows)
		}
		got := readKeys(t, out, m)
		for k, n := range got {
			if n > 1 {
				t.Errorf("row %v written %d times", k, n)
			}
		}
		if len(got) != want || m.Counts.Rows != want {
			t.Errorf("%d distinct rows, manifest %d, want %d", len(got), m.Counts.Rows, want)
		}

		// The other version given: another set, of those judgements.
		cfg2 := cfg
		cfg2.JudgeVersion = other
		if cfg2.Set() == cfg.Set() {
			t.Fatal("--judge-version does not change the set id")
		}
		st2, err := Serve(ctx, cfg2)
		if err != nil || st2.JudgeVersion != other || st2.OtherJudgeVersion[bound] != boundMsgs {
			t.Errorf("the set of version %s: %+v %v", other, st2, err)
		}
	})
}
