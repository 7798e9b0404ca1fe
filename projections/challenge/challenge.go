// Package challenge is the read model of challenges: programs and
// enrollments with their history. It runs after projections.Core in the same
// transaction.
package challenge

import (
	"time"

	"github.com/svc/engine/events"
	evch "github.com/svc/engine/events/challenge"
	"github.com/svc/engine/projections"
)

// Collections of the challenge read model.
const (
	CollProgram    = "challenge"       // by program id -> Program
	CollEnrollment = "enrollment"      // by enrollment id -> Enrollment
	CollUserEnroll = "user_enrollment" // userID/enrollmentID -> enrollment id
)

// Program is a program as read.
type Program struct {
	Program   evch.Program `json:"program"`
	VenueID   string       `json:"venueId"`
	UpdatedAt time.Time    `json:"updatedAt"`
}

// Row is one row of an enrollment's history.
type Row struct {
	Status string    `json:"status"`
	Actor  string    `json:"actor"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Enrollment is an enrollment as read, with its history.
type Enrollment struct {
	ID          string         `json:"id"`
	UserID      string         `json:"userId"`
	ChallengeID string         `json:"challengeId"`
	Stage       int64          `json:"stage"`
	AccountID   string         `json:"accountId"`
	AccountSize events.Decimal `json:"accountSize"`
	AccountType string         `json:"accountType"`
	Currency    string         `json:"currency"`
	Status      string         `json:"status"`
	CreatedAt   time.Time      `json:"createdAt"`
	Events      []Row          `json:"events"`
}

// Fold is the challenge projection.
func Fold(tx projections.Tx, c events.Committed) error {
	if id, ok := events.SubjectID(c.Subject, evch.KindProgram); ok {
		for _, e := range c.Events {
			if p, ok := e.(evch.ProgramPublished); ok {
				if err := tx.Put(CollProgram, id, Program{Program: p.Program, VenueID: p.VenueID, UpdatedAt: p.At}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	user, ok := events.SubjectID(c.Subject, evch.KindEnrollment)
	if !ok {
		return nil
	}
	for _, e := range c.Events {
		var err error
		switch e := e.(type) {
		case evch.Enrolled:
			err = tx.Put(CollEnrollment, e.EnrollmentID, Enrollment{ID: e.EnrollmentID, UserID: user, ChallengeID: e.ChallengeID,
				Stage: e.Stage, AccountID: e.AccountID, AccountSize: e.AccountSize, AccountType: e.AccountType, Currency: e.Currency,
				Status: evch.StatusRegistered, CreatedAt: e.At, Events: []Row{}})
			if err == nil {
				err = tx.Put(CollUserEnroll, user+"/"+e.EnrollmentID, e.EnrollmentID)
			}
		case evch.StatusRecorded:
			err = update(tx, e.EnrollmentID, func(en *Enrollment) {
				en.Status = e.Status
				en.Events = append(en.Events, Row{Status: e.Status, Actor: e.Actor, Reason: e.Reason, At: e.At})
			})
		case evch.StageIssued:
			err = update(tx, e.EnrollmentID, func(en *Enrollment) { en.ChallengeID, en.Stage, en.AccountID = e.ChallengeID, e.Stage, e.AccountID })
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func update(tx projections.Tx, id string, fn func(*Enrollment)) error {
	var en Enrollment
	ok, err := tx.Get(CollEnrollment, id, &en)
	if err != nil || !ok {
		return err
	}
	fn(&en)
	return tx.Put(CollEnrollment, id, &en)
}
