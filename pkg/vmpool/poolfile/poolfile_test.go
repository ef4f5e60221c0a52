package poolfile

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/docker"
	"github.com/codapipe/codapipe/pkg/vmpool/hosts"
	"github.com/codapipe/codapipe/pkg/vmpool/simvm"
	"github.com/codapipe/codapipe/pkg/vmpool/vmware"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		check func(t *testing.T, c Config)
	}{
		{"minimal sim", "backend: sim\nsim:\n  vms:\n    - url: http://127.0.0.1:5001\n", func(t *testing.T, c Config) {
			if c.Backend != "sim" || len(c.Sim.VMs) != 1 || c.Sim.VMs[0].URL != "http://127.0.0.1:5001" {
				t.Fatalf("%+v", c)
			}
		}},
		{"durations", `backend: sim
idle_check: off
retry_wait: 2
lock_retry: 1.5
timeouts: {start: 90s, reset: 1h30m, health: 45, stop: 250ms}
sim: {vms: [{url: "http://127.0.0.1:1"}]}
`, func(t *testing.T, c Config) {
			want := vmpool.Timeouts{Start: 90 * time.Second, Reset: 90 * time.Minute, Health: 45 * time.Second, Stop: 250 * time.Millisecond}
			if c.Pool.Timeouts != want || c.Pool.IdleCheck != -1 || c.Pool.RetryWait != 2*time.Second || c.Pool.LockRetry != 1500*time.Millisecond {
				t.Fatalf("%+v", c)
			}
		}},
		{"json", "{\n\t\"backend\": \"guest\",\n\t\"quarantine_after\": 5,\n\t\"guest\": {\"vms\": [{\"url\": \"10.0.0.5\"}]}\n}\n", func(t *testing.T, c Config) {
			if c.Backend != "guest" || c.Pool.QuarantineAfter != 5 || c.Guest.VMs[0].URL != "10.0.0.5" {
				t.Fatalf("%+v", c)
			}
		}},
		{"docker env numbers become strings", "backend: docker\ndocker:\n  count: 2\n  env: {CPU_CORES: 8, RAM_SIZE: 16G}\n  ports: [5000, 8006]\n", func(t *testing.T, c Config) {
			if c.Docker.Env["CPU_CORES"] != "8" || c.Docker.Count != 2 || len(c.Docker.Ports) != 2 {
				t.Fatalf("%+v", c.Docker)
			}
		}},
		{"aliases", `backend: vmware
timeouts: &t {start: 1m, reset: 1m}
vmware:
  snapshot: s
  vms:
    - {vmx: /a/a.vmx}
    - {vmx: /b/b.vmx, snapshot: other}
`, func(t *testing.T, c Config) {
			if c.Pool.Timeouts.Start != time.Minute || c.VMware.VMs[1].Snapshot != "other" || c.VMware.VMs[0].Snapshot != "" {
				t.Fatalf("%+v", c)
			}
		}},
		{"nulls are defaults", "backend: sim\nid: ~\ntimeouts:\nsim:\n  vms: [{url: 'http://a:1'}]\n", func(t *testing.T, c Config) {
			if c.Pool.ID != "" || c.Pool.Timeouts != (vmpool.Timeouts{}) {
				t.Fatalf("%+v", c)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("pool.yaml", []byte(tc.input))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestParsePoolFileErrors(t *testing.T) {
	const vm = "vmware:\n  snapshot: s\n  vms:\n    - vmx: /a/a.vmx\n"
	for _, tc := range []struct {
		name, input string
		want        string // the whole first line of the error, or a regexp when it starts with ^
	}{
		{"empty", "  \n", `pool.yaml: empty file; want at least "backend: sim|guest|vmware|docker" and that backend's section`},
		{"not yaml", "backend: sim\n  vms: [\n", `^pool\.yaml:2:1: not valid YAML: `},
		{"tabs", "backend: sim\nsim:\n\tvms: []\n", `^pool\.yaml:3:1: not valid YAML: `},
		{"two documents", "backend: sim\n---\nbackend: guest\n", "pool.yaml:2:1: a second YAML document; want one pool per file"},
		{"a list at the top", "- backend: sim\n", `pool.yaml:1:1: want a mapping (field: value lines), got a list`},
		{"unknown field", "backend: sim\nquarantine_afer: 3\n", "pool.yaml:2:1: quarantine_afer: unknown field; want one of: backend, id, quarantine_after, lock_dir, lock_retry, idle_check, retry_wait, timeouts, after_revert, sim, guest, vmware, docker"},
		{"unknown nested field", "backend: vmware\nvmware:\n  snapshot: s\n  vms:\n    - vmx: /a/a.vmx\n      vmxx: x\n", "pool.yaml:6:7: vmware.vms[0].vmxx: unknown field; want one of: id, vmx, snapshot, guest_port, ip"},
		{"not a number", "backend: sim\nquarantine_after: three\n", `pool.yaml:2:19: quarantine_after: "three": want a whole number`},
		{"float for int", "backend: sim\nquarantine_after: 2.5\n", `pool.yaml:2:19: quarantine_after: "2.5": want a whole number`},
		{"not a duration", "backend: sim\ntimeouts:\n  reset: ten minutes\n", `pool.yaml:3:10: timeouts.reset: "ten minutes": want a duration such as 30s, 5m or 1h30m (a plain number is seconds)`},
		{"duration as a list", "backend: sim\ntimeouts:\n  reset: [1, 2]\n", `pool.yaml:3:10: timeouts.reset: want a duration such as 30s, 5m or 1h30m (a plain number is seconds), got a list`},
		{"mapping expected", "backend: sim\ntimeouts: 5m\n", `pool.yaml:2:11: timeouts: want a mapping (field: value lines), got "5m"`},
		{"list expected", "backend: sim\nsim:\n  vms: http://a\n", `pool.yaml:3:8: sim.vms: want a list (- item lines, or [a, b]), got "http://a"`},
		{"yes is not a bool", "backend: vmware\n" + vm + "  stop_on_close: yes\n", `pool.yaml:6:18: vmware.stop_on_close: "yes": want true or false`},
		{"no backend", "sim:\n  vms: [{url: 'http://a:1'}]\n", "pool.yaml:1:1: backend: missing; want one of sim, guest, vmware, docker"},
		{"unknown backend", "backend: kvm\n", `pool.yaml:1:10: backend: "kvm": want one of sim, guest, vmware, docker`},
		{"section missing", "backend: docker\n", "pool.yaml:1:1: docker: missing; backend is docker, so its section is needed (see docs/vmpool.md)"},
		{"other section", "backend: docker\ndocker: {count: 1}\n" + vm, `pool.yaml:3:1: vmware: section given but backend is "docker"; remove it or set backend: vmware`},
		{"vmx missing", "backend: vmware\nvmware:\n  snapshot: s\n  vms:\n    - vmx: /a/a.vmx\n    - id: b\n", "pool.yaml:6:7: vmware.vms[1].vmx: missing; want the path of the VM's .vmx file"},
		{"snapshot missing", "backend: vmware\nvmware:\n  vms:\n    - vmx: /a/a.vmx\n", "pool.yaml:4:7: vmware.vms[0].snapshot: missing; want the name of the snapshot to revert to (here or as vmware.snapshot)"},
		{"bad vmrun type", "backend: vmware\n" + vm + "  type: hyperv\n", `pool.yaml:6:9: vmware.type: "hyperv": want one of ws, fusion, player, server, server1, esx, vc (vmrun -T)`},
		{"bad port", "backend: vmware\n" + vm + "  guest_port: 70000\n", "pool.yaml:6:15: vmware.guest_port: 70000: want a port number, 1-65535"},
		{"docker count", "backend: docker\ndocker:\n  image: x\n", "pool.yaml:2:1: docker.count: 0: want the number of containers to run, 1 to 256"},
		{"docker count too large", "backend: docker\ndocker:\n  count: 20000000\n", "pool.yaml:3:10: docker.count: 20000000: want the number of containers to run, 1 to 256"},
		{"docker host ip", "backend: docker\ndocker: {count: 1, host_ip: localhost}\n", `pool.yaml:2:29: docker.host_ip: "localhost": want an IP address such as 127.0.0.1`},
		{"negative timeout", "backend: sim\ntimeouts: {health: -5s}\nsim: {vms: [{url: 'http://a:1'}]}\n", "pool.yaml:2:20: timeouts.health: -5s: want a positive duration: every operation needs a deadline"},
		{"bad url", "backend: guest\nguest:\n  vms:\n    - url: ftp://h\n", `pool.yaml:4:12: guest.vms[0].url: "ftp://h": scheme "ftp", want http or https (want a URL such as http://10.0.0.5:5000)`},
		{"bad id", "id: my pool\nbackend: sim\nsim: {vms: [{url: 'http://a:1'}]}\n", `pool.yaml:1:5: id: "my pool": want letters, digits, '.', '_' and '-', starting with a letter or digit`},
		{"no vms", "backend: guest\nguest: {vms: []}\n", "pool.yaml:2:14: guest.vms: empty; want at least one machine ({url: http://HOST:5000})"},
		{"bad command env", "backend: vmware\n" + vm + "  command_env: [DISPLAY]\n", `pool.yaml:6:17: vmware.command_env[0]: "DISPLAY": want NAME=value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("pool.yaml", []byte(tc.input))
			if err == nil {
				t.Fatal("no error")
			}
			first := strings.SplitN(err.Error(), "\n", 2)[0]
			if strings.HasPrefix(tc.want, "^") {
				if !regexp.MustCompile(tc.want).MatchString(first) {
					t.Fatalf("error %q does not match %q", first, tc.want)
				}
			} else if first != tc.want {
				t.Fatalf("error\n  %s\nwant\n  %s", first, tc.want)
			}
			var ce *vmpool.ConfigError
			if !errors.As(err, &ce) || ce.File != "pool.yaml" {
				t.Fatalf("error %T does not carry the file", err)
			}
		})
	}
}

// Every error of a file is reported, not only the first.
func TestParsePoolFileAllErrors(t *testing.T) {
	_, err := Parse("p.yaml", []byte("backend: docker\nquarantine_after: -1\ndocker:\n  count: 0\n  host_ip: x\n"))
	msg := err.Error()
	for _, want := range []string{"p.yaml:2:19: quarantine_after", "p.yaml:4:10: docker.count", "p.yaml:5:12: docker.host_ip"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q missing from:\n%s", want, msg)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "chimerax-pool.yaml")
	data := "backend: vmware\nlock_dir: locks\nvmware:\n  snapshot: s\n  vms:\n    - vmx: vms/a.vmx\n    - vmx: /abs/b.vmx\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pool.ID != "chimerax-pool" || c.Pool.LockDir != filepath.Join(dir, "locks") ||
		c.VMware.VMs[0].VMX != filepath.Join(dir, "vms/a.vmx") || c.VMware.VMs[1].VMX != "/abs/b.vmx" {
		t.Fatalf("%+v %+v", c, c.VMware.VMs)
	}

	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	_ = os.WriteFile(big, make([]byte, MaxSize+1), 0o644)
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "big.yaml: larger than") {
		t.Fatalf("big file: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(bad, []byte("backend: vmware\nvmware:\n  vms:\n    - vmx: a.vmx\n"), 0o644)
	if _, err := Load(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":4:7: vmware.vms[0].snapshot") {
		t.Fatalf("bad file: %v", err)
	}
}

// docExamples returns the pool files in docs/vmpool.md (yaml blocks that
// start with "# pool file").
func docExamples(t testing.TB) map[string]string {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "vmpool.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		if strings.HasPrefix(block[1], "# pool file") {
			m := regexp.MustCompile(`(?m)^backend: (\w+)`).FindStringSubmatch(block[1])
			if m == nil {
				t.Fatalf("example without a backend:\n%s", block[1])
			}
			out[m[1]] = block[1]
		}
	}
	return out
}

// The examples in docs/vmpool.md parse, and set every field of their
// backend's section (so the doc shows them all).
func TestPoolFileDocExamples(t *testing.T) {
	ex := docExamples(t)
	for _, b := range []string{simvm.Name, hosts.Name, vmware.Name, docker.Name} {
		text, ok := ex[b]
		if !ok {
			t.Errorf("docs/vmpool.md has no example for %s", b)
			continue
		}
		c, err := Parse("docs/vmpool.md("+b+")", []byte(text))
		if err != nil {
			t.Errorf("%s example: %v", b, err)
			continue
		}
		if c.Backend != b {
			t.Errorf("%s example has backend %s", b, c.Backend)
		}
		var section any
		switch b {
		case simvm.Name:
			section = simvm.Config{}
		case hosts.Name:
			section = hosts.Config{}
		case vmware.Name:
			section = vmware.Config{}
		case docker.Name:
			section = docker.Config{}
		}
		var fields []string
		yamlFields(reflect.TypeOf(section), nil, map[string][]int{}, &fields)
		for _, f := range fields {
			if !regexp.MustCompile(`(?m)^\s+-?\s*` + f + `:`).MatchString(text) {
				t.Errorf("%s example does not show %s.%s", b, b, f)
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, text := range docExamples(f) {
		f.Add([]byte(text))
	}
	f.Add([]byte("backend: sim\nsim: {vms: [{url: 'http://a:1'}]}\n"))
	f.Add([]byte("{\"backend\": \"docker\", \"docker\": {\"count\": 2, \"env\": {\"A\": 1}}}"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("backend: vmware\nvmware:\n  vms:\n    - vmx: x\n"))
	f.Add([]byte("timeouts: {start: 1e400}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
		if _, err := NewBackend(c, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatalf("parsed config makes no backend: %v", err)
		}
	})
}

func TestParseAfterRevert(t *testing.T) {
	for in, want := range map[string]string{
		"":                    "",
		"after_revert: off\n": "off",
		"after_revert: /bin/bash /home/user/x.sh\n":                       "/bin/bash /home/user/x.sh",
		"after_revert: \"nmcli networking off && nmcli networking on\"\n": "nmcli networking off && nmcli networking on",
	} {
		cfg, err := Parse("pool.yaml", []byte("backend: sim\n"+in+"sim:\n  vms:\n    - url: http://127.0.0.1:5000\n"))
		if err != nil || cfg.Pool.AfterRevert != want {
			t.Errorf("%q: after_revert %q, %v; want %q", in, cfg.Pool.AfterRevert, err, want)
		}
	}
}
