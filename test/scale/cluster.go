// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// A throw-away control plane for one benchmark cell: etcd, kube-apiserver,
// kube-scheduler and (for ResourceClaimTemplates) a kube-controller-manager
// that runs only the resourceclaim controller. All on loopback ports picked
// here, apart from the local cluster's; clients use a static bearer token.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type clusterConfig struct {
	k8sBin, etcdBin string // directories holding the binaries
	scheduler       string // a kube-scheduler binary to run instead of k8sBin's (a patched allocator)
	dir             string // state, configs, logs
	gates           string // --feature-gates of every component
	schedQPS        int
	schedV          int // kube-scheduler -v
	pctScore        int // percentageOfNodesToScore; 0 leaves the scheduler's default
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

type cluster struct {
	cfg        clusterConfig
	kubeconfig string
	token      string
	schedURL   string // https://127.0.0.1:port of the scheduler
	apiURL     string // https://127.0.0.1:port of the API server
	kcmPort    int
	procs      map[string]*proc
}

func startProc(name, bin string, args []string, logFile string) (*proc, error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Die with the benchmark, even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = f.Close(); close(p.done) }()
	return p, nil
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

var insecureClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback test cluster
}

func (c *cluster) get(url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	return insecureClient.Do(req)
}

func (c *cluster) waitHealthy(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited; see %s", p.name, filepath.Join(c.cfg.dir, p.name+".log"))
		}
		r, err := c.get(url)
		if err == nil {
			_ = r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not healthy after %s; see %s", p.name, timeout, filepath.Join(c.cfg.dir, p.name+".log"))
}

func startCluster(ctx context.Context, cfg clusterConfig) (c *cluster, err error) {
	if err := os.MkdirAll(cfg.dir, 0o700); err != nil {
		return nil, err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	c = &cluster{cfg: cfg, token: hex.EncodeToString(b), procs: map[string]*proc{}}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	apiURL := "https://127.0.0.1:" + strconv.Itoa(ports[2])
	c.apiURL = apiURL
	c.schedURL = "https://127.0.0.1:" + strconv.Itoa(ports[3])
	write := func(name, content string) (string, error) {
		p := filepath.Join(cfg.dir, name)
		return p, os.WriteFile(p, []byte(content), 0o600)
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	if _, err := write("sa.key", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))); err != nil {
		return nil, err
	}
	tokens, err := write("tokens.csv", c.token+",bench-admin,bench-admin,system:masters\n")
	if err != nil {
		return nil, err
	}
	c.kubeconfig, err = write("kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: bench, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: bench, context: {cluster: bench, user: admin}}]
current-context: bench
`, apiURL, c.token))
	if err != nil {
		return nil, err
	}

	// etcd without fsync: the disk is shared with other engineers' tests, and
	// the apiserver and scheduler are what is measured.
	c.procs["etcd"], err = startProc("etcd", filepath.Join(cfg.etcdBin, "etcd"), []string{
		"--name=benchscale", "--data-dir=" + filepath.Join(cfg.dir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=benchscale=" + peerURL, "--log-level=warn", "--unsafe-no-fsync=true",
		"--quota-backend-bytes=8589934592",
	}, filepath.Join(cfg.dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	if err := c.waitHealthy(ctx, c.procs["etcd"], etcdURL+"/health", 30*time.Second); err != nil {
		return nil, err
	}
	c.procs["kube-apiserver"], err = startProc("kube-apiserver", filepath.Join(cfg.k8sBin, "kube-apiserver"), []string{
		"--etcd-servers=" + etcdURL, "--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[2]),
		"--cert-dir=" + filepath.Join(cfg.dir, "certs"), "--token-auth-file=" + tokens,
		"--authorization-mode=RBAC", "--endpoint-reconciler-type=none",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(cfg.dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(cfg.dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		// What Kubernetes 1.38 serves: resource.k8s.io/v1beta1 and v1beta2
		// off (1.38 stops serving v1beta1), as hack/cluster/cluster.sh.
		"--runtime-config=scheduling.k8s.io/v1beta1=true,resource.k8s.io/v1beta1=false,resource.k8s.io/v1beta2=false,resource.k8s.io/v1alpha3=true",
		"--feature-gates=" + cfg.gates,
	}, filepath.Join(cfg.dir, "kube-apiserver.log"))
	if err != nil {
		return nil, err
	}
	if err := c.waitHealthy(ctx, c.procs["kube-apiserver"], apiURL+"/readyz", 120*time.Second); err != nil {
		return nil, err
	}

	schedCfg, err := write("scheduler.yaml", fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: %q, qps: %d, burst: %d}
leaderElection: {leaderElect: false}
enableProfiling: true
%s`, c.kubeconfig, cfg.schedQPS, cfg.schedQPS, pctScoreLine(cfg.pctScore)))
	if err != nil {
		return nil, err
	}
	scheduler := cfg.scheduler
	if scheduler == "" {
		scheduler = filepath.Join(cfg.k8sBin, "kube-scheduler")
	}
	c.procs["kube-scheduler"], err = startProc("kube-scheduler", scheduler, []string{
		"--config=" + schedCfg, "--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[3]),
		"--authentication-kubeconfig=" + c.kubeconfig, "--authorization-kubeconfig=" + c.kubeconfig,
		"--feature-gates=" + cfg.gates, "-v=" + strconv.Itoa(cfg.schedV),
	}, filepath.Join(cfg.dir, "kube-scheduler.log"))
	if err != nil {
		return nil, err
	}
	if err := c.waitHealthy(ctx, c.procs["kube-scheduler"], c.schedURL+"/healthz", 60*time.Second); err != nil {
		return nil, err
	}
	c.kcmPort = ports[4]
	return c, nil
}

