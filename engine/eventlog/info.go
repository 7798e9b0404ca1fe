package eventlog

// Durability is what the log can say about how its commits are kept.
type Durability struct {
	Server            string // version of the server connected to
	Storage           string // file or memory
	Replicas          int
	GroupCommit       bool
	GroupCommitReason string
}

// Durability reports the stream's storage and replicas, the server's
// version, and whether (and why) appends are grouped into atomic batches.
func (l *Log) Durability() Durability {
	cfg := l.stream.CachedInfo().Config
	d := Durability{Server: l.nc.ConnectedServerVersion(), Storage: cfg.Storage.String(), Replicas: cfg.Replicas, GroupCommit: l.group != nil}
	switch {
	case d.GroupCommit:
		d.GroupCommitReason = "the stream takes atomic batches"
	case !atLeast(d.Server, "v2.12.0"):
		d.GroupCommitReason = "nats-server " + d.Server + " is older than 2.12, which brought atomic batch publish"
	case !cfg.AllowAtomicPublish:
		d.GroupCommitReason = "the stream does not allow atomic publish (a cluster holding servers older than 2.12?)"
	default:
		d.GroupCommitReason = "the log is open read-only"
	}
	return d
}
