package api

import "net/mail"

// EmailProblem says why s cannot be a service's contact email, or "" when
// it can: an address as name@example.com writes it (no display name, no
// comments, at most 254 bytes), and a name by NameProblem's rule (net/mail
// takes any character above ASCII in an address, bidirectional overrides
// and C1 controls too). The admin API and the seed both ask it.
func EmailProblem(s string) string {
	if p := NameProblem(s); p != "" {
		return p
	}
	if len(s) > 254 {
		return "must be an email address of at most 254 characters"
	}
	if addr, err := mail.ParseAddress(s); err != nil || addr.Address != s {
		return "must be an email address (name@example.com)"
	}
	return ""
}
