package api

import "time"

// Internal auth routes of core, used by the edge. The last path segment is
// the hex SHA-256 of the key. They answer 200 with {success, data} and 404
// INVALID_API_KEY for an unknown key.
const (
	PathBranchAuth = "/internal/auth/branch/"
	PathClientAuth = "/internal/auth/client/"
)

// BranchAuth is what the edge needs to admit a request made with a branch
// key: the branch's identity and state, its IP allow list, its service's
// plan rates and, for signed requests, the secret of the service's first
// B2B client. It crosses only the internal link and lives only in the
// edge's memory.
type BranchAuth struct {
	ServiceID     string   `json:"serviceId"`
	BranchID      string   `json:"branchId"`
	ServiceState  string   `json:"serviceState"`
	UserBanned    bool     `json:"userBanned"`
	BranchActive  bool     `json:"branchActive"`
	IPAllow       []string `json:"ipAllow"`
	RateBank      int      `json:"rateBank"`
	RateWallet    int      `json:"rateWallet"`
	SigningSecret string   `json:"signingSecret,omitempty"`
	// ServiceExpiresAt, when set, is when the service's term ends: the
	// edge refuses with SERVICE_EXPIRED from that instant, whatever it
	// cached.
	ServiceExpiresAt *time.Time `json:"serviceExpiresAt,omitempty"`
	// KeyExpiresAt, when set, is when this key stops working: the previous
	// key of a rotation, at the end of its overlap.
	KeyExpiresAt *time.Time `json:"keyExpiresAt,omitempty"`
	// Previous is the signing secret a rotation replaced, during its
	// overlap: the edge tries it only after SigningSecret fails.
	Previous *PreviousSecret `json:"previousSecret,omitempty"`
}

// PreviousSecret is a rotated signing secret and the end of its overlap.
type PreviousSecret struct {
	Secret    string    `json:"secret"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// ClientAuth is what the edge needs to admit a signed /b2b request made with
// a B2B client key.
type ClientAuth struct {
	ServiceID    string   `json:"serviceId"`
	ServiceState string   `json:"serviceState"`
	UserBanned   bool     `json:"userBanned"`
	ClientID     string   `json:"clientId"` // the key's digest
	Secret       string   `json:"secret"`
	Permissions  []string `json:"permissions"`
	// ServiceExpiresAt and Previous are as in BranchAuth.
	ServiceExpiresAt *time.Time      `json:"serviceExpiresAt,omitempty"`
	Previous         *PreviousSecret `json:"previousSecret,omitempty"`
}

// Permissions a B2B client may hold, in bit order of PermissionBit.
var Permissions = []string{"branch:read", "branch:write", "quota:read", "quota:write",
	"bank-account:read", "bank-account:write"}

// PermissionBit returns the bit of a permission name, or 0 for an unknown
// name.
func PermissionBit(name string) uint8 {
	for i, p := range Permissions {
		if p == name {
			return 1 << i
		}
	}
	return 0
}
