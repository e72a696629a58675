package main

// kind says how a flag's text becomes a value of the request.
type kind int

const (
	text     kind = iota // a string
	number               // an integer
	boolean              // a flag without a value: true when given (--x=false sends false)
	list                 // comma-separated strings, sent as an array
	nullable             // a string; an empty one sends null, which clears the field
	rawBody              // the whole request body, which must be JSON
	subpath              // a path put into the URL as it is (b2b)
)

// field is one flag of a command and where its value goes.
type field struct {
	flag string
	// to is where the value goes: "{s}" fills that placeholder of the
	// command's path, "?k" is the query parameter k, "a.b" is the member b
	// of the body's member a, "" (with rawBody) is the whole body.
	to      string
	kind    kind
	need    bool     // required
	def     string   // sent when the flag is not given
	choices []string // the only values allowed
	yes     string   // this value makes the command destructive: it needs --yes
	help    string   // a `quoted` word names the flag's value in the help
}

// command is one operation of the admin API's contract.
type command struct {
	noun, verb string // verb "" for a noun that is its own command (audit, export)
	method     string
	path       string // under /admin/v1; {placeholders} come from the fields
	help       string
	fields     []field
	cols       []string // a list's columns in table output; nil: every member
	danger     bool     // always needs --yes
	once       string   // the answer holds a credential: the note printed after it
	pages      bool     // the answer is {items, nextCursor}; --all follows the cursor
	jsonOnly   bool     // printed as JSON whatever -o says
}

// The fields several commands share.
var (
	service = field{flag: "service", to: "{s}", need: true, help: "the service `id`"}
	branch  = field{flag: "branch", to: "{b}", need: true, help: "the branch `id`"}
	client  = field{flag: "client", to: "{c}", need: true, help: "the B2B client `id`"}
	reason  = field{flag: "reason", to: "reason", need: true, help: "why, for the audit log"}
	overlap = field{flag: "overlap", to: "overlap", help: "how long the previous credential keeps working, 0s to 168h (`duration`, server default 24h)"}
	force   = field{flag: "force", to: "force", kind: boolean, yes: "true", help: "rotate even while an overlap is open (the previous credential stops working now; needs --yes)"}
	b2bPath = field{flag: "path", to: "{p}", kind: subpath, need: true, help: "the b2b `path`, e.g. /branches or /branches/br-1?x=y"}
	b2bBody = field{flag: "body", kind: rawBody, help: "the request body (`JSON`)"}
)

