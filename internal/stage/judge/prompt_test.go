package judge

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/pkg/traj"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestPromptGolden: the messages of one judge call for a question task
// with a subsampled trajectory, images shown by reference.
func TestPromptGolden(t *testing.T) {
	p, err := LoadPrompt("")
	if err != nil {
		t.Fatal(err)
	}
	tr := trajWithSteps(5)
	tr.Task = traj.TaskRef{ID: "ChimeraX/Q-01", App: "ChimeraX", Instruction: "How many chains does 1A0S have?", StepLimit: 10}
	tr.Outcome = traj.Outcome{Kind: traj.OutcomeAnswered, Answer: "3\nchains"}
	frames := Keyframes(tr, 4)
	fd := make([]FrameData, len(frames))
	imgs := make([][]byte, len(frames))
	for i, f := range frames {
		fd[i] = FrameData{Frame: f, Index: i + 1, Width: 1280, Height: 800}
		imgs[i] = []byte("png " + f.Image.SHA256[60:])
	}
	msgs, err := p.Messages(Data(tr, frames), fd, imgs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(msgs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "prompt.golden.json")
	if *update {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestPromptGolden -update)", err)
	}
	if string(want) != string(got)+"\n" {
		t.Fatalf("the rendered prompt differs from %s (go test -run TestPromptGolden -update rewrites it):\n%s", golden, got)
	}
	user := msgs[1].MultiContent
	var text []string
	for _, part := range user {
		text = append(text, part.Text)
	}
	all := strings.Join(text, "\n")
	// What the acceptance asks the judge to see: the instruction, the
	// answer on its own line, step labels as the judge must cite them,
	// the final screen labelled.
	for _, want := range []string{tr.Task.Instruction, "\nANS 3 chains", "Step 1.", "Step 4.", "Final screen, after step 5."} {
		if !strings.Contains(all, want) {
			t.Errorf("the user message lacks %q", want)
		}
	}
}

func TestLoadPromptFromFolder(t *testing.T) {
	def, err := LoadPrompt("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	custom := `{{define "system"}}Judge it.{{end}}{{define "intro"}}Task: {{.Instruction}}{{end}}{{define "frame"}}Step {{.Step}}{{end}}{{define "outro"}}{{end}}`
	if err := os.WriteFile(filepath.Join(dir, PromptFile), []byte(custom), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPrompt(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.SHA256 == def.SHA256 || p.Source != filepath.Join(dir, PromptFile) {
		t.Fatalf("custom prompt: sha %s source %s", p.SHA256, p.Source)
	}
	msgs, err := p.Messages(PromptData{Instruction: "Open it."}, []FrameData{{Frame: Frame{Step: 2}}}, [][]byte{{1}})
	if err != nil || msgs[0].Content != "Judge it." || msgs[1].MultiContent[0].Text != "Task: Open it." || msgs[1].MultiContent[1].Text != "Step 2" {
		t.Fatalf("%+v %v", msgs, err)
	}

	for name, body := range map[string]string{
		"missing part":  `{{define "system"}}x{{end}}{{define "intro"}}y{{end}}{{define "frame"}}z{{end}}`,
		"syntax":        `{{define "system"}}x{{end`,
		"unknown field": `{{define "system"}}x{{end}}{{define "intro"}}{{.Nope}}{{end}}{{define "frame"}}z{{end}}{{define "outro"}}{{end}}`,
		"empty system":  `{{define "system"}} {{end}}{{define "intro"}}y{{end}}{{define "frame"}}z{{end}}{{define "outro"}}{{end}}`,
	} {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			if err := os.WriteFile(filepath.Join(d, PromptFile), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadPrompt(d)
			if err == nil || !strings.Contains(err.Error(), PromptFile) {
				t.Fatalf("error %v does not name the file", err)
			}
		})
	}
	if _, err := LoadPrompt(t.TempDir()); err == nil {
		t.Fatal("a folder without judge.tmpl must be an error")
	}
}
