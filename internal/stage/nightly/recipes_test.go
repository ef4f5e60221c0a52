package nightly

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/codapipe/codapipe/internal/testkit/servertest"
	"go.yaml.in/yaml/v3"
)

// Issue 36, acceptance 2: the deployment recipes in deploy/ (the files
// docs/operations.md shows) run as written. Each is read from its file and
// run the way its runner runs it — the cron line by /bin/sh with cron's
// bare environment and the env file sourced as the line says, the systemd
// units' ExecStart with their EnvironmentFile and Environment (parsed as
// systemd parses them), WorkingDirectory and a non-root User, the
// CronJob's container command with its working directory, environment and
// non-root user — on the simulator: the production values of the env file
// that need real models, VMs or a NATS cluster are replaced (and named in
// the test), every other line is used as shipped. MinIO is started from
// its unit and the night's bucket is created by codapipe
// (CODAPIPE_CREATE_BUCKET). The long-running worker units must answer
// /readyz and stop cleanly on SIGTERM.
func TestAcceptRecipes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the recipes are for Linux hosts")
	}
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	deploy := filepath.Join(repo, "deploy")
	// A folder every user can traverse: the units run as a non-root user.
	root, err := os.MkdirTemp("", "codapipe-recipes-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin")
	build := exec.Command(goBinary(), "build", "-trimpath", "-ldflags=-s -w", "-o", bin+"/", "./cmd/nightly", "./cmd/judge", "./cmd/advantage", "./cmd/codasim")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tasks := filepath.Join(root, "tasks")
	if err := simtasks.Write(tasks, "KAlgebra/S01"); err != nil {
		t.Fatal(err)
	}
	if err := chmodTree(tasks, 0o755, 0o644); err != nil {
		t.Fatal(err)
	}

	shipped := readEnvFile(t, filepath.Join(deploy, "codapipe.env"))
	checkEnvDocumented(t, repo, shipped)
	// The simulated night: these lines replace the ones that need a real
	// cluster, models and VMs.
	sim := func(store map[string]string) map[string]string {
		env := map[string]string{}
		for k, v := range shipped {
			switch k {
			case "NATS_URL", "NATS_CREDS", "CODAPIPE_REPLICAS", "CODAPIPE_POOL",
				"CODAPIPE_PLANNER_URL", "CODAPIPE_PLANNER_MODEL", "CODAPIPE_EXECUTOR_URL", "CODAPIPE_EXECUTOR_MODEL", "CODAPIPE_JUDGE",
				"CODAPIPE_STORE", "CODAPIPE_SHARDS", "AWS_ENDPOINT_URL":
				continue // replaced below, or the embedded defaults
			}
			env[k] = v
		}
		for k, v := range map[string]string{"CODAPIPE_SIM": "true", "CODAPIPE_VMS": "2", "CODAPIPE_SAMPLES": "1", "CODAPIPE_GROUP": "2",
			"CODAPIPE_TIME_SCALE": "0.0005", "CODAPIPE_NIGHTLY_APPS": "KAlgebra", "CODAPIPE_NIGHTLY_ROLLOUT_ARGS": "--tasks " + tasks} {
			env[k] = v
		}
		for k, v := range store {
			env[k] = v
		}
		return env
	}
	today := time.Now().UTC().Format(time.DateOnly)

	t.Run("cron", func(t *testing.T) {
		t.Parallel()
		dirs := mkdirs(t, root, "cron-home", "cron-data", "cron-log")
		home, data, logs := dirs[0], dirs[1], dirs[2]
		envFile := writeEnvFile(t, filepath.Join(root, "cron.env"), sim(map[string]string{"CODAPIPE_DATA": data}))
		line := cronCommand(t, filepath.Join(deploy, "cron", "codapipe-nightly"))
		line = strings.NewReplacer("/etc/codapipe/codapipe.env", envFile, "/opt/codapipe/bin", bin, "/var/log/codapipe", logs).Replace(line)
		cmd := exec.Command("/bin/sh", "-c", line)
		cmd.Dir, cmd.Env = home, []string{"HOME=" + home, "LOGNAME=codapipe", "PATH=/usr/bin:/bin", "SHELL=/bin/sh"} // cron's environment
		runJob(t, cmd, 4*time.Minute, filepath.Join(logs, "nightly.log"))
		mustExist(t, filepath.Join(data, "nightly", today, "summary.json"))
		if _, err := os.Stat(filepath.Join(home, ".codapipe")); err == nil {
			t.Errorf("the night wrote into $HOME/.codapipe: the env file's CODAPIPE_DATA was not exported")
		}
	})

	t.Run("systemd", func(t *testing.T) {
		t.Parallel()
		// MinIO from its unit, with its env file.
		mu := readUnit(t, filepath.Join(deploy, "systemd", "minio.service"))
		minioBin, err := miniotest.Binary()
		if err != nil {
			servertest.Binary(t, miniotest.EnvBinary, "minio", "MinIO") // skips, or fails under CI
		}
		addrs, err := servertest.FreeAddrs(4)
		if err != nil {
			t.Fatal(err)
		}
		dirs := mkdirs(t, root, "minio", "systemd-data")
		minioData, data := dirs[0], dirs[1]
		minioEnv := readEnvFile(t, filepath.Join(deploy, "minio.env"))
		if minioEnv["MINIO_ROOT_USER"] != shipped["AWS_ACCESS_KEY_ID"] || minioEnv["MINIO_ROOT_PASSWORD"] != shipped["AWS_SECRET_ACCESS_KEY"] {
			t.Errorf("minio.env's root user and password are not codapipe.env's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
		}
		ms := mu.command(t, strings.NewReplacer("/usr/local/bin/minio", minioBin, "/var/lib/minio", minioData,
			"127.0.0.1:9000", addrs[0], "127.0.0.1:9001", addrs[1]).Replace, minioEnv, false)
		startService(t, ms, "MinIO", "http://"+addrs[0]+"/minio/health/live")

		// The night from its unit: S3 as the env file says (its bucket does not exist yet).
		nu := readUnit(t, filepath.Join(deploy, "systemd", "codapipe-nightly.service"))
		env := sim(map[string]string{"CODAPIPE_STORE": shipped["CODAPIPE_STORE"], "CODAPIPE_SHARDS": shipped["CODAPIPE_SHARDS"],
			"AWS_ENDPOINT_URL": "http://" + addrs[0]})
		paths := strings.NewReplacer("/var/lib/codapipe", data, "/opt/codapipe/bin", bin)
		for k, v := range env {
			env[k] = paths.Replace(v)
		}
		night := nu.command(t, paths.Replace, env, true)
		runJob(t, night, 4*time.Minute, "")
		mustExist(t, filepath.Join(data, "nightly-last.json"))

		// The workers from theirs, on a NATS server of the test.
		ns := natstest.Start(t)
		js := natstest.JetStream(t, ns.URL())
		for i, w := range []string{"judge", "advantage"} {
			u := readUnit(t, filepath.Join(deploy, "systemd", "codapipe-"+w+".service"))
			wdata := mkdirs(t, root, w+"-data")[0]
			port := map[string]string{"judge": "127.0.0.1:9465", "advantage": "127.0.0.1:9466"}[w]
			repl := strings.NewReplacer("/var/lib/codapipe-"+w, wdata, "/opt/codapipe/bin", bin, port, addrs[2+i])
			wenv := sim(map[string]string{"NATS_URL": ns.URL(), "CODAPIPE_DATA": wdata, "CODAPIPE_STORE": shipped["CODAPIPE_STORE"],
				"CODAPIPE_SHARDS": shipped["CODAPIPE_SHARDS"], "AWS_ENDPOINT_URL": "http://" + addrs[0]})
			if u.service["Restart"] != "on-failure" || u.service["Type"] != "simple" {
				t.Errorf("%s: Type=%s Restart=%s, want a simple service restarted on failure", w, u.service["Type"], u.service["Restart"])
			}
			cmd := u.command(t, repl.Replace, wenv, true)
			out := startService(t, cmd, w, "http://"+addrs[2+i]+"/readyz")
			// Stopped while it waits for work, as systemctl stop mostly
			// finds it (a stop during its start must end well too:
			// service.WorkerStopped).
			stream := map[string]string{"judge": bus.StreamName(bus.Raw), "advantage": bus.StreamName(bus.Judged)}[w]
			poll.Until(t, w+" fetching", time.Minute, func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				return natstest.Fetching(ctx, js, stream)
			})
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := waitExit(cmd, time.Minute); err != nil {
				t.Errorf("%s worker after SIGTERM: %v\n%s", w, err, tail(out.String(), 30))
			}
		}
	})

	t.Run("kubernetes", func(t *testing.T) {
		t.Parallel()
		var cj struct {
			Spec struct {
				JobTemplate struct {
					Spec struct {
						Template struct {
							Spec struct {
								SecurityContext struct {
									RunAsUser int `yaml:"runAsUser"`
								} `yaml:"securityContext"`
								Containers []struct {
									Command    []string `yaml:"command"`
									Args       []string `yaml:"args"`
									WorkingDir string   `yaml:"workingDir"`
									Env        []struct{ Name, Value string }
								} `yaml:"containers"`
							} `yaml:"spec"`
						} `yaml:"template"`
					} `yaml:"spec"`
				} `yaml:"jobTemplate"`
			} `yaml:"spec"`
		}
		body, err := os.ReadFile(filepath.Join(deploy, "kubernetes", "nightly-cronjob.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(body, &cj); err != nil {
			t.Fatal(err)
		}
		pod := cj.Spec.JobTemplate.Spec.Template.Spec
		if len(pod.Containers) != 1 || pod.SecurityContext.RunAsUser == 0 {
			t.Fatalf("want one container run as a non-root user: %+v", pod)
		}
		c := pod.Containers[0]
		data := mkdirs(t, root, "k8s-data")[0]
		paths := strings.NewReplacer("/opt/codapipe/bin", bin, "/data", data)
		env := sim(nil) // the ConfigMap and Secret: the env file's lines
		for _, e := range c.Env {
			env[e.Name] = paths.Replace(e.Value)
		}
		argv := append(slices.Clone(c.Command), c.Args...)
		for i := range argv {
			argv[i] = paths.Replace(argv[i])
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = paths.Replace(c.WorkingDir), envList(env)
		asUser(t, cmd, uint32(pod.SecurityContext.RunAsUser), data)
		runJob(t, cmd, 4*time.Minute, "")
		mustExist(t, filepath.Join(data, "nightly", today, "summary.json"))
	})
}

// unit is a systemd unit file: its [Service] keys (the last value of
// each, Environment= collected in order).
type unit struct {
	path        string
	service     map[string]string
	environment []string
}

// readUnit reads the [Service] section of a unit file.
func readUnit(t *testing.T, path string) *unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := &unit{path: path, service: map[string]string{}}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
			continue
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", path, line)
		}
		if section != "Service" {
			continue
		}
		if k == "Environment" {
			u.environment = append(u.environment, v)
			continue
		}
		u.service[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ExecStart", "WorkingDirectory", "User"} {
		if u.service[k] == "" {
			t.Errorf("%s: no %s=", path, k)
		}
	}
	return u
}

