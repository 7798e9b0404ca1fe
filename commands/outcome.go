package commands

// Outcome is how a write that succeeded ended, in domain terms: it made
// something new or it changed (or confirmed) what was there. The gateway
// answers Created with 201 and Done with 200.
//
// The values are the ones engine/idem has recorded in the log with each
// Idempotency-Key's answer since the first version (they were HTTP
// statuses then); they must not change, or a replayed key would answer
// differently.
type Outcome int

const (
	Done    Outcome = 200
	Created Outcome = 201
)
