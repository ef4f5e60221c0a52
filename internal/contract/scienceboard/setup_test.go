package scienceboard

import (
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/scienceboard/sbtest"
)

func TestSetupStepsOfTheBenchmark(t *testing.T) {
	set, err := LoadDir(sbtest.Tasks())
	if err != nil {
		t.Fatal(err)
	}
	for i := range set.Tasks {
		task := &set.Tasks[i]
		exp, err := task.ExpandPlaceholders(map[string]string{"PORTLIKE": "8000"})
		if err != nil {
			t.Fatalf("%s: %v", task.ID, err)
		}
		steps, err := SetupSteps(exp)
		if err != nil {
			t.Errorf("%s: %v", task.ID, err)
			continue
		}
		for _, s := range steps {
			if s.Request != nil && strings.Contains(string(s.Request.Body), "«") {
				t.Errorf("%s: placeholder left in %s", task.ID, s.Request.Body)
			}
		}
	}
}

func TestSetupStepsShapes(t *testing.T) {
	task, err := ParseTask("x/ChimeraX/T.json", []byte(`{"type":"ChimeraX","steps":5,"instruction":"i","initialize":[
		{"func":"execute","command":["rm","-f","a b"]},
		{"func":"launch","command":"chimerax --cmd 'x'","shell":true,"wait":2},
		{"func":"touch","path":"/tmp/it's","text":"a'b"},
		{"func":"open","name":"2olx"},{"func":"turn","axis":"y","angle":1.5},{"func":"clear_log"},
		{"func":"color","style":"rainbow"},{"func":"opt","depth":6},{"func":"append","path":"/p","content":"c"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := SetupSteps(task)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		req    string
		accept Accept
	}{
		{`POST guest /setup/execute {"command":["rm","-f","a b"],"shell":false}`, AcceptStatus},
		{`POST guest /setup/launch {"command":"chimerax --cmd 'x'","shell":true}`, AcceptStatus},
		{`POST guest /write {"path":"/tmp/it's","content":"a'b"}`, AcceptOK},
		{`POST guest /chimerax/run {"command":"open 2olx"}`, AcceptChimeraX},
		{`POST guest /chimerax/run {"command":"turn y 1.5"}`, AcceptChimeraX},
		{`POST guest /chimerax/run {"command":"log clear"}`, AcceptChimeraX},
		{`POST guest /chimerax/run {"command":"rainbow"}`, AcceptChimeraX},
		{`POST guest /opt {"depth":6}`, AcceptStatus},
		{`POST guest /append {"path":"/p","content":"c"}`, AcceptStatus},
	}
	if len(steps) != len(want) {
		t.Fatalf("%d steps, want %d: %+v", len(steps), len(want), steps)
	}
	for i, w := range want {
		s := steps[i]
		got := s.Request.String() + " " + string(s.Request.Body)
		if got != w.req || s.Accept != w.accept || s.Request.ContentType != "application/json" {
			t.Errorf("step %d = %s (%v, %q), want %s (%v)", i, got, s.Accept, s.Request.ContentType, w.req, w.accept)
		}
	}
	if steps[1].Wait.Seconds() != 2 {
		t.Errorf("launch wait = %v", steps[1].Wait)
	}
}

func TestCheckReply(t *testing.T) {
	cases := []struct {
		accept Accept
		body   string
		ok     bool
	}{
		{AcceptStatus, "anything", true},
		{AcceptOK, "OK", true},
		{AcceptOK, "ERROR", false},
		{AcceptOK, "OK\n", false},
		{AcceptChimeraX, `{"log messages": {"note": []}, "error": null}`, true},
		{AcceptChimeraX, `{"log messages": {"note": ["x"]}, "error": {"type": "UserError", "message": "Unknown command: frob"}}`, false},
		{AcceptChimeraX, `<html>`, false},
	}
	for _, c := range cases {
		t.Run(c.accept.String()+"/"+c.body, func(t *testing.T) {
			err := SetupStep{Accept: c.accept}.CheckReply([]byte(c.body))
			if (err == nil) != c.ok {
				t.Errorf("CheckReply = %v, want ok=%v", err, c.ok)
			}
		})
	}
}
