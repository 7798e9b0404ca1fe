package market

// Names are the names of market data's own JetStream streams and subjects
// (bars, news) for one deployment: "MKT_BARS_1M" and "mkt.bars.1m.>" by
// default, "<DEPLOYMENT>_MKT_..." and "<deployment>.mkt...." for a named one.
type Names struct {
	StreamPrefix string // MKT
	SubjectRoot  string // mkt
	Replicas     int    // of the market-data streams on a cluster; 0: 1
}

// DefaultNames are the names of an unnamed deployment.
var DefaultNames = Names{StreamPrefix: "MKT", SubjectRoot: "mkt"}

// Stream is the name of the stream with suffix ("BARS_1M" is "MKT_BARS_1M").
func (n Names) Stream(suffix string) string { return n.StreamPrefix + "_" + suffix }

// Subject is the subject with body ("news.x" is "mkt.news.x").
func (n Names) Subject(body string) string { return n.SubjectRoot + "." + body }
