package app

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

// deploymentName is what ENGINE_DEPLOYMENT may be: it becomes a subject token
// and part of stream names.
var deploymentName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Deployment derives every name the engine gives things on a NATS server from
// one setting, so several deployments share one server or cluster: the commit
// stream (EVT, or BLUE_EVT for ENGINE_DEPLOYMENT=blue), its subjects (evt.>,
// or blue.evt.>) and market data's streams (MKT_*, or BLUE_MKT_*) and
// subjects (mkt.*, or blue.mkt.*). ENGINE_STREAM still overrides the commit
// stream's name.
type Deployment struct {
	Name   string // empty: the default deployment
	Stream string // explicit commit stream name; empty: derived
}

func (d Deployment) validate() error {
	if d.Name != "" && !deploymentName.MatchString(d.Name) {
		return fmt.Errorf("ENGINE_DEPLOYMENT %q must be 1-32 characters of a-z, 0-9, '_' and '-', starting with a letter", d.Name)
	}
	return nil
}

func (d Deployment) upper() string { return strings.ToUpper(strings.ReplaceAll(d.Name, "-", "_")) }

// CommitStream is the name of the commit stream.
func (d Deployment) CommitStream() string {
	switch {
	case d.Stream != "":
		return d.Stream
	case d.Name == "":
		return "EVT"
	}
	return d.upper() + "_EVT"
}

// CommitPrefix is the prefix the commit stream keeps its subjects under.
func (d Deployment) CommitPrefix() string {
	if d.Name == "" {
		return events.SubjectRoot
	}
	return d.Name + "." + events.SubjectRoot
}

// Market is the names of market data's streams and subjects.
func (d Deployment) Market() market.Names {
	if d.Name == "" {
		return market.DefaultNames
	}
	return market.Names{StreamPrefix: d.upper() + "_" + market.DefaultNames.StreamPrefix, SubjectRoot: d.Name + "." + market.DefaultNames.SubjectRoot}
}
