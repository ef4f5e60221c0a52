package nightly

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/infra/syncio"
	"github.com/codapipe/codapipe/internal/sim"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/stage/judge"
	"github.com/codapipe/codapipe/internal/stage/rollout"
	"github.com/codapipe/codapipe/internal/stage/sft"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
)

// guarded is a simulated model endpoint that answers only requests with
// its credentials (the whole Authorization header), so a test knows they
// were used.
type guarded struct {
	want         string
	h            http.Handler
	ok, rejected atomic.Int64
}

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != g.want {
		g.rejected.Add(1)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	g.ok.Add(1)
	g.h.ServeHTTP(w, r)
}

func bearer(key string) string { return "Bearer " + key }

func basic(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

// serveGuarded serves h behind want; the URL is http://host/v1, with
// user:pw@ when given.
func serveGuarded(t *testing.T, h http.Handler, want, userinfo string) (*guarded, string) {
	g := &guarded{want: want, h: h}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	u := srv.URL + "/v1"
	if userinfo != "" {
		u = strings.Replace(u, "http://", "http://"+userinfo+"@", 1)
	}
	return g, u
}

// secretSet are the secrets a sub-case gave, with where they went.
type secretSet map[string]string // secret → how it was given

func (s secretSet) add(how, secret string) string {
	s[secret] = how
	return secret
}

// addBasic adds a user:password pair and its basic-auth encoding.
func (s secretSet) addBasic(how, user, pw string) {
	s.add(how, pw)
	s.add(how+" (basic auth, base64)", base64.StdEncoding.EncodeToString([]byte(user+":"+pw)))
}

// scan fails the test for every secret of s found in data.
func (s secretSet) scan(t *testing.T, where string, data []byte) {
	t.Helper()
	for secret, how := range s {
		if i := bytes.Index(data, []byte(secret)); i >= 0 {
			lo, hi := max(i-80, 0), min(i+len(secret)+40, len(data))
			t.Errorf("the secret of %s is in %s: …%q…", how, where, data[lo:hi])
		}
	}
}

// scanDir scans every file under dir.
func (s secretSet) scanDir(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		s.scan(t, path, b)
		return nil
	})
	if err != nil {
		t.Errorf("scan %s: %v", dir, err)
	}
	return n
}

// scanStreams reads every message of every stream (the key-value buckets
// are streams too) and scans its subject, headers and data.
func (s secretSet) scanStreams(t *testing.T, ctx context.Context, url string, opts ...nats.Option) int {
	t.Helper()
	js := natstest.JetStream(t, url, opts...)
	n := 0
	streams := js.ListStreams(ctx)
	for info := range streams.Info() {
		st, err := js.Stream(ctx, info.Config.Name)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue // deleted
			}
			n++
			var h bytes.Buffer
			for k, vs := range m.Header {
				fmt.Fprintf(&h, "%s: %s\n", k, strings.Join(vs, ","))
			}
			s.scan(t, fmt.Sprintf("stream %s message %d (%s)", info.Config.Name, seq, m.Subject), append(append([]byte(m.Subject+"\n"), h.Bytes()...), m.Data...))
		}
	}
	if err := streams.Err(); err != nil {
		t.Fatalf("list streams: %v", err)
	}
	return n
}