// command is the unit's ExecStart as systemd runs it: paths mapped by
// repl, the environment from Environment= then the EnvironmentFile (given
// here as env: its variables override Environment='s, as systemd's do),
// in WorkingDirectory, as a non-root user when asUser (and the test runs
// as root).
func (u *unit) command(t *testing.T, repl func(string) string, env map[string]string, nonRoot bool) *exec.Cmd {
	t.Helper()
	argv := strings.Fields(repl(u.service["ExecStart"]))
	// What systemd gives every service: its PATH, and with User= the
	// user's HOME (here: the working directory).
	all := map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": repl(u.service["WorkingDirectory"])}
	for _, e := range u.environment {
		k, v, _ := strings.Cut(e, "=")
		all[k] = repl(v)
	}
	for k, v := range env {
		all[k] = v
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = repl(u.service["WorkingDirectory"]), envList(all)
	if cmd.Dir == u.service["WorkingDirectory"] {
		t.Fatalf("%s: WorkingDirectory %s not mapped into the test", u.path, cmd.Dir)
	}
	if nonRoot {
		asUser(t, cmd, 65534, cmd.Dir) // nobody, as User= would be
	}
	return cmd
}

// asUser runs cmd as uid (its StateDirectory, dir, given to it) when the
// test runs as root; otherwise as the test's own user, which is not root.
func asUser(t *testing.T, cmd *exec.Cmd, uid uint32, dir string) {
	t.Helper()
	if os.Getuid() != 0 {
		return
	}
	if err := os.Chown(dir, int(uid), int(uid)); err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
}

// readEnvFile parses an env file as systemd's EnvironmentFile= does
// (KEY=VALUE lines, # and ; comments, optional quotes, no expansion) and
// checks every line is also valid for a POSIX shell's "set -a; . FILE".
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for i, line := range strings.Split(string(body), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t") || strings.HasPrefix(k, "export ") {
			t.Errorf("%s:%d: %q is not KEY=VALUE", path, i+1, line)
			continue
		}
		if strings.ContainsAny(v, " \t$`\"'\\;&|<>()") {
			t.Errorf("%s:%d: %s's value needs quoting, which systemd and sh read differently", path, i+1, k)
		}
		env[k] = v
	}
	// The shell reads the same variables.
	cmd := exec.Command("/bin/sh", "-c", `set -a && . "$1" && set +a && env`, "sh", path)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh . %s: %v", path, err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	for k, v := range env {
		if got[k] != v {
			t.Errorf("%s: the shell reads %s=%q, systemd %q", path, k, got[k], v)
		}
	}
	return env
}

