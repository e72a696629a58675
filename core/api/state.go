package api

import "time"

// Service states, as core stores them and the edge reads them from core's
// auth records.
const (
	StateActive  = "active"
	StateExpired = "expired"
	StateBanned  = "banned"
)

// StateAt returns a service's state at t: an active service whose term
// ends at expiresAt (nil: no end) is expired from that instant on. Core
// and the edge both judge a term's end with it, at each use.
func StateAt(state string, expiresAt *time.Time, t time.Time) string {
	if state == StateActive && expiresAt != nil && !t.Before(*expiresAt) {
		return StateExpired
	}
	return state
}

// CallerRefusal returns the condition that refuses every request of a
// caller, or 0: a banned user, then a banned service, then an expired
// service, then an inactive branch (pass true for a caller without a
// branch, a B2B client). The edge refuses with it before forwarding and
// core before it verifies; each version's code and status come from the
// catalog.
func CallerRefusal(userBanned bool, serviceState string, branchActive bool) Code {
	switch {
	case userBanned:
		return UserBanned
	case serviceState == StateBanned:
		return ServiceBanned
	case serviceState == StateExpired:
		return ServiceExpired
	case !branchActive:
		return BranchInactive
	}
	return 0
}
