package clusterkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// built is a binary built at most once per process.
type built struct {
	once sync.Once
	path string
	err  error
}

var natsBin, engineBin built

// NATSBinary is the path of a nats-server of go.mod's version, built once per
// process and kept across runs where scripts/ci-services keeps it:
// $TMPDIR/engine-ci-nats/nats-server-<version>.
func NATSBinary(t testing.TB) string {
	t.Helper()
	natsBin.once.Do(func() { natsBin.path, natsBin.err = buildNATS() })
	if natsBin.err != nil {
		t.Fatal(natsBin.err)
	}
	return natsBin.path
}

func buildNATS() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	out, err := goCmd(root, "list", "-m", "-f", "{{.Version}}", "github.com/nats-io/nats-server/v2")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), "engine-ci-nats")
	path := filepath.Join(dir, "nats-server-"+strings.TrimSpace(out))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Built aside and renamed, so a process that runs it never sees half a file.
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if _, err := goCmd(root, "build", "-o", tmp, "github.com/nats-io/nats-server/v2"); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// EngineBinary is the path of ./cmd/engine built once per process, at
// $TMPDIR/engine-clusterkit-<uid>/engine-<pid>. The binaries of processes
// that have exited are removed when the next one is built.
func EngineBinary(t testing.TB) string {
	t.Helper()
	engineBin.once.Do(func() { engineBin.path, engineBin.err = buildEngine() })
	if engineBin.err != nil {
		t.Fatal(engineBin.err)
	}
	return engineBin.path
}

func buildEngine() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("engine-clusterkit-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	removeExitedBinaries(dir)
	path := filepath.Join(dir, fmt.Sprintf("engine-%d", os.Getpid()))
	if _, err := goCmd(root, "build", "-o", path, "./cmd/engine"); err != nil {
		return "", err
	}
	return path, nil
}

// removeExitedBinaries removes dir's engine-<pid> files whose process has exited.
func removeExitedBinaries(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, "engine-*"))
	for _, name := range names {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(name), "engine-"))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.Remove(name)
		}
	}
}

// moduleRoot is the directory of the go.mod of the working directory's module
// (a test runs in its package's directory).
func moduleRoot() (string, error) {
	out, err := goCmd("", "env", "GOMOD")
	if err != nil {
		return "", err
	}
	gomod := strings.TrimSpace(out)
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("clusterkit: not inside a Go module")
	}
	return filepath.Dir(gomod), nil
}

// goCmd runs the go command in dir and returns its standard output.
func goCmd(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("clusterkit: go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}