// scanBucket reads every object of every bucket of a MinIO server.
func (s secretSet) scanBucket(t *testing.T, ctx context.Context, srv *miniotest.Server) int {
	t.Helper()
	c := srv.Client(t)
	buckets, err := c.ListBuckets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range buckets {
		for obj := range c.ListObjects(ctx, b.Name, minio.ListObjectsOptions{Recursive: true, WithMetadata: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			o, err := c.GetObject(ctx, b.Name, obj.Key, minio.GetObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(o)
			o.Close()
			if err != nil {
				t.Fatal(err)
			}
			n++
			s.scan(t, "s3://"+b.Name+"/"+obj.Key, append([]byte(obj.Key+"\n"+fmt.Sprint(obj.UserMetadata)+"\n"), data...))
		}
	}
	return n
}

// run runs a command as its main function does, in this process (flags,
// environment, logs), and returns its exit status and everything it
// printed.
func run(ctx context.Context, cmd service.Command, args ...string) (int, []byte) {
	var out bytes.Buffer
	w := &syncio.Writer{W: &out}
	code := service.MainContext(ctx, cmd, args, w, w)
	return code, out.Bytes()
}

// nightCase is one way of giving the night its secrets.
type nightCase struct {
	name string
	// natsAuth configures the NATS server's one authentication method;
	// natsURL is the night's --nats for the server's URL; natsArgs are
	// more flags; natsOpts connect the test itself.
	natsAuth func(o *server.Options)
	natsURL  func(url string) string
	natsArgs []string
	natsOpts []nats.Option
	env      map[string]string
	// rollout and judge are the stages' flags; guards are the model
	// endpoints they must have called with their credentials.
	rollout, judge []string
	guards         []*guarded
	sec            secretSet
}

// models serves the simulated planner, executor and judge behind guards:
// planner and executor credentials given one way or the other (viaURL:
// user:password@ in the URL, else an API key, by flag for the planner
// and by environment for the executor), and two judges, one with URL
// credentials and one with the key (by flag, or by environment).
func (c *nightCase) models(t *testing.T, m *simmodels.Endpoints, plannerViaURL bool, judgeKeyByEnv bool) {
	tag := strings.ReplaceAll(c.name, " ", "")
	if plannerViaURL {
		pu, pp := "puser", "plannerpw-"+tag
		c.sec.addBasic("planner URL user:password", pu, pp)
		gp, purl := serveGuarded(t, m.Planner(), basic(pu, pp), pu+":"+pp)
		ek := c.sec.add("CODAPIPE_EXECUTOR_KEY", "sk-executor-"+tag)
		ge, eurl := serveGuarded(t, m.Executor(), bearer(ek), "")
		c.env["CODAPIPE_EXECUTOR_KEY"] = ek
		c.rollout = []string{"--planner-url", purl, "--executor-url", eurl}
		c.guards = append(c.guards, gp, ge)
	} else {
		pk := c.sec.add("--planner-key", "sk-planner-"+tag)
		gp, purl := serveGuarded(t, m.Planner(), bearer(pk), "")
		eu, ep := "euser", "executorpw-"+tag
		c.sec.addBasic("executor URL user:password", eu, ep)
		ge, eurl := serveGuarded(t, m.Executor(), basic(eu, ep), eu+":"+ep)
		c.rollout = []string{"--planner-url", purl, "--planner-key", pk, "--executor-url", eurl}
		c.guards = append(c.guards, gp, ge)
	}
	c.rollout = append(c.rollout, "--planner-model", simmodels.DefaultPlannerModel, "--executor-model", simmodels.DefaultExecutorModel)
	ju, jp := "juser", "judgepw-"+tag
	c.sec.addBasic("judge URL user:password", ju, jp)
	gj1, j1 := serveGuarded(t, m.Judge(), basic(ju, jp), ju+":"+jp)
	jk := c.sec.add("judge key", "sk-judge-"+tag)
	gj2, j2 := serveGuarded(t, m.Judge(), bearer(jk), "")
	c.judge = []string{"--judge", j1 + "=" + simmodels.DefaultJudgeModel, "--judge", j2 + "=" + simmodels.DefaultJudgeModel, "--votes", "2", "--no-early-exit", "--max-frames", "2"}
	if judgeKeyByEnv {
		c.env["CODAPIPE_JUDGE_KEY"] = jk
	} else {
		c.judge = append(c.judge, "--judge-key", jk)
	}
	c.guards = append(c.guards, gj1, gj2)
}

// s3Env gives the S3 keys by AWS_* or by MINIO_ROOT_* variables.
func (c *nightCase) s3Env(srv *miniotest.Server, minioVars bool) {
	c.env["AWS_REGION"] = miniotest.Region
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "MINIO_ENDPOINT", "MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "MINIO_ACCESS_KEY", "MINIO_SECRET_KEY", "AWS_ENDPOINT_URL_S3", "S3_ENDPOINT"} {
		c.env[k] = ""
	}
	if minioVars {
		c.env["MINIO_ENDPOINT"] = srv.Endpoint
		c.env["MINIO_ROOT_USER"] = c.sec.add("MINIO_ROOT_USER", srv.AccessKey)
		c.env["MINIO_ROOT_PASSWORD"] = c.sec.add("MINIO_ROOT_PASSWORD", srv.SecretKey)
		return
	}
	c.env["AWS_ENDPOINT_URL"] = srv.Endpoint
	c.env["AWS_ACCESS_KEY_ID"] = c.sec.add("AWS_ACCESS_KEY_ID", srv.AccessKey)
	c.env["AWS_SECRET_ACCESS_KEY"] = c.sec.add("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
}

// TestAcceptSecrets gives the pipeline every secret through every flag,
// environment variable and URL user information it accepts — the
// planner's, executor's and judges' API keys (flag and environment) and
// URL credentials (sent as basic authentication), the NATS user and
// password (in the URL, by environment), token and credentials file
// (nkey and JWT), the S3 keys (AWS_* and MINIO_ROOT_* variables) —
// against servers that require them (guarded simulated model endpoints,
// a NATS server with that one authentication method, MinIO), runs a
// whole night (rollout, judge, advantage, sftpack build and export to
// S3) per way of giving them, and finds none of them (nor the base64 of
// a user:password pair) in any file of the data folder or of the NATS
// store, any message of any stream or key-value bucket, any object in
// MinIO, or anything a command printed (logs at debug level, summaries,
// errors, help) — also not after calls that fail on purpose: an S3
// endpoint, a judge endpoint and a NATS URL with credentials that cannot
// be used, and a planner endpoint that cannot be reached (the judge's
// failures are recorded in the archive and stream).
func TestAcceptSecrets(t *testing.T) {
	tasks := filepath.Join(t.TempDir(), "tasks")
	if err := simtasks.Write(tasks, "ChimeraX/S03"); err != nil {
		t.Fatal(err)
	}
	mc := sim.DefaultWorldConfig().Models
	mc.Seed, mc.Clock = 1, fault.Clock{Scale: 0.0005}
	models, err := simmodels.New(mc)
	if err != nil {
		t.Fatal(err)
	}
	s3 := miniotest.Start(t)

	var cases []*nightCase
	{
		c := &nightCase{name: "nats url", env: map[string]string{}, sec: secretSet{}}
		nu, np := "nuser", "natspw-url-7f3c9e1d"
		c.sec.addBasic("NATS URL user:password", nu, np)
		c.natsAuth = func(o *server.Options) { o.Username, o.Password = nu, np }
		c.natsURL = func(u string) string { return strings.Replace(u, "nats://", "nats://"+nu+":"+np+"@", 1) }
		c.natsOpts = []nats.Option{nats.UserInfo(nu, np)}
		c.models(t, models, true, false)
		c.s3Env(s3, false)
		cases = append(cases, c)
	}
	{
		c := &nightCase{name: "nats token", env: map[string]string{}, sec: secretSet{}}
		tok := c.sec.add("NATS_TOKEN", "natstoken-5a5a5a5a")
		c.natsAuth = func(o *server.Options) { o.Authorization = tok }
		c.env["NATS_TOKEN"] = tok
		c.natsOpts = []nats.Option{nats.Token(tok)}
		c.models(t, models, false, true)
		c.s3Env(s3, true)
		cases = append(cases, c)
	}
	{
		c := &nightCase{name: "nats password", env: map[string]string{}, sec: secretSet{}}
		nu, np := "nuser2", c.sec.add("NATS_PASSWORD", "natspw-env-0c0ffee0")
		c.natsAuth = func(o *server.Options) { o.Username, o.Password = nu, np }
		c.env["NATS_USER"], c.env["NATS_PASSWORD"] = nu, np
		c.natsOpts = []nats.Option{nats.UserInfo(nu, np)}
		c.models(t, models, false, false)
		c.s3Env(s3, false)
		cases = append(cases, c)
	}
	{
		c := &nightCase{name: "nats creds", env: map[string]string{}, sec: secretSet{}}
		auth, creds, seed, userJWT := natsCreds(t)
		c.sec.add("NATS credentials file (nkey seed)", seed)
		c.sec.add("NATS credentials file (user JWT)", userJWT)
		c.natsAuth = auth
		c.natsArgs = []string{"--nats-creds", creds}
		c.natsOpts = []nats.Option{nats.UserCredentials(creds)}
		c.models(t, models, true, true)
		c.s3Env(s3, true)
		cases = append(cases, c)
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) { night(t, c, tasks, s3) })
	}
}