// startKCM starts a kube-controller-manager with only the resourceclaim
// controller, which creates the claims of ResourceClaimTemplates.
func (c *cluster) startKCM(ctx context.Context) error {
	port := strconv.Itoa(c.kcmPort)
	p, err := startProc("kube-controller-manager", filepath.Join(c.cfg.k8sBin, "kube-controller-manager"), []string{
		"--kubeconfig=" + c.kubeconfig, "--authentication-kubeconfig=" + c.kubeconfig, "--authorization-kubeconfig=" + c.kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + port, "--leader-elect=false",
		"--controllers=resourceclaim-controller", "--kube-api-qps=5000", "--kube-api-burst=5000",
		"--feature-gates=" + c.cfg.gates,
	}, filepath.Join(c.cfg.dir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	c.procs["kube-controller-manager"] = p
	return c.waitHealthy(ctx, p, "https://127.0.0.1:"+port+"/healthz", 60*time.Second)
}

// saveProfile writes a CPU profile of the component at base (the
// scheduler's or the API server's URL: both serve /debug/pprof).
func (c *cluster) saveProfile(base, file string, seconds int) error {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	hc := &http.Client{Timeout: time.Duration(seconds+30) * time.Second, Transport: insecureClient.Transport}
	r, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = r.Body.Close() }()
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("%s pprof: %s", base, r.Status)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

func (c *cluster) stop() {
	for _, n := range []string{"kube-controller-manager", "kube-scheduler", "kube-apiserver", "etcd"} {
		if p := c.procs[n]; p != nil {
			p.stop()
		}
	}
}

func (c *cluster) client(qps float32, burst int) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = qps, burst
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	return kubernetes.NewForConfig(rc)
}

// procStats reads the resident set size (MiB) and the CPU time used so far
// (seconds) of a started component from /proc.
func (c *cluster) procStats(name string) (rssMiB, cpuSec float64) {
	p := c.procs[name]
	if p == nil {
		return 0, 0
	}
	pid := p.cmd.Process.Pid
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				rssMiB = kb / 1024
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 13 {
				u, _ := strconv.ParseFloat(f[11], 64)
				k, _ := strconv.ParseFloat(f[12], 64)
				cpuSec = (u + k) / 100 // USER_HZ is 100 on Linux
			}
		}
	}
	return rssMiB, cpuSec
}

// idleCores is the CPU (cores, scheduler, API server and etcd together)
// below which settle calls the control plane idle: an idle 500-node fleet
// without kubelets uses a few hundredths of a core.
const idleCores = 0.1

// settle waits at least minWait, then until the scheduler, the API server and
// etcd together use less than idleCores over a second, or maxWait has passed.
// It returns how long it waited and the last second's CPU (cores).
func (c *cluster) settle(ctx context.Context, minWait, maxWait time.Duration) (time.Duration, float64) {
	start := time.Now()
	used := func() float64 {
		total := 0.0
		for _, name := range []string{"kube-scheduler", "kube-apiserver", "etcd"} {
			_, cpu := c.procStats(name)
			total += cpu
		}
		return total
	}
	select {
	case <-ctx.Done():
		return time.Since(start), 0
	case <-time.After(minWait):
	}
	busy := 0.0
	for last, t := used(), time.Now(); time.Since(start) < maxWait; {
		select {
		case <-ctx.Done():
			return time.Since(start), busy
		case <-time.After(time.Second):
		}
		now, tn := used(), time.Now()
		busy = (now - last) / tn.Sub(t).Seconds()
		if busy < idleCores {
			break
		}
		last, t = now, tn
	}
	return time.Since(start), busy
}

// pctScoreLine sets percentageOfNodesToScore in the scheduler's
// configuration; without it the scheduler scales it with the fleet.
func pctScoreLine(pct int) string {
	if pct <= 0 {
		return ""
	}
	return fmt.Sprintf("percentageOfNodesToScore: %d\n", pct)
}