// checkEnvDocumented: every variable of the shipped env file is one the
// docs name (a flag's fallback, or a storage variable).
func checkEnvDocumented(t *testing.T, repo string, env map[string]string) {
	t.Helper()
	var docs strings.Builder
	for _, f := range []string{"docs/operations.md", "docs/storage.md"} {
		b, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	for k := range env {
		if !strings.Contains(docs.String(), k) {
			t.Errorf("deploy/codapipe.env sets %s, which no doc names", k)
		}
	}
}

// writeEnvFile writes env as an env file (KEY=VALUE lines) readable by
// every user, and returns its path.
func writeEnvFile(t *testing.T, path string, env map[string]string) string {
	t.Helper()
	var b strings.Builder
	for _, kv := range envList(env) {
		b.WriteString(kv + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func envList(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// cronCommand returns the command of the crontab's one job line (after
// its five schedule fields), with cron's "\%" unescaped.
func cronCommand(t *testing.T, path string) string {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, line := range strings.Split(string(body), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.Contains(strings.SplitN(line, " ", 2)[0], "=") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("%s: %q is not a crontab job line", path, line)
		}
		rest := line
		for range 5 {
			rest = strings.TrimSpace(strings.TrimLeft(rest, "0123456789*/,-"))
		}
		if strings.Contains(strings.ReplaceAll(rest, `\%`, ""), "%") {
			t.Errorf("%s: an unescaped %% (cron ends the command there)", path)
		}
		cmds = append(cmds, strings.ReplaceAll(rest, `\%`, "%"))
	}
	if len(cmds) != 1 {
		t.Fatalf("%s: %d job lines, want 1", path, len(cmds))
	}
	return cmds[0]
}

// mkdirs makes folders under root, writable by every user (a unit's
// StateDirectory is its user's), and returns their paths.
func mkdirs(t *testing.T, root string, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		d := filepath.Join(root, n)
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// runJob runs a job to its end within d and fails the test unless it
// exits 0; its output (or the log file it writes) is shown on failure.
func runJob(t *testing.T, cmd *exec.Cmd, d time.Duration, logFile string) {
	t.Helper()
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := waitExit(cmd, d)
	if err != nil {
		if logFile != "" {
			b, _ := os.ReadFile(logFile)
			out.Write(b)
		}
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, tail(out.String(), 40))
	}
}

// startService starts a long-running process and waits until url answers
// 200; it is killed at the end of the test if still running.
func startService(t *testing.T, cmd *exec.Cmd, what, url string) *lockedBuffer {
	t.Helper()
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	c := &http.Client{Timeout: 2 * time.Second}
	defer func() {
		if t.Failed() {
			t.Logf("%s (%s):\n%s", what, strings.Join(cmd.Args, " "), tail(out.String(), 40))
		}
	}()
	poll.Until(t, what+" answering 200 at "+url, time.Minute, func() bool {
		resp, err := c.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return out
}

// waitExit waits for cmd within d (killing it after that) and returns its
// exit error.
func waitExit(cmd *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // ends when the process does
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("still running after %v: killed", d)
	}
}

func mustExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the job did not write %s: %v", path, err)
	}
}

func chmodTree(dir string, dirMode, fileMode os.FileMode) error {
	return filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return os.Chmod(p, dirMode)
		}
		return os.Chmod(p, fileMode)
	})
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

func goBinary() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}
