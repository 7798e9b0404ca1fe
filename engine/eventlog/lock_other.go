//go:build !unix

package eventlog

import "os"

// lockDir does not lock where flock is missing: one process per data
// directory is then the operator's to keep.
func lockDir(string) (*os.File, error) { return nil, nil }

func unlockDir(*os.File) {}