// night runs one case: the night, the calls that fail on purpose, and the
// scan of everything.
func night(t *testing.T, c *nightCase, tasks string, s3 *miniotest.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for k, v := range c.env {
		t.Setenv(k, v)
	}
	store := t.TempDir()
	ns := natstest.Start(t, c.natsAuth, func(o *server.Options) { o.StoreDir = store })
	natsURL := ns.URL()
	if c.natsURL != nil {
		natsURL = c.natsURL(natsURL)
	}
	data := t.TempDir()
	tag := strings.ReplaceAll(c.name, " ", "-")
	common := append([]string{"--data", data, "--nats", natsURL, "--store", s3.URL("blobs-" + tag), "--log-level", "debug", "--log-format", "json"}, c.natsArgs...)
	args := append(append([]string{}, common...), "--apps", "ChimeraX", "--night", "n-"+tag, "--group", "1", "--samples", "1",
		"--sim", "--vms", "1", "--time-scale", "0.0005", "--workers=false",
		"--rollout-args", strings.Join(append([]string{"--tasks", tasks}, c.rollout...), " "),
		"--judge-args", strings.Join(c.judge, " "), "--export", s3.URL("sft-"+tag))
	var printed bytes.Buffer
	start := time.Now()
	code, out := run(ctx, Command(), args...)
	t.Logf("night: %v", time.Since(start))
	printed.Write(out)
	if code != 0 {
		t.Fatalf("nightly exit %d:\n%s", code, out)
	}
	for i, g := range c.guards {
		if g.ok.Load() == 0 || g.rejected.Load() != 0 {
			t.Errorf("model endpoint %d: %d calls with its credentials, %d without; want some, and none", i, g.ok.Load(), g.rejected.Load())
		}
	}

	// Calls that fail on purpose, with credentials in their URLs.
	s3pw := c.sec.add("S3 endpoint URL user:password (failing export)", "s3endpointpw-"+tag)
	t.Setenv("AWS_ENDPOINT_URL", "http://s3user:"+s3pw+"@127.0.0.1:1")
	code, out = run(ctx, sft.Command(), "export", filepath.Join(data, "sft", "n-"+tag), s3.URL("again-"+tag))
	printed.Write(out)
	if code == 0 {
		t.Errorf("sftpack export with a bad S3 endpoint: exit 0\n%s", out)
	}
	t.Setenv("AWS_ENDPOINT_URL", c.env["AWS_ENDPOINT_URL"])
	fpw := c.sec.add("unreachable judge URL user:password", "failjudgepw-"+tag)
	code, out = run(ctx, judge.Command(), append(append([]string{}, common...), "--drain", "--durable", "failing",
		"--judge", "http://fu:"+fpw+"@127.0.0.1:1/v1=m", "--votes", "1", "--attempts", "1", "--max-deliver", "1", "--backoff", "1ms", "--outage-budget", "1s")...)
	printed.Write(out)
	ppw := c.sec.add("unreachable planner URL user:password", "failplannerpw-"+tag)
	code, out = run(ctx, rollout.Command(), append(append([]string{}, common...), "--sim", "--app", "ChimeraX", "--tasks", tasks, "--run", "failing-"+tag,
		"--planner-url", "http://pu:"+ppw+"@127.0.0.1:1/v1", "--planner-model", "m")...)
	printed.Write(out)
	if code == 0 {
		t.Errorf("rollout with an unreachable planner: exit 0\n%s", out)
	}
	wpw := c.sec.add("wrong NATS URL user:password", "wrongnatspw-"+tag)
	code, out = run(ctx, rollout.Command(), "--data", t.TempDir(), "--nats", "nats://wu:"+wpw+"@127.0.0.1:1", "--sim", "--app", "ChimeraX", "--tasks", tasks, "--run", "x")
	printed.Write(out)
	if code == 0 {
		t.Errorf("rollout with an unreachable NATS URL: exit 0\n%s", out)
	}
	t.Logf("failing calls: %v", time.Since(start))
	code, out = run(ctx, judge.Command(), "--help")
	printed.Write(out)

	c.sec.scan(t, "what the commands printed", printed.Bytes())
	files := c.sec.scanDir(t, data) + c.sec.scanDir(t, store)
	msgs := c.sec.scanStreams(t, ctx, ns.URL(), c.natsOpts...)
	objs := c.sec.scanBucket(t, ctx, s3)
	t.Logf("scanned: %v", time.Since(start))
	t.Logf("%s: %d secrets; scanned %d bytes printed, %d files, %d messages, %d objects", c.name, len(c.sec), printed.Len(), files, msgs, objs)
	if files == 0 || msgs == 0 || objs == 0 {
		t.Errorf("scanned %d files, %d messages, %d objects: want some of each", files, msgs, objs)
	}
}