// commands is every operation slipadm knows, in the order the help lists
// them.
var commands = []*command{
	{noun: "services", verb: "list", method: "GET", path: "/services", help: "List the services.",
		cols: []string{"id", "name", "state", "userBanned", "plan.name", "plan.quotaLimit", "usage.usedQuota", "expiresAt"}},
	{noun: "services", verb: "get", method: "GET", path: "/services/{s}", help: "Show one service.",
		fields: []field{service}},
	{noun: "services", verb: "create", method: "POST", path: "/services",
		help: "Onboard a service with its plan: the answer holds its main branch's key and a B2B client's key and secret.",
		fields: []field{
			{flag: "id", to: "id", help: "the service `id` (default: the server picks one)"},
			{flag: "name", to: "name", need: true, help: "the service's `name`"},
			{flag: "plan", to: "plan.name", need: true, help: "the plan's `name`"},
			{flag: "quota", to: "plan.quotaLimit", kind: number, need: true, help: "verifications a period (`n`)"},
			{flag: "rate-bank", to: "plan.rateBank", kind: number, need: true, help: "bank verifications a second (`n`)"},
			{flag: "rate-wallet", to: "plan.rateWallet", kind: number, need: true, help: "wallet verifications a second (`n`)"},
			{flag: "anchor-day", to: "plan.cycleAnchorDay", kind: number, def: "1", help: "the `day` of the month a period starts"},
			{flag: "expires-at", to: "expiresAt", help: "when the service ends (`RFC3339` time)"},
			{flag: "contact-email", to: "contactEmail", help: "the operator's contact (`email`)"},
			{flag: "permissions", to: "permissions", kind: list, help: "the B2B client's comma-separated `permissions` (default: all six)"},
		},
		once: "the main branch key and the client key and secret above are shown only now: store them, they cannot be shown again"},
	{noun: "services", verb: "update", method: "PATCH", path: "/services/{s}",
		help: "Change a service's name, end date or contact; an empty value clears it (--expires-at '').",
		fields: []field{service,
			{flag: "name", to: "name", help: "the service's `name`"},
			{flag: "expires-at", to: "expiresAt", kind: nullable, help: "when the service ends (`RFC3339` time; '' clears)"},
			{flag: "contact-email", to: "contactEmail", kind: nullable, help: "the operator's contact (`email`; '' clears)"},
		}},
	{noun: "services", verb: "state", method: "PUT", path: "/services/{s}/state",
		help: "Activate or ban a service, or ban its users (banning needs --yes).",
		fields: []field{service,
			{flag: "state", to: "state", need: true, choices: []string{"active", "banned"}, yes: "banned", help: "the service's `state`"},
			{flag: "user-banned", to: "userBanned", kind: boolean, yes: "true", help: "refuse the service's users (USER_BANNED; needs --yes)"},
			reason,
		}},
	{noun: "services", verb: "plan", method: "PUT", path: "/services/{s}/plan",
		help: "Change a service's plan, now or from its next period; fields not given keep their values.",
		fields: []field{service,
			{flag: "plan", to: "name", help: "the plan's `name`"},
			{flag: "quota", to: "quotaLimit", kind: number, help: "verifications a period (`n`)"},
			{flag: "rate-bank", to: "rateBank", kind: number, help: "bank verifications a second (`n`)"},
			{flag: "rate-wallet", to: "rateWallet", kind: number, help: "wallet verifications a second (`n`)"},
			{flag: "anchor-day", to: "cycleAnchorDay", kind: number, help: "the `day` of the month a period starts (applies from the next period)"},
			{flag: "effective", to: "effective", need: true, choices: []string{"now", "nextPeriod"}, help: "`when` the change applies"},
		}},
	{noun: "services", verb: "delete", method: "DELETE", path: "/services/{s}", danger: true,
		help:   "Delete a service: its keys are refused from now on, its counters and ledger kept, its id never reused.",
		fields: []field{service, reason}},

	{noun: "keys", verb: "list", method: "GET", path: "/services/{s}/branches/{b}/keys", help: "List a branch's keys (the current one and any in overlap).",
		fields: []field{service, branch}, cols: []string{"keyId", "current", "createdAt", "expiresAt", "lastSeenAt"}},
	{noun: "keys", verb: "rotate", method: "POST", path: "/services/{s}/branches/{b}/key/rotate",
		help:   "Give a branch a new key; the previous one keeps working for the overlap.",
		fields: []field{service, branch, overlap, force},
		once:   "the new key above is shown only now: store it, it cannot be shown again"},
	{noun: "keys", verb: "revoke-previous", method: "POST", path: "/services/{s}/branches/{b}/key/revoke-previous", danger: true,
		help:   "End a branch's overlap now: its previous key is refused from now on.",
		fields: []field{service, branch}},

	{noun: "clients", verb: "list", method: "GET", path: "/services/{s}/clients",
		help:   "List a service's B2B clients; the signer, whose secret signs the requests made with branch keys, is the first.",
		fields: []field{service}, cols: []string{"id", "name", "permissions", "signer"}},
	{noun: "clients", verb: "create", method: "POST", path: "/services/{s}/clients",
		help: "Create a B2B client: the answer holds its key and secret.",
		fields: []field{service,
			{flag: "name", to: "name", need: true, help: "the client's `name`"},
			{flag: "permissions", to: "permissions", kind: list, help: "comma-separated `permissions` (default: all six)"},
		},
		once: "the client key and secret above are shown only now: store them, they cannot be shown again"},
	{noun: "clients", verb: "update", method: "PATCH", path: "/services/{s}/clients/{c}", help: "Change a B2B client's name or permissions.",
		fields: []field{service, client,
			{flag: "name", to: "name", help: "the client's `name`"},
			{flag: "permissions", to: "permissions", kind: list, help: "comma-separated `permissions`"},
		}},
	{noun: "clients", verb: "delete", method: "DELETE", path: "/services/{s}/clients/{c}", danger: true,
		help: "Delete a B2B client: its key is refused from now on.", fields: []field{service, client}},
	{noun: "clients", verb: "rotate-secret", method: "POST", path: "/services/{s}/clients/{c}/secret/rotate",
		help:   "Give a B2B client a new secret; the previous one keeps working for the overlap.",
		fields: []field{service, client, overlap, force},
		once:   "the new secret above is shown only now: store it, it cannot be shown again"},

	{noun: "tokens", verb: "list", method: "GET", path: "/tokens", help: "List the admin tokens.",
		cols: []string{"id", "name", "scope", "expiresAt", "lastUsedAt"}},
	{noun: "tokens", verb: "create", method: "POST", path: "/tokens", help: "Create an admin token.",
		fields: []field{
			{flag: "name", to: "name", need: true, help: "the token's `name`"},
			{flag: "scope", to: "scope", need: true, choices: []string{"read", "write"}, help: "what the token may do (`scope`)"},
			{flag: "expires-at", to: "expiresAt", help: "when the token stops working (`RFC3339` time)"},
		},
		once: "the token above is shown only now: store it, it cannot be shown again"},
	{noun: "tokens", verb: "delete", method: "DELETE", path: "/tokens/{t}", danger: true, help: "Revoke an admin token.",
		fields: []field{{flag: "id", to: "{t}", need: true, help: "the token's `id`"}}},

	{noun: "audit", method: "GET", path: "/audit", pages: true, help: "Show the audit log, newest first.",
		fields: []field{
			{flag: "service", to: "?service", help: "only this service's records (`id`)"},
			{flag: "action", to: "?action", help: "only this `action`, e.g. service.plan"},
			{flag: "since", to: "?since", help: "only records from this `time` on"},
			{flag: "until", to: "?until", help: "only records before this `time`"},
			{flag: "cursor", to: "?cursor", help: "start at this `cursor` (a previous page's nextCursor)"},
			{flag: "limit", to: "?limit", help: "records a page (`n`, server default 100)"},
		},
		cols: []string{"at", "actor.type", "actor.name", "action", "serviceId", "target.type", "target.id", "reason"}},
	{noun: "export", method: "GET", path: "/export", jsonOnly: true,
		help: "Print every record in the seed's format, without keys or secrets (always JSON)."},

	{noun: "b2b", verb: "get", method: "GET", path: "/services/{s}/b2b{p}", help: "Send GET /b2b/... as the service.",
		fields: []field{service, b2bPath}},
	{noun: "b2b", verb: "post", method: "POST", path: "/services/{s}/b2b{p}", help: "Send POST /b2b/... as the service.",
		fields: []field{service, b2bPath, b2bBody}},
	{noun: "b2b", verb: "put", method: "PUT", path: "/services/{s}/b2b{p}", help: "Send PUT /b2b/... as the service.",
		fields: []field{service, b2bPath, b2bBody}},
	{noun: "b2b", verb: "patch", method: "PATCH", path: "/services/{s}/b2b{p}", help: "Send PATCH /b2b/... as the service.",
		fields: []field{service, b2bPath, b2bBody}},
	{noun: "b2b", verb: "delete", method: "DELETE", path: "/services/{s}/b2b{p}", danger: true, help: "Send DELETE /b2b/... as the service.",
		fields: []field{service, b2bPath}},
}
