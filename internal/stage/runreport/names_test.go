package runreport_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/stage/runreport"
)

// TestReportEscapesNames: a run or app name with control or format
// characters (from a stream someone else wrote to) is printed quoted and
// escaped in the text and in the HTML page, where html/template alone
// would leave a raw escape sequence or a right-to-left override.
func TestReportEscapesNames(t *testing.T) {
	const run, app = "x\nrun fake", "\x1b[31mred\u202e<script>"
	r := &runreport.Report{Run: run, Night: run, Apps: []string{app}, Samples: 1, Checkpoints: []string{app},
		Overall: ledger.Scores{Outcomes: map[string]int{"passed": 1}}, ByApp: []runreport.AppScores{{App: app}},
		Tasks: []runreport.TaskFigures{{App: app, Task: app + "/S01", Episodes: 1, Scored: 1}}}
	var text, page bytes.Buffer
	r.Print(&text)
	if err := runreport.OverviewOf([]*runreport.Report{r}).WriteHTML(&page, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	for what, out := range map[string]string{"text": text.String(), "html": page.String()} {
		if strings.ContainsAny(out, "\x1b\u202e") || strings.Contains(out, "\nrun fake") || what == "html" && strings.Count(out, "<script>") != 1 { // the page's own: the table sorter
			t.Errorf("%s: a raw control character or tag from a name:\n%s", what, out)
		}
	}
	if !strings.Contains(text.String(), `run "x\nrun fake"`) || !strings.Contains(text.String(), `"\x1b[31mred\u202e<script>"`) {
		t.Errorf("text:\n%s\nwant the names quoted and escaped", text.String())
	}
}
