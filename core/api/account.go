package api

// Account types a bank account has: the type the admin and management APIs
// and the seed file set, and the matchedAccount of a v2 answer.
const (
	AccountPersonal = "PERSONAL"
	AccountJuristic = "JURISTIC"
)

// ValidAccountType reports whether t is AccountPersonal or AccountJuristic.
func ValidAccountType(t string) bool { return t == AccountPersonal || t == AccountJuristic }
