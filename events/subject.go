package events

import "strings"

// Subjects of the commit log are built and parsed here and nowhere else:
// "evt.<kind>.<id>", one per aggregate (evt.account.<id>, evt.firm.<tenant>,
// evt.tenant.<id>, evt.webhook.<key>). They are the log's logical names; the
// event-log client maps the "evt" root to the deployment's configured prefix
// at its boundary, so the rest of the engine never sees a prefix.

// SubjectRoot is the root of every logical subject.
const SubjectRoot = "evt"

// Aggregate kinds that name subjects.
const (
	KindAccount = "account"
	KindFirm    = "firm"
	KindTenant  = "tenant"
	KindWebhook = "webhook"
	KindOrg     = "org"
	KindPlans   = "plans"
	KindVenue   = "venue"
	KindApp     = "app"    // a Connect app, its keys
	KindLink    = "link"   // a Connect link
	KindStmt    = "stmt"   // a redeemed Connect account statement, by its single-use id
	KindMark    = "mark"   // the paper book's marks of one instrument, as one node recorded them
	KindCopier  = "copier" // a copier group: a leader, its followers and their mirrors
)

// Subject is the log subject of the aggregate of kind with id.
func Subject(kind, id string) string { return SubjectRoot + "." + kind + "." + id }

// SubjectID is the id in subject when subject names an aggregate of kind.
func SubjectID(subject, kind string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, SubjectRoot+".")
	if !ok {
		return "", false
	}
	id, ok := strings.CutPrefix(rest, kind+".")
	if !ok {
		return "", false
	}
	return id, true
}

// IsKind reports whether subject names an aggregate of kind.
func IsKind(subject, kind string) bool {
	_, ok := SubjectID(subject, kind)
	return ok
}

// ID is the id in subject, which must name an aggregate of kind ("" if not).
func ID(subject, kind string) string {
	id, _ := SubjectID(subject, kind)
	return id
}
