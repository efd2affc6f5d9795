package opaconfig

import (
	"context"
	"io/fs"
)

// Candidate is what the candidate's feed delivers to: policy.Authorizer's
// ReplaceCandidate and RefuseCandidate.
type Candidate interface {
	ReplaceCandidate(ctx context.Context, files fs.FS) error
	RefuseCandidate(ctx context.Context, err error)
}

// CandidateOf adapts a Candidate to the Policy the candidate's feed delivers to.
func CandidateOf(c Candidate) Policy { return candidatePolicy{c} }

type candidatePolicy struct{ c Candidate }

func (p candidatePolicy) Replace(ctx context.Context, files fs.FS) error {
	return p.c.ReplaceCandidate(ctx, files)
}
func (p candidatePolicy) Refuse(ctx context.Context, err error) { p.c.RefuseCandidate(ctx, err) }