// natsCreds configures a NATS server in operator mode (an operator, an
// account with JetStream, a user) and writes the user's credentials file
// (JWT and nkey seed).
func natsCreds(t *testing.T) (auth func(*server.Options), creds, seed, userJWT string) {
	t.Helper()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, err := okp.PublicKey()
	must(err)
	oc := jwt.NewOperatorClaims(opub)
	sys, err := nkeys.CreateAccount()
	must(err)
	syspub, err := sys.PublicKey()
	must(err)
	oc.SystemAccount = syspub
	sysJWT, err := jwt.NewAccountClaims(syspub).Encode(okp)
	must(err)
	akp, err := nkeys.CreateAccount()
	must(err)
	apub, err := akp.PublicKey()
	must(err)
	ac := jwt.NewAccountClaims(apub)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1, MaxAckPending: -1, MemoryMaxStreamBytes: -1, DiskMaxStreamBytes: -1}
	accJWT, err := ac.Encode(okp)
	must(err)
	ukp, err := nkeys.CreateUser()
	must(err)
	upub, err := ukp.PublicKey()
	must(err)
	userJWT, err = jwt.NewUserClaims(upub).Encode(akp)
	must(err)
	s, err := ukp.Seed()
	must(err)
	b, err := jwt.FormatUserConfig(userJWT, s)
	must(err)
	creds = filepath.Join(t.TempDir(), "user.creds")
	must(os.WriteFile(creds, b, 0o600))
	auth = func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{oc}
		o.SystemAccount = syspub
		r := &server.MemAccResolver{}
		must(r.Store(syspub, sysJWT))
		must(r.Store(apub, accJWT))
		o.AccountResolver = r
	}
	return auth, creds, string(s), userJWT
}
