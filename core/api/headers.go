package api

import "time"

// Internal headers the edge sends to core with every forwarded request. Core
// trusts them only together with a valid HeaderEdgeToken; the edge strips any
// a client sends.
const (
	HeaderEdgeToken = "X-Slip-Edge-Token"
	HeaderService   = "X-Slip-Service"
	HeaderBranch    = "X-Slip-Branch"
	HeaderVersion   = "X-Slip-Version"
	HeaderClientIP  = "X-Slip-Client-Ip"
	HeaderRequestID = "X-Request-Id"
	HeaderB2BClient = "X-Slip-B2b-Client"
	// HeaderNonce carries a signed request's X-Timestamp and X-Nonce, as
	// "<unix seconds>:<nonce>", for core to claim the nonce in the
	// transaction of the write the request makes: two edges that both
	// accepted a copy of the request (each before it heard of the other's
	// nonce) cannot both have it applied.
	HeaderNonce = "X-Slip-Nonce"
)

// NonceWindow is how long after its timestamp a signed request's nonce is
// remembered: the ±5 minutes a timestamp may be off, and a second more, so
// whole-second timestamps never let a replay in at the window's edge.
const NonceWindow = 5*time.Minute + time.Second

// InternalHeaders are the headers only the edge may set on a request to
// core; the edge deletes them from every client request.
var InternalHeaders = []string{HeaderEdgeToken, HeaderService, HeaderBranch, HeaderVersion,
	HeaderClientIP, HeaderRequestID, HeaderB2BClient, HeaderNonce}

// HeaderOverload is set by core on a response ("1") while it holds more
// requests in flight than it is configured to; the edge lowers its rate
// limits when it sees it.
const HeaderOverload = "X-Slip-Overload"

// HeaderTokenRefused is set by core ("1") on its answer to a request without
// the right HeaderEdgeToken, so an edge whose token core no longer takes
// (a rotation half done) answers its callers API_SERVER_ERROR rather than
// pass core's refusal on.
const HeaderTokenRefused = "X-Slip-Token-Refused"
