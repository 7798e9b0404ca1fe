package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgHost names the PostgreSQL host, pgPort the port it listens on, on its
// own address in its own namespace (never the machine's shared server's
// 127.0.0.1:5432, which no namespace reaches).
const (
	pgHost = "pg"
	pgPort = 15432
)

// pgUser runs the server: PostgreSQL refuses to run as root.
const pgUser = "postgres"

// PostgresAvailable reports why the harness cannot run a PostgreSQL of its
// own here: no server binaries under /usr/lib/postgresql/*/bin, no setpriv
// to drop to the postgres user, or no such user. nil: it can.
func PostgresAvailable() error {
	if _, err := pgBin(); err != nil {
		return err
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		return errors.New("jepsen: no setpriv (util-linux): the PostgreSQL server cannot be run as its own user")
	}
	if _, err := user.Lookup(pgUser); err != nil {
		return fmt.Errorf("jepsen: no %s user to run the PostgreSQL server as (it refuses root): %w", pgUser, err)
	}
	return nil
}

// pgBin is the newest /usr/lib/postgresql/<version>/bin holding initdb and postgres.
func pgBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if isFile(filepath.Join(d, "postgres")) && isFile(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	return "", errors.New("jepsen: no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (apt-get install postgresql)")
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// asPG is the command line running bin's program as the postgres user,
// killed when the harness dies.
func asPG(bin string, args ...string) []string {
	return append([]string{"--reuid=" + pgUser, "--regid=" + pgUser, "--init-groups", "--pdeathsig", "KILL", bin}, args...)
}

// startPostgres makes a database cluster of the run's own in dir (initdb,
// as the postgres user, which owns dir) and starts its server in the pg
// host's namespace, listening on the host's address only, then waits until
// it answers. Every process of the server is in that namespace, so the
// nemesis pauses, kills and cuts them all (Proc.wholeNS).
func (c *Cluster) startPostgres(dir string) error {
	bin, err := pgBin()
	if err != nil {
		return err
	}
	u, err := user.Lookup(pgUser)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The run's directory is root's (0700): the server's user goes through it.
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	for _, d := range []string{dir, data} {
		if err := os.Chown(d, uid, gid); err != nil {
			return err
		}
	}
	initdb := exec.Command("setpriv", asPG(filepath.Join(bin, "initdb"), "-D", data, "-U", pgUser, "--auth=trust", "-E", "UTF8",
		"--locale=C", "--no-sync")...)
	initdb.Env = childEnv()
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("jepsen: initdb: %v: %s", err, out)
	}
	h := c.Net.Host(pgHost)
	// Everything the server needs on the command line; the files stay initdb's but for who may connect.
	hba := "local all all trust\nhost all all 169.254.0.0/16 trust\n"
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return err
	}
	if err := os.Chown(filepath.Join(data, "pg_hba.conf"), uid, gid); err != nil {
		return err
	}
	args := asPG(filepath.Join(bin, "postgres"), "-D", data,
		"-c", "listen_addresses="+h.IP, "-c", fmt.Sprintf("port=%d", pgPort),
		"-c", "unix_socket_directories="+dir, // never /var/run/postgresql, the shared server's
		"-c", "max_connections=200", "-c", "shared_buffers=64MB",
		// The read models are rebuilt from the log: the harness trades a
		// crash's durability for the machine's time (a kill -9 of the
		// server loses nothing the kernel holds; the projector folds again
		// from the checkpoint whatever an unflushed commit lost).
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "log_min_messages=warning", "-c", "log_connections=off",
		// A missed serving floor is read from the lock waits too
		// (MissDetail): a session waiting a second for a lock is logged.
		"-c", "log_lock_waits=on", "-c", "log_line_prefix=%m [%p] ")
	p := &Proc{Name: pgHost, ns: h.NS, path: "setpriv", args: args, env: childEnv(), logPath: filepath.Join(dir, "postgres.log"), wholeNS: true}
	c.PG = p
	if err := p.Start(); err != nil {
		return err
	}
	return c.WaitPG(60 * time.Second)
}

// PGURL is the read models' database as the engines (and the harness) reach it.
func (c *Cluster) PGURL() string {
	return fmt.Sprintf("postgres://%s@%s:%d/postgres?sslmode=disable&connect_timeout=2", pgUser, c.Net.Host(pgHost).IP, pgPort)
}

// WaitPG waits until the server takes a query.
func (c *Cluster) WaitPG(d time.Duration) error {
	p := c.PG
	err := waitFor(d, func() error {
		if !p.Running() {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, c.PGURL())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "SELECT 1")
		return err
	})
	if err == nil && !p.Running() {
		err = errors.New("exited")
	}
	if err != nil {
		return fmt.Errorf("jepsen: %s: %w\n%s", p.Name, err, p.Tail(30))
	}
	return nil
}

// ReadModels says where the engines' read models are: for PostgreSQL, its
// checkpoint and how many documents it holds, read from the server.
func (c *Cluster) ReadModels(ctx context.Context) string {
	if c.PG == nil {
		return "read models: in each engine's memory"
	}
	conn, err := pgx.Connect(ctx, c.PGURL())
	if err != nil {
		return fmt.Sprintf("read models: PostgreSQL at %s, unreadable: %v", c.Net.Host(pgHost).IP, err)
	}
	defer conn.Close(ctx)
	var seq, docs int64
	err = conn.QueryRow(ctx, `SELECT (SELECT seq FROM checkpoints WHERE name = 'core'), (SELECT count(*) FROM docs)`).Scan(&seq, &docs)
	if err != nil {
		return fmt.Sprintf("read models: PostgreSQL at %s, unreadable: %v", c.Net.Host(pgHost).IP, err)
	}
	return fmt.Sprintf("read models: PostgreSQL at %s:%d (the run's own), checkpoint %d, %d documents", c.Net.Host(pgHost).IP, pgPort, seq, docs)
}
