package eventlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// LockFile is the name of the lock file in the data directory: whoever holds
// an exclusive flock on it owns the embedded log under the directory. The lock
// goes with the process (the kernel drops it when the process ends, however
// it ends); the file stays and holds the pid of the last owner.
const LockFile = "engine.lock"

// ErrLocked means another process, or another Open in this one, has the
// embedded log's data directory open.
var ErrLocked = errors.New("eventlog: data directory in use")

// LockedError is ErrLocked with the directory and, when known, the pid of
// the process that holds it.
type LockedError struct {
	Dir string
	PID int // 0: unknown
}

func (e *LockedError) Error() string {
	who := "another engine process"
	if e.PID > 0 {
		who += " (pid " + strconv.Itoa(e.PID) + ")"
	}
	return fmt.Sprintf("eventlog: data directory %s is in use: %s is running on it. Only one process may open an embedded log: stop that one first (engine log, backup and restore too), or give this one a data directory of its own", e.Dir, who)
}

// Is makes errors.Is(err, ErrLocked) hold.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// holder is the pid the lock file names (0: none).
func holder(f *os.File) int {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 32))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
