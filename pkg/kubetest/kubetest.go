// Package kubetest is test support: a real kube-apiserver and etcd on
// loopback for end-to-end tests; imported only by _test.go files.
//
// The binaries come from scripts/k8s-test-env.sh (K8S-TESTING.md), which
// prints the directory holding them; BinDir reads it from the environment.
// On Linux both die with the test binary, however it dies (startProcess).
//
// It imports pkg/childproc (children that die with the test binary) and
// pkg/enginetest (the polling helper).
package kubetest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/childproc"
	"github.com/manent-io/manent/pkg/enginetest"
)

// Environment of the end-to-end tests against a real kube-apiserver.
const (
	// BinDirEnv names the directory holding kube-apiserver and etcd
	// (what scripts/k8s-test-env.sh prints). Without it the tests skip.
	BinDirEnv = "MANENT_K8S_BIN_DIR"
	// RequireEnv=1 makes a missing BinDirEnv a failure (CI).
	RequireEnv = "MANENT_TEST_REQUIRE_K8S"
)

// adminToken is the bearer token of the API server's admin user (group
// system:masters), accepted through --token-auth-file.
const adminToken = "e2e-admin-token"

// BinDir returns the directory named by BinDirEnv after checking that it
// holds etcd and kube-apiserver. Without BinDirEnv the test is skipped, or
// fails if RequireEnv=1.
func BinDir(t testing.TB) string {
	t.Helper()
	binDir := os.Getenv(BinDirEnv)
	if binDir == "" {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s is not set but %s=1: run scripts/k8s-test-env.sh", BinDirEnv, RequireEnv)
		}
		t.Skipf("no Kubernetes test binaries: set %s (scripts/k8s-test-env.sh prints it)", BinDirEnv)
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			t.Fatalf("%s: %v", BinDirEnv, err)
		}
	}
	return binDir
}

// APIServer is a running kube-apiserver, backed by its own etcd, both on
// 127.0.0.1 and stopped when the test ends.
type APIServer struct {
	// URL is the API server's https://127.0.0.1:port (a self-signed
	// certificate: clients skip verification).
	URL string
	// Token is a bearer token of an admin (system:masters) user.
	Token string
}

// Start starts etcd and kube-apiserver from binDir on free loopback ports
// and returns once /readyz answers ok (within 90 s, else the test fails).
// Both processes are stopped at the test's cleanup; if the test failed, the
// end of their logs is logged first.
func Start(t testing.TB, binDir string) *APIServer {
	t.Helper()
	dir := t.TempDir()
	ports := freePorts(t, 3)
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	saKey := filepath.Join(dir, "sa.key")
	tokens := filepath.Join(dir, "tokens.csv")
	if err := errors.Join(
		os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600),
		os.WriteFile(tokens, []byte(adminToken+",admin,admin-uid,system:masters\n"), 0o600),
	); err != nil {
		t.Fatal(err)
	}
	etcdURL, etcdLog, _ := startEtcd(t, dir, binDir, etcdPort, peerPort)
	apiLog, _ := startProcess(t, dir, filepath.Join(binDir, "kube-apiserver"),
		"--etcd-servers="+etcdURL, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", apiPort),
		"--cert-dir="+filepath.Join(dir, "certs"), "--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saKey, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/16", "--token-auth-file="+tokens,
		"--authorization-mode=RBAC", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none")
	// Registered after the processes' cleanups, so it runs before them.
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []string{etcdLog, apiLog} {
				b, _ := os.ReadFile(p)
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("--- %s (end):\n%s", filepath.Base(p), b)
			}
		}
	})

	s := &APIServer{URL: fmt.Sprintf("https://127.0.0.1:%d", apiPort), Token: adminToken}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the API server's self-signed test certificate
	}}
	defer hc.CloseIdleConnections()
	enginetest.Eventually(t, 90*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		resp, err := hc.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "kube-apiserver to answer /readyz on %s", s.URL)
	return s
}

// Kubeconfig writes a kubeconfig for the API server, authenticating with
// the bearer token, and returns its path. Its only context is "e2e".
func (s *APIServer) Kubeconfig(t testing.TB, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: %q}
contexts:
- name: e2e
  context: {cluster: e2e, user: admin}
current-context: e2e
`, s.URL, token)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// startEtcd starts etcd from binDir on the loopback ports given, its data
// in dir, and returns its client URL, the path of its log and its pid.
func startEtcd(t testing.TB, dir, binDir string, port, peerPort int) (url, logPath string, pid int) {
	t.Helper()
	url = fmt.Sprintf("http://127.0.0.1:%d", port)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	logPath, pid = startProcess(t, dir, filepath.Join(binDir, "etcd"),
		"--name", "e2e", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", url, "--advertise-client-urls", url,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "e2e="+peerURL, "--unsafe-no-fsync")
	return url, logPath, pid
}

// startProcess runs bin with args, its output in dir/<bin>.log (whose path
// it returns, with the process's pid), and stops it (SIGTERM, then SIGKILL
// after 10 s) when the test ends. On Linux it dies with the test binary
// however it dies (childproc.Start): etcd and kube-apiserver were left
// running after a CI timeout or a kill -9, holding their ports and
// temporary directories.
func startProcess(t testing.TB, dir, bin string, args ...string) (logPath string, pid int) {
	t.Helper()
	logPath = filepath.Join(dir, filepath.Base(bin)+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := childproc.Start(cmd)
	if err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.Done()
		}
		logf.Close()
	})
	return logPath, cmd.Process.Pid
}
