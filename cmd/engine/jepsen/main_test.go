package jepsen

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the test binary as the unfenced proxy when a cluster starts
// it as one (proxy.go), else the tests.
func TestMain(m *testing.M) {
	if ok, err := ProxyFromEnv(os.Getenv); ok {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
