package gateway

import "github.com/slipverify/slipverify/core/api"

// Auth is the authentication scheme a route takes.
type Auth uint8

// Schemes (ARCHITECTURE.md, "Auth by version").
const (
	// AuthNone: no key (health).
	AuthNone Auth = iota
	// AuthBearer: a branch key as Bearer only (v1).
	AuthBearer
	// AuthBranch: a branch key as Bearer, or a request signed with the
	// branch UUID in X-API-Key when X-Signature or X-API-Key is present.
	AuthBranch
	// AuthClient: a request signed with a B2B client key (/b2b).
	AuthClient
)

// Budget is the rate budget a route draws from.
type Budget uint8

// Budgets (spec 8): only verify routes are limited.
const (
	Unlimited Budget = iota
	BankBudget
	WalletBudget
)

// Route is one public route: which version answers, how callers
// authenticate, which budget limits it and which permission it needs.
type Route struct {
	Method, Path string
	Version      api.Version
	Auth         Auth
	Budget       Budget
	Permission   string // /b2b routes only
	Image        bool   // takes one slip image: a body over the limit is IMAGE_SIZE_TOO_LARGE
	local        bool   // answered by the edge itself
}

// Routes is the edge's routing table: every public path.
var Routes = []Route{
	{Method: "GET", Path: "/health", Version: api.V2, local: true},
	{Method: "GET", Path: "/v2/health", Version: api.V2, local: true},

	{Method: "POST", Path: "/v2/verify/bank", Version: api.V2, Auth: AuthBranch, Budget: BankBudget, Image: true},
	{Method: "POST", Path: "/v2/verify/wallet", Version: api.V2, Auth: AuthBranch, Budget: WalletBudget, Image: true},
	{Method: "POST", Path: "/v2/verify/truewallet", Version: api.V2, Auth: AuthBranch, Budget: WalletBudget, Image: true},
	{Method: "GET", Path: "/v2/info", Version: api.V2, Auth: AuthBranch},
	{Method: "POST", Path: "/v2/verify/bank/async", Version: api.V2, Auth: AuthBranch, Image: true},
	{Method: "POST", Path: "/v2/verify/bank/async/batch", Version: api.V2, Auth: AuthBranch},
	{Method: "GET", Path: "/v2/verify/bank/jobs/{job}", Version: api.V2, Auth: AuthBranch},
	// What the service verified: a slip read again (free, limited as
	// verification is) and the branch's history.
	{Method: "GET", Path: "/v2/slips/{ref}", Version: api.V2, Auth: AuthBranch, Budget: BankBudget},
	{Method: "GET", Path: "/v2/verifications", Version: api.V2, Auth: AuthBranch},

	// Every v1 route also answers under api.V1Prefix (the commercial API's
	// paths), with the same auth, budget and answers.
	{Method: "GET", Path: "/verify", Version: api.V1, Auth: AuthBearer, Budget: BankBudget},
	{Method: "POST", Path: "/verify", Version: api.V1, Auth: AuthBearer, Budget: BankBudget, Image: true},
	{Method: "POST", Path: "/verify/wallet", Version: api.V1, Auth: AuthBearer, Budget: WalletBudget, Image: true},
	{Method: "POST", Path: "/verify/truewallet", Version: api.V1, Auth: AuthBearer, Budget: WalletBudget, Image: true},
	{Method: "GET", Path: "/me", Version: api.V1, Auth: AuthBearer},
	{Method: "GET", Path: api.V1Prefix + "/verify", Version: api.V1, Auth: AuthBearer, Budget: BankBudget},
	{Method: "POST", Path: api.V1Prefix + "/verify", Version: api.V1, Auth: AuthBearer, Budget: BankBudget, Image: true},
	{Method: "POST", Path: api.V1Prefix + "/verify/wallet", Version: api.V1, Auth: AuthBearer, Budget: WalletBudget, Image: true},
	{Method: "POST", Path: api.V1Prefix + "/verify/truewallet", Version: api.V1, Auth: AuthBearer, Budget: WalletBudget, Image: true},
	{Method: "GET", Path: api.V1Prefix + "/me", Version: api.V1, Auth: AuthBearer},

	{Method: "GET", Path: "/banks", Version: api.V2, Auth: AuthBranch},
	{Method: "GET", Path: "/v2/banks", Version: api.V2, Auth: AuthBranch},
	{Method: "POST", Path: "/qr/generate", Version: api.V2, Auth: AuthBranch},
	{Method: "POST", Path: "/v2/qr/generate", Version: api.V2, Auth: AuthBranch},
	{Method: "GET", Path: "/bank-accounts", Version: api.V2, Auth: AuthBranch},
	{Method: "GET", Path: "/v2/bank-accounts", Version: api.V2, Auth: AuthBranch},
	{Method: "POST", Path: "/bank-accounts", Version: api.V2, Auth: AuthBranch},
	{Method: "POST", Path: "/v2/bank-accounts", Version: api.V2, Auth: AuthBranch},
	{Method: "PUT", Path: "/bank-accounts/{account}/link", Version: api.V2, Auth: AuthBranch},
	{Method: "PUT", Path: "/v2/bank-accounts/{account}/link", Version: api.V2, Auth: AuthBranch},

	{Method: "GET", Path: "/b2b/branches", Version: api.V2, Auth: AuthClient, Permission: "branch:read"},
	{Method: "POST", Path: "/b2b/branches", Version: api.V2, Auth: AuthClient, Permission: "branch:write"},
	{Method: "GET", Path: "/b2b/branches/{branch}", Version: api.V2, Auth: AuthClient, Permission: "branch:read"},
	{Method: "PATCH", Path: "/b2b/branches/{branch}", Version: api.V2, Auth: AuthClient, Permission: "branch:write"},
	{Method: "DELETE", Path: "/b2b/branches/{branch}", Version: api.V2, Auth: AuthClient, Permission: "branch:write"},
	{Method: "GET", Path: "/b2b/branches/{branch}/quota", Version: api.V2, Auth: AuthClient, Permission: "quota:read"},
	{Method: "PUT", Path: "/b2b/branches/{branch}/quota", Version: api.V2, Auth: AuthClient, Permission: "quota:write"},
	{Method: "POST", Path: "/b2b/branches/{branch}/quota/adjust", Version: api.V2, Auth: AuthClient, Permission: "quota:write"},
	{Method: "POST", Path: "/b2b/branches/{branch}/quota/reset", Version: api.V2, Auth: AuthClient, Permission: "quota:write"},
	{Method: "POST", Path: "/b2b/branches/{branch}/key/rotate", Version: api.V2, Auth: AuthClient, Permission: "branch:write"},
	{Method: "GET", Path: "/b2b/branches/{branch}/conditions", Version: api.V2, Auth: AuthClient, Permission: "branch:read"},
	{Method: "PUT", Path: "/b2b/branches/{branch}/conditions", Version: api.V2, Auth: AuthClient, Permission: "branch:write"},
	{Method: "GET", Path: "/b2b/verifications", Version: api.V2, Auth: AuthClient, Permission: "branch:read"},
	{Method: "GET", Path: "/b2b/bank-accounts", Version: api.V2, Auth: AuthClient, Permission: "bank-account:read"},
	{Method: "POST", Path: "/b2b/bank-accounts", Version: api.V2, Auth: AuthClient, Permission: "bank-account:write"},
	{Method: "PUT", Path: "/b2b/branches/{branch}/bank-accounts/{account}", Version: api.V2, Auth: AuthClient, Permission: "bank-account:write"},
	{Method: "DELETE", Path: "/b2b/branches/{branch}/bank-accounts/{account}", Version: api.V2, Auth: AuthClient, Permission: "bank-account:write"},
}
