package traj

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// Decision is the judge's classification of a trajectory.
type Decision string

// Decisions. Only CleanSuccess trajectories give reference actions in
// CODA's labeling; Undecided means the votes did not produce a usable
// verdict (malformed answers, endpoint failures); NotJudged means no model
// was asked (an environment-error trajectory: no verdict on the agent is
// possible), and Judgement.Reason says why.
const (
	CleanSuccess     Decision = "clean_success"
	RedundantSuccess Decision = "success_redundant"
	Failure          Decision = "failure"
	Undecided        Decision = "undecided"
	NotJudged        Decision = "not_judged"
)

// Decisions lists every decision.
var Decisions = []Decision{CleanSuccess, RedundantSuccess, Failure, Undecided, NotJudged}

// Verdict is the judge's result dict. Step numbers are 1-based, as the
// judge sees the trajectory (step number n is Trajectory.Steps[n-1]).
type Verdict struct {
	Correctness    bool   `json:"correctness"`
	Redundant      []int  `json:"redundant"`
	Optimized      bool   `json:"optimized"`
	FirstErrorStep *int   `json:"first_error_step"`
	ErrorType      string `json:"error_type,omitempty"`
	CorrectAction  string `json:"correct_action,omitempty"`
}

// Clean reports whether v describes a clean success: correct, with no
// redundant step and no first error step.
func (v Verdict) Clean() bool {
	return v.Correctness && len(v.Redundant) == 0 && v.FirstErrorStep == nil
}

// Decide maps a verdict to a decision.
func (v Verdict) Decide() Decision {
	switch {
	case v.Clean():
		return CleanSuccess
	case v.Correctness:
		return RedundantSuccess
	default:
		return Failure
	}
}

// Vote is one judge call.
type Vote struct {
	Model       string  `json:"model"`
	Endpoint    string  `json:"endpoint"`
	Resolution  string  `json:"resolution"` // screenshot size sent, "WxH"
	Temperature float64 `json:"temperature"`
	TopP        float64 `json:"top_p"`
	// Sampling are all the sampling parameters the vote's calls sent
	// (Temperature and TopP among them; each call has its own seed, so
	// Seed is nil); absent in documents written before they were recorded.
	Sampling *Sampling `json:"sampling,omitempty"`
	// Verdict is nil when the call failed or its answer could not be
	// parsed; Error says which.
	Verdict   *Verdict `json:"verdict,omitempty"`
	Captions  []string `json:"captions,omitempty"` // per-frame captions the judge wrote
	Raw       string   `json:"raw,omitempty"`      // the judge's raw answer
	Error     string   `json:"error,omitempty"`
	LatencyMS int64    `json:"latency_ms"`
	// Attempts is the number of model calls behind the vote: 1, or more
	// when malformed answers were asked again (schema version 3; 0 in
	// older documents).
	Attempts int `json:"attempts,omitempty"`
	// Choices is n of the model call that answered the vote's first
	// attempt when that call asked for several answers at once (one call
	// answering several votes, schema version 7); 0 for a call of its
	// own. Choice is the index of the vote's answer among that call's
	// choices: the call is counted once, by its choice 0 (Calls).
	Choices int `json:"choices,omitempty"`
	Choice  int `json:"choice,omitempty"`
}

// JudgeVersion identifies the judge configuration that produced a judgement.
type JudgeVersion struct {
	PromptSHA256 string   `json:"prompt_sha256"` // hash of the prompt template(s)
	Models       []string `json:"models"`        // judge models, in vote order
	Policy       string   `json:"policy"`        // the policy's string, e.g. "staged[1,3/4] frames=16 temperature=1 top_p=0.6 malformed_retries=2"
}

// ID is a short stable name of the judge version: the first 16 hex digits
// of the SHA-256 of its prompt hash, models and policy. Judgements of one
// trajectory by different judge versions are distinct (message ids,
// archive keys); by the same version, the same.
func (v JudgeVersion) ID() string {
	h := sha256.Sum256([]byte(v.PromptSHA256 + "\x00" + strings.Join(v.Models, "\x00") + "\x00" + v.Policy))
	return hex.EncodeToString(h[:8])
}

// ValidJudgeVersionID reports whether s has the form of a judge version
// id (JudgeVersion.ID): 16 lower-case hex digits.
func ValidJudgeVersionID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Judgement is the judge's decision on one trajectory with all its votes.
type Judgement struct {
	SchemaVersion int    `json:"schema_version"`
	TrajectoryID  string `json:"trajectory_id"`
	Run           string `json:"run"`
	TaskID        string `json:"task_id"`
	App           string `json:"app"`
	// Verdict is the combined result dict the decision rests on; nil when
	// Decision is Undecided.
	Verdict  *Verdict `json:"verdict,omitempty"`
	Decision Decision `json:"decision"`
	// Reason says why the decision is NotJudged or Undecided (schema
	// version 3).
	Reason    string       `json:"reason,omitempty"`
	Votes     []Vote       `json:"votes"`
	Judge     JudgeVersion `json:"judge"`
	JudgedAt  time.Time    `json:"judged_at"`
	LatencyMS int64        `json:"latency_ms"`
}

// Calls is the number of model calls behind the judgement (a vote from a
// document without attempts counts one; a call that answered several
// votes counts once, through the vote of its choice 0).
func (j *Judgement) Calls() int {
	n := 0
	for _, v := range j.Votes {
		n += max(v.Attempts, 1)
		if v.Choice > 0 {
			n-- // its first attempt is another vote's call
		}
	}
	return n
}

// Judged is a trajectory with its judgement: what the judge publishes on
// CODA_JUDGED and keeps in its archive, and what advantage and sftpack
// read.
type Judged struct {
	SchemaVersion int        `json:"schema_version"`
	Judgement     Judgement  `json:"judgement"`
	Trajectory    Trajectory `json:"trajectory"`
}
