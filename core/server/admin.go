package server

import (
	"crypto/subtle"
	"errors"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/seed"
	"github.com/slipverify/slipverify/core/store"
)

// AdminPrefix is where the operators' admin API lives, on its own
// listener (SLIP_ADMIN_ADDR); the edge never forwards to it.
const AdminPrefix = "/admin/v1"

// MinAdminToken is the shortest bootstrap token core accepts.
const MinAdminToken = 32

// MaxAdminBody is the largest request body the admin API reads.
const MaxAdminBody = 1 << 20

// admin serves the admin API. Operators authenticate with the bootstrap
// token or a named token of the store; a read token may only read.
type admin struct {
	s         *Server
	bootstrap []byte
	used      sync.Map // token id → time.Time of its last use, since core started
}

// adminCaller is who calls the admin API.
type adminCaller struct {
	actor     api.AuditActor
	write     bool
	requestID string
	expires   *time.Time // when the caller's token ends; nil: never
}

type adminHandler func(ctx *fasthttp.RequestCtx, a adminCaller) (any, error)

// AdminServer returns the server of the admin API's listener,
// authenticating with the bootstrap token given (at least MinAdminToken
// characters) and the named tokens: its routes, its bounds, and the answer
// to a request fasthttp refuses before any handler runs, in the v2
// envelope like every other answer. logger gets fasthttp's own messages
// (nil: its default).
func (s *Server) AdminServer(bootstrap string, logger fasthttp.Logger) *fasthttp.Server {
	a := &admin{s: s, bootstrap: []byte(bootstrap)}
	return &fasthttp.Server{Handler: a.handler(), ErrorHandler: a.refused, NoDefaultServerHeader: true, Logger: logger,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, MaxRequestBodySize: MaxAdminBody,
		SecureErrorLogMessage: true} // fasthttp would quote a malformed request, a token in it, in the log
}

// refused answers a request that fasthttp refused before the handler ran.
// A body over MaxAdminBody is refused from its Content-Length, before it is
// read; its head is there, so a caller without a token learns only that.
// Anything else (a head too large, malformed, or cut by the read timeout)
// has been reset: VALIDATION_ERROR. A connection that failed before it
// sent anything gets no answer: there is no request.
func (a *admin) refused(ctx *fasthttp.RequestCtx, err error) {
	if _, bare := err.(*net.OpError); bare {
		ctx.Conn().Close()
		return
	}
	var e error = api.Errorf(api.Validation, "request: malformed, too large a head, or not read in time")
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		e = api.Errorf(api.Validation, "body: larger than the admin API's "+strconv.Itoa(MaxAdminBody>>20)+" MiB")
		if _, cerr := a.caller(ctx); cerr != nil {
			e = cerr
		}
	}
	a.s.respond(ctx, api.V2, nil, e)
	ctx.SetConnectionClose()
}

// handler routes the admin API. Every answer, of every path and method,
// needs a token: OPTIONS is not answered for the router, paths are not
// redirected, and a path no route has is NOT_FOUND only to a caller with a
// token.
func (a *admin) handler() fasthttp.RequestHandler {
	s := a.s
	r := router.New()
	r.HandleMethodNotAllowed = false
	r.HandleOPTIONS = false
	r.RedirectTrailingSlash, r.RedirectFixedPath = false, false
	read := func(h adminHandler) fasthttp.RequestHandler { return a.guard(false, h) }
	write := func(h adminHandler) fasthttp.RequestHandler { return a.guard(true, h) }
	p := AdminPrefix
	r.GET(p+"/services", read(a.listServices))
	r.POST(p+"/services", write(a.createService))
	r.GET(p+"/services/{s}", read(a.getService))
	r.PATCH(p+"/services/{s}", write(a.patchService))
	r.PUT(p+"/services/{s}/state", write(a.putState))
	r.PUT(p+"/services/{s}/plan", write(a.putPlan))
	r.DELETE(p+"/services/{s}", write(a.deleteService))
	r.GET(p+"/services/{s}/branches/{b}/keys", read(a.listKeys))
	r.POST(p+"/services/{s}/branches/{b}/key/rotate", write(a.rotateKey))
	r.POST(p+"/services/{s}/branches/{b}/key/revoke-previous", write(a.revokePrevious))
	r.GET(p+"/services/{s}/clients", read(a.listClients))
	r.POST(p+"/services/{s}/clients", write(a.createClient))
	r.PATCH(p+"/services/{s}/clients/{c}", write(a.patchClient))
	r.DELETE(p+"/services/{s}/clients/{c}", write(a.deleteClient))
	r.POST(p+"/services/{s}/clients/{c}/secret/rotate", write(a.rotateSecret))
	r.GET(p+"/export", read(a.export))
	// The tenant's own management routes, on a service the operator names:
	// the one implementation of /b2b, with every permission. A change to a
	// deleted service is refused by the store, as every other change to it
	// is (the edge refuses its tenant's keys before they reach /b2b).
	b2b := s.Handler()
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		r.Handle(m, p+"/services/{s}/b2b/{rest:*}", a.guard(m != "GET", func(ctx *fasthttp.RequestCtx, c adminCaller) (any, error) {
			a.asTenant(ctx, c, b2b)
			if st := ctx.Response.StatusCode(); st >= 300 && st < 400 {
				// core's router redirects a path it would mend (a trailing
				// slash, another case) to a /b2b path of its own: no such
				// path here.
				ctx.Response.Header.Del(fasthttp.HeaderLocation)
				return nil, api.E(api.NotFound)
			}
			return nil, errAnswered
		}))
	}
	r.GET(p+"/tokens", read(a.listTokens))
	r.POST(p+"/tokens", write(a.createToken))
	r.DELETE(p+"/tokens/{t}", write(a.deleteToken))
	r.GET(p+"/audit", read(a.audit))
	r.NotFound = a.guard(false, func(*fasthttp.RequestCtx, adminCaller) (any, error) { return nil, api.E(api.NotFound) })
	return r.Handler
}

// guard authenticates the caller and runs h: a write needs a write token.
func (a *admin) guard(write bool, h adminHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		c, err := a.caller(ctx)
		if err == nil && write && !c.write {
			err = api.Errorf(api.PermissionDenied, "this admin token has the read scope")
		}
		var data any
		if err == nil {
			data, err = h(ctx, c)
		}
		if err != errAnswered {
			a.s.respond(ctx, api.V2, data, err)
		}
	}
}

// errAnswered tells guard that its handler wrote the answer itself.
var errAnswered = errors.New("admin: answered")

// asTenant runs a /b2b request on the named service as the edge forwards a
// tenant's, with the operator as its client.
func (a *admin) asTenant(ctx *fasthttp.RequestCtx, c adminCaller, b2b fasthttp.RequestHandler) {
	h := &ctx.Request.Header
	h.Set(api.HeaderEdgeToken, string(a.s.edgeToken))
	h.Set(api.HeaderService, param(ctx, "s"))
	h.Set(api.HeaderB2BClient, "admin:"+c.actor.ID)
	h.Set(api.HeaderRequestID, c.requestID)
	h.Del(api.HeaderBranch)
	ctx.URI().SetPath("/b2b/" + param(ctx, "rest"))
	b2b(ctx)
}

func (a *admin) caller(ctx *fasthttp.RequestCtx) (adminCaller, error) {
	c := adminCaller{requestID: string(ctx.Request.Header.Peek(api.HeaderRequestID))}
	if c.requestID == "" {
		c.requestID = uuid.NewString()
		ctx.Response.Header.Set(api.HeaderRequestID, c.requestID)
	}
	auth := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	token, ok := strings.CutPrefix(string(auth), "Bearer ")
	switch {
	case len(auth) == 0:
		return c, api.Errorf(api.MissingAPIKey, "Authorization: Bearer <admin token> is required")
	case !ok || token == "":
		return c, api.Errorf(api.InvalidAPIKey, "admin token is invalid")
	case subtle.ConstantTimeCompare([]byte(token), a.bootstrap) == 1:
		c.actor, c.write = api.AuditActor{Type: api.ActorAdmin, ID: "bootstrap", Name: "SLIP_ADMIN_TOKEN"}, true
		return c, nil
	}
	t, err := a.s.store.AdminTokenByDigest(store.Digest(token))
	if errors.Is(err, store.ErrNotFound) {
		return c, api.Errorf(api.InvalidAPIKey, "admin token is invalid, revoked or expired")
	} else if err != nil {
		return c, api.Internal(err)
	}
	a.used.Store(t.ID, time.Now().UTC())
	c.actor, c.write = api.AuditActor{Type: api.ActorAdmin, ID: t.ID, Name: t.Name}, t.Scope == store.ScopeWrite
	c.expires = t.ExpiresAt
	return c, nil
}

func (c adminCaller) change(reason string) store.Change {
	return store.Change{Actor: c.actor, RequestID: c.requestID, Reason: reason}
}

// PlanView is a service's plan as the admin API shows it.
type PlanView struct {
	Name           string `json:"name"`
	QuotaLimit     int64  `json:"quotaLimit"`
	RateBank       int    `json:"rateBank"`
	RateWallet     int    `json:"rateWallet"`
	CycleAnchorDay int    `json:"cycleAnchorDay"`
}

// PendingPlanView is a plan that applies from the period starting at
// EffectiveFrom.
type PendingPlanView struct {
	PlanView
	EffectiveFrom time.Time `json:"effectiveFrom"`
}

// ServiceView is a service as the admin API shows it.
type ServiceView struct {
	ID           string           `json:"id"`
	Name         string           `json:"name"`
	State        string           `json:"state"`
	StateReason  string           `json:"stateReason,omitempty"`
	UserBanned   bool             `json:"userBanned"`
	ExpiresAt    *time.Time       `json:"expiresAt"`
	ContactEmail *string          `json:"contactEmail"`
	Plan         PlanView         `json:"plan"`
	PendingPlan  *PendingPlanView `json:"pendingPlan"`
	Usage        struct {
		PeriodStart    time.Time `json:"periodStart"`
		PeriodEnd      time.Time `json:"periodEnd"`
		UsedQuota      int64     `json:"usedQuota"`
		TotalUsedQuota int64     `json:"totalUsedQuota"`
	} `json:"usage"`
	CreatedAt *time.Time `json:"createdAt"`
}

func planView(p store.Plan) PlanView {
	return PlanView{Name: p.Name, QuotaLimit: p.QuotaLimit, RateBank: p.Rate.Bank, RateWallet: p.Rate.Wallet, CycleAnchorDay: p.CycleAnchorDay}
}

func serviceView(sv store.Service, used quota.Counter, period int64) ServiceView {
	v := ServiceView{ID: sv.ID, Name: sv.Name, State: sv.State, StateReason: sv.StateReason, UserBanned: sv.UserBanned,
		ExpiresAt: sv.ExpiresAt, ContactEmail: sv.ContactEmail, Plan: planView(sv.Plan()), CreatedAt: sv.CreatedAt}
	if p := sv.Pending; p != nil {
		v.PendingPlan = &PendingPlanView{PlanView: planView(p.Plan), EffectiveFrom: time.Unix(p.From, 0).In(quota.Bangkok)}
	}
	start := time.Unix(period, 0).In(quota.Bangkok)
	v.Usage.PeriodStart, v.Usage.PeriodEnd = start, sv.PeriodEnd(start)
	v.Usage.UsedQuota, v.Usage.TotalUsedQuota = used.Used, used.Total
	return v
}

func (a *admin) view(id string) (ServiceView, error) {
	sv, used, period, err := a.s.store.Service(id)
	if err != nil {
		return ServiceView{}, adminError(err, "service "+id)
	}
	return serviceView(sv, used, period), nil
}

func (a *admin) listServices(_ *fasthttp.RequestCtx, _ adminCaller) (any, error) {
	list, err := a.s.store.Services()
	if err != nil {
		return nil, api.Internal(err)
	}
	out := make([]ServiceView, 0, len(list))
	for _, sv := range list {
		v, err := a.view(sv.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (a *admin) getService(ctx *fasthttp.RequestCtx, _ adminCaller) (any, error) {
	return a.view(param(ctx, "s"))
}

// adminError maps the store's errors to the catalog; what names the
// record.
func adminError(err error, what string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return api.Errorf(api.NotFound, what+" not found")
	case errors.Is(err, store.ErrExists):
		return api.Errorf(api.Conflict, what+": the id or key is in use (ids of deleted records too are never reused)")
	case errors.Is(err, store.ErrOverlapOpen):
		return api.Errorf(api.Conflict, what+": the previous key's overlap is still open; revoke it first, or rotate with force")
	}
	return manageError(err, what)
}

// nameField refuses, naming field, a name that api.NameProblem refuses
// (control or bidirectional formatting characters), and reports whether
// the name may be stored.
func nameField(fe *api.FieldErrors, field, name string) bool {
	if p := api.NameProblem(name); p != "" {
		fe.Add(field, p)
		return false
	}
	return true
}

var serviceID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// createService onboards a tenant: the service, its main branch (ipAllow
// *) and a B2B client with every permission unless given; the keys and the
// secret are shown in this answer only.
func (a *admin) createService(ctx *fasthttp.RequestCtx, c adminCaller) (any, error) {
	f, err := jsonFields(ctx.PostBody())
	if err != nil {
		return nil, err
	}
	var fe api.FieldErrors
	f.only(&fe, "id", "name", "plan", "expiresAt", "contactEmail", "permissions")
	now := a.s.store.Now().UTC()
	sv := store.Service{ID: "svc-" + randomHex(6), State: store.StateActive, CreatedAt: &now}
	if f.has("id") {
		if id, ok := f.str("id"); ok && serviceID.MatchString(id) {
			sv.ID = id
		} else {
			fe.Add("id", "must be 1 to 64 letters, digits, '.', '_' or '-'")
		}
	}
	if name, ok := f.str("name"); !ok || strings.TrimSpace(name) == "" || len(name) > 200 {
		f.want(&fe, "name", "a name of 1 to 200 characters")
	} else if nameField(&fe, "name", name) {
		sv.Name = name
	}
	if !f.has("plan") {
		fe.Add("plan", "is required: {name, quotaLimit, rateBank, rateWallet, cycleAnchorDay}")
	} else if p, ok := planFields(&fe, f, store.Plan{}, true); ok {
		sv.QuotaLimit, sv.Rate, sv.CycleAnchorDay, sv.PlanName = p.QuotaLimit, p.Rate, p.CycleAnchorDay, p.Name
	}
	termFields(&fe, f, &sv)
	perms := api.Permissions
	permissionsField(&fe, f, &perms)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	branchKey, clientKey, secretText := uuid.NewString(), randomHex(32), randomHex(24)
	main := seed.Branch{ID: sv.ID + "-main", Name: "Main", Main: true, Key: branchKey, Active: true}.Record(a.s.box, sv.ID)
	main.KeyCreatedAt = &now
	client := seed.B2BClient{Key: clientKey, Secret: secretText, Permissions: perms}.Record(a.s.box, sv.ID)
	clientDigest := client.KeyDigest
	if err := a.s.store.CreateService(sv, main, client, c.change("")); err != nil {
		return nil, adminError(err, "service "+sv.ID)
	}
	v, err := a.view(sv.ID)
	if err != nil {
		return nil, err
	}
	type branchKeyView struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	type clientView struct {
		ID          string   `json:"id"`
		Key         string   `json:"key"`
		Secret      string   `json:"secret"`
		Permissions []string `json:"permissions"`
	}
	return created(struct {
		ServiceView
		MainBranch branchKeyView `json:"mainBranch"`
		Client     clientView    `json:"client"`
	}{v, branchKeyView{main.ID, branchKey}, clientView{clientDigest[:16], clientKey, secretText, perms}}), nil
}

// termFields reads expiresAt and contactEmail (null clears either).
func termFields(fe *api.FieldErrors, f fields, sv *store.Service) {
	if f.has("expiresAt") {
		if f.null("expiresAt") {
			sv.ExpiresAt = nil
		} else if s, ok := f.str("expiresAt"); !ok {
			fe.Add("expiresAt", "must be an RFC 3339 time or null")
		} else if t, err := time.Parse(time.RFC3339, s); err != nil {
			fe.Add("expiresAt", "must be an RFC 3339 time or null")
		} else {
			t = t.UTC()
			sv.ExpiresAt = &t
		}
	}
	if f.has("contactEmail") {
		if f.null("contactEmail") {
			sv.ContactEmail = nil
		} else if s, ok := f.str("contactEmail"); !ok {
			fe.Add("contactEmail", "must be an email address or null")
		} else if p := api.EmailProblem(s); p != "" {
			fe.Add("contactEmail", p)
		} else {
			sv.ContactEmail = &s
		}
	}
}

// planFields reads a plan from f (its "plan" object when nested, else f
// itself, every field then required), over base: fields not sent keep
// base's values.
func planFields(fe *api.FieldErrors, f fields, base store.Plan, nested bool) (store.Plan, bool) {
	p := base
	n := fe.Len()
	prefix := ""
	if nested {
		prefix = "plan."
		pf, err := jsonFields(f.json["plan"])
		if err != nil {
			fe.Add("plan", "must be an object {name, quotaLimit, rateBank, rateWallet, cycleAnchorDay}")
			return p, false
		}
		f = pf
		var unknown api.FieldErrors
		f.only(&unknown, "name", "quotaLimit", "rateBank", "rateWallet", "cycleAnchorDay")
		fe.AddAll(prefix, unknown)
		for _, name := range []string{"name", "quotaLimit", "rateBank", "rateWallet", "cycleAnchorDay"} {
			if !f.has(name) {
				fe.Add("plan."+name, "is required")
			}
		}
	}
	if f.has("name") {
		if s, ok := f.str("name"); !ok || len(s) > 100 {
			fe.Add(prefix+"name", "must be a plan name of at most 100 characters")
		} else if nameField(fe, prefix+"name", s) {
			p.Name = s
		}
	}
	ints := []struct {
		name     string
		min, max int64
		set      func(int64)
	}{
		{"quotaLimit", 0, 1 << 50, func(v int64) { p.QuotaLimit = v }},
		{"rateBank", 1, 100_000, func(v int64) { p.Rate.Bank = int(v) }},
		{"rateWallet", 1, 100_000, func(v int64) { p.Rate.Wallet = int(v) }},
		{"cycleAnchorDay", 1, 31, func(v int64) { p.CycleAnchorDay = int(v) }},
	}
	for _, x := range ints {
		if !f.has(x.name) {
			continue
		}
		if v, ok := f.integer(x.name); ok && v >= x.min && v <= x.max {
			x.set(v)
		} else {
			fe.Add(prefix+x.name, "must be a whole number from "+strconv.FormatInt(x.min, 10)+" to "+strconv.FormatInt(x.max, 10))
		}
	}
	return p, fe.Len() == n
}

func (a *admin) patchService(ctx *fasthttp.RequestCtx, c adminCaller) (any, error) {
	f, err := jsonFields(ctx.PostBody())
	if err != nil {
		return nil, err
	}
	var fe api.FieldErrors
	f.only(&fe, "name", "expiresAt", "contactEmail")
	name, nameOK := f.str("name")
	if f.has("name") && (!nameOK || strings.TrimSpace(name) == "" || len(name) > 200) {
		fe.Add("name", "must be a name of 1 to 200 characters")
	} else if f.has("name") {
		nameField(&fe, "name", name)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return a.update(ctx, c, "service.update", "", func(sv *store.Service, _ quota.Counter, _ time.Time) error {
		if f.has("name") {
			sv.Name = name
		}
		var fe api.FieldErrors
		termFields(&fe, f, sv)
		return fe.Err()
	})
}

// update changes a service and answers its view.
func (a *admin) update(ctx *fasthttp.RequestCtx, c adminCaller, action, reason string,
	change func(*store.Service, quota.Counter, time.Time) error) (any, error) {
	id := param(ctx, "s")
	if _, err := a.s.store.UpdateService(id, action, c.change(reason), change); err != nil {
		return nil, adminError(err, "service "+id)
	}
	return a.view(id)
}

// reason reads the required reason of a state change.
func reason(fe *api.FieldErrors, f fields) string {
	s, ok := f.str("reason")
	if !ok || strings.TrimSpace(s) == "" || len(s) > 500 {
		f.want(fe, "reason", "why, in at most 500 characters (kept in the audit log)")
	} else {
		nameField(fe, "reason", s)
	}
	return s
}

func (a *admin) putState(ctx *fasthttp.RequestCtx, c adminCaller) (any, error) {
	f, err := jsonFields(ctx.PostBody())
	if err != nil {
		return nil, err
	}
	var fe api.FieldErrors
	f.only(&fe, "state", "userBanned", "reason")
	state, ok := f.str("state")
	if !ok || state != store.StateActive && state != store.StateBanned {
		f.want(&fe, "state", "active or banned (a term's end is expiresAt; removal is DELETE)")
	}
	banned, bannedOK := f.boolean("userBanned")
	if f.has("userBanned") && !bannedOK {
		fe.Add("userBanned", "must be a boolean")
	}
	why := reason(&fe, f)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return a.update(ctx, c, "service.state", why, func(sv *store.Service, _ quota.Counter, _ time.Time) error {
		sv.State, sv.StateReason = state, why
		if f.has("userBanned") {
			sv.UserBanned = banned
		}
		return nil
	})
}

// putPlan changes a service's plan now or from its next period. A quota
// below what the period has used is refused, naming it; the billing anchor
// day changes from the next period only: the first period under it runs
// from the current one's end to the new anchor day (Service.PeriodStart).
func (a *admin) putPlan(ctx *fasthttp.RequestCtx, c adminCaller) (any, error) {
	f, err := jsonFields(ctx.PostBody())
	if err != nil {
		return nil, err
	}
	var fe api.FieldErrors
	f.only(&fe, "name", "quotaLimit", "rateBank", "rateWallet", "cycleAnchorDay", "effective")
	effective, ok := f.str("effective")
	if !ok || effective != "now" && effective != "nextPeriod" {
		f.want(&fe, "effective", `"now" or "nextPeriod"`)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return a.update(ctx, c, "service.plan", "", func(sv *store.Service, used quota.Counter, now time.Time) error {
		var fe api.FieldErrors
		p, _ := planFields(&fe, f, sv.Plan(), false)
		if p.CycleAnchorDay != sv.CycleAnchorDay && effective == "now" {
			fe.Add("cycleAnchorDay", `changes only from the next period (effective: "nextPeriod"): a period already begun keeps its end`)
		}
		if effective == "now" && p.QuotaLimit < used.Used {
			fe.Add("quotaLimit", "must not be below the "+strconv.FormatInt(used.Used, 10)+" used in the current period")
		}
		if err := fe.Err(); err != nil {
			return err
		}
		if effective == "now" {
			sv.QuotaLimit, sv.Rate, sv.PlanName, sv.Pending = p.QuotaLimit, p.Rate, p.Name, nil
			return nil
		}
		sv.Pending = &store.PendingPlan{Plan: p, From: sv.PeriodEnd(sv.PeriodStart(now)).Unix()}
		return nil
	})
}

// deleteService removes a tenant: its keys are refused from now on, its
// counters and ledger stay, and its id is never used again.
func (a *admin) deleteService(ctx *fasthttp.RequestCtx, c adminCaller) (any, error) {
	f, err := jsonFields(ctx.PostBody())
	if err != nil {
		return nil, err
	}
	var fe api.FieldErrors
	f.only(&fe, "reason")
	why := reason(&fe, f)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return a.update(ctx, c, "service.delete", why, func(sv *store.Service, _ quota.Counter, _ time.Time) error {
		sv.State, sv.StateReason = store.StateDeleted, why
		return nil
	})
}

// KeyView is one of a branch's keys, never the key itself.
type KeyView struct {
	KeyID      string     `json:"keyId"` // the first 16 hex digits of its digest
	CreatedAt  *time.Time `json:"createdAt"`
	ExpiresAt  *time.Time `json:"expiresAt"`
	LastSeenAt *time.Time `json:"lastSeenAt"` // when an edge last fetched its record, since core started
	Current    bool       `json:"current"`
}

func (a *admin) keyView(digest string, created, expires *time.Time, current bool) KeyView {
	v := KeyView{KeyID: digest[:16], CreatedAt: created, ExpiresAt: expires, Current: current}
	if t, ok := a.s.keysSeen.Load(digest); ok {
		seen := t.(time.Time).UTC()
		v.LastSeenAt = &seen
	}
	return v
}

func (a *admin) listKeys(ctx *fasthttp.RequestCtx, _ adminCaller) (any, error) {
	sid, bid := param(ctx, "s"), param(ctx, "b")
	b, err := a.s.store.Branch(sid, bid)
	if err != nil {
		return nil, adminError(err, "branch "+bid)
	}
	out := []KeyView{a.keyView(b.KeyDigest, b.KeyCreatedAt, nil, true)}
	if p := b.Previous; p != nil {
		out = append(out, a.keyView(p.Digest, p.CreatedAt, &p.ExpiresAt, false))
	}
	return out, nil
}

// maxOverlap bounds a rotation's overlap.
const maxOverlap = 168 * time.Hour

func (a *admin) rotateKey(ctx *fasthttp.RequestCtx, c adminCaller) (any, error) {
	return rotateBranchKey(a.s, ctx, param(ctx, "s"), c.change(""))
}

// rotationFields reads a rotation's {overlap?, force?}: overlap a
// duration of 0s to 168h, default 24h.
func rotationFields(ctx *fasthttp.RequestCtx) (time.Duration, bool, error) {
	overlap, force := 24*time.Hour, false
	if len(ctx.PostBody()) == 0 {
		return overlap, force, nil
	}
	f, err := jsonFields(ctx.PostBody())
	if err != nil {
		return 0, false, err
	}
	var fe api.FieldErrors
	f.only(&fe, "overlap", "force")
	if f.has("overlap") {
		o, ok := f.str("overlap")
		d, err := time.ParseDuration(o)
		if !ok || err != nil || d < 0 || d > maxOverlap {
			fe.Add("overlap", `must be a duration from "0s" to "168h"`)
		}
		overlap = d
	}
	if f.has("force") {
		var ok bool
		if force, ok = f.boolean("force"); !ok {
			fe.Add("force", "must be a boolean")
		}
	}
	return overlap, force, fe.Err()
}

// rotated is the answer of a rotation: the new credential under name,
// shown only here, and when the previous one stops ({expiresAt}, or null).
func rotated(credential string, overlaps bool, ends func() time.Time, name string) map[string]any {
	out := map[string]any{name: credential, "previous": nil}
	if overlaps {
		out["previous"] = map[string]any{"expiresAt": ends()}
	}
	return out
}

// rotateBranchKey rotates a branch's key and answers {key, previous
// {expiresAt}}: the operator's and the tenant's rotation are one.
func rotateBranchKey(s *Server, ctx *fasthttp.RequestCtx, serviceID string, ch store.Change) (any, error) {
	overlap, force, err := rotationFields(ctx)
	if err != nil {
		return nil, err
	}
	bid := param(ctx, "b")
	if bid == "" {
		bid = param(ctx, "branch")
	}
	key := uuid.NewString()
	b, err := s.store.RotateBranchKey(serviceID, bid, store.Digest(key), overlap, force, ch)
	if err != nil {
		return nil, adminError(err, "branch "+bid)
	}
	return rotated(key, b.Previous != nil, func() time.Time { return b.Previous.ExpiresAt }, "key"), nil
}

func (a *admin) revokePrevious(ctx *fasthttp.RequestCtx, c adminCaller) (any, error) {
	sid, bid := param(ctx, "s"), param(ctx, "b")
	if _, err := a.s.store.RevokePreviousKey(sid, bid, c.change("")); err != nil {
		return nil, adminError(err, "branch "+bid)
	}
	b, err := a.s.store.Branch(sid, bid)
	if err != nil {
		return nil, adminError(err, "branch "+bid)
	}
	return a.s.view(caller{serviceID: sid}, b)
}

// TokenView is an admin token, never the token itself.
type TokenView struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Scope      string     `json:"scope"`
	CreatedAt  time.Time  `json:"createdAt"`
	ExpiresAt  *time.Time `json:"expiresAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"` // since core started
	Token      string     `json:"token,omitempty"`
}

func (a *admin) tokenView(t store.AdminToken) TokenView {
	v := TokenView{ID: t.ID, Name: t.Name, Scope: t.Scope, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
	if u, ok := a.used.Load(t.ID); ok {
		at := u.(time.Time)
		v.LastUsedAt = &at
	}
	return v
}

func (a *admin) listTokens(_ *fasthttp.RequestCtx, _ adminCaller) (any, error) {
	list, err := a.s.store.AdminTokens()
	if err != nil {
		return nil, api.Internal(err)
	}
	out := make([]TokenView, 0, len(list))
	for _, t := range list {
		out = append(out, a.tokenView(t))
	}
	return out, nil
}

func (a *admin) createToken(ctx *fasthttp.RequestCtx, c adminCaller) (any, error) {
	f, err := jsonFields(ctx.PostBody())
	if err != nil {
		return nil, err
	}
	var fe api.FieldErrors
	f.only(&fe, "name", "scope", "expiresAt")
	t := store.AdminToken{ID: "tok-" + randomHex(6), CreatedAt: a.s.store.Now().UTC()}
	var ok bool
	if t.Name, ok = f.str("name"); !ok || strings.TrimSpace(t.Name) == "" || len(t.Name) > 100 {
		f.want(&fe, "name", "a name of 1 to 100 characters")
	} else {
		nameField(&fe, "name", t.Name)
	}
	if t.Scope, ok = f.str("scope"); !ok || t.Scope != store.ScopeRead && t.Scope != store.ScopeWrite {
		f.want(&fe, "scope", "read or write")
	}
	if f.has("expiresAt") && !f.null("expiresAt") {
		s, _ := f.str("expiresAt")
		if at, err := time.Parse(time.RFC3339, s); err != nil || !at.After(t.CreatedAt) {
			fe.Add("expiresAt", "must be an RFC 3339 time in the future, or null")
		} else {
			at = at.UTC()
			t.ExpiresAt = &at
		}
	}
	// A token ends no later than the token that makes it, or an expiring
	// token could make one that never ends.
	if end := c.expires; end != nil {
		switch {
		case t.ExpiresAt == nil:
			at := end.UTC()
			t.ExpiresAt = &at
		case t.ExpiresAt.After(*end):
			fe.Add("expiresAt", "must not be after the expiry of the token making it ("+end.UTC().Format(time.RFC3339)+")")
		}
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	token := "sa_" + randomHex(32)
	t.Digest = store.Digest(token)
	if err := a.s.store.CreateAdminToken(t, c.change("")); err != nil {
		return nil, adminError(err, "token")
	}
	v := a.tokenView(t)
	v.Token = token
	return created(v), nil
}

func (a *admin) deleteToken(ctx *fasthttp.RequestCtx, c adminCaller) (any, error) {
	id := param(ctx, "t")
	if err := a.s.store.DeleteAdminToken(id, c.change("")); err != nil {
		return nil, adminError(err, "token "+id)
	}
	return map[string]any{"id": id, "deleted": true}, nil
}

// audit answers {items, nextCursor}, newest first.
func (a *admin) audit(ctx *fasthttp.RequestCtx, _ adminCaller) (any, error) {
	q := ctx.QueryArgs()
	f := store.AuditFilter{ServiceID: string(q.Peek("service")), Action: string(q.Peek("action")),
		Cursor: string(q.Peek("cursor")), Limit: 100}
	var fe api.FieldErrors
	for _, x := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Peek(x.name); len(v) > 0 {
			t, err := time.Parse(time.RFC3339, string(v))
			if err != nil {
				fe.Add(x.name, "must be an RFC 3339 time")
			}
			*x.dst = t
		}
	}
	if v := q.Peek("limit"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > 1000 {
			fe.Add("limit", "must be 1 to 1000")
		}
		f.Limit = n
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	items, next, err := a.s.store.Audit(f)
	if err != nil {
		if errors.Is(err, store.ErrBadCursor) {
			return nil, api.Errorf(api.Validation, "cursor: not a cursor of this log")
		}
		return nil, api.Internal(err)
	}
	if items == nil {
		items = []api.AuditRecord{}
	}
	return struct {
		Items      []api.AuditRecord `json:"items"`
		NextCursor *string           `json:"nextCursor"`
	}{items, nullable(next)}, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ClientView is a B2B client as the admin API shows it: Key and Secret only
// in the answer that creates it (or rotates its secret). Signer marks the
// client whose secret signs the requests made with the service's branch
// keys (its first).
type ClientView struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Permissions []string   `json:"permissions"`
	Signer      bool       `json:"signer"`
	Previous    *time.Time `json:"previousSecretExpiresAt"`
	Key         string     `json:"key,omitempty"`
	Secret      string     `json:"secret,omitempty"`
}

// clientView shows a client of a service read now (signer: its first).
func (a *admin) clientView(c store.B2BClient) ClientView {
	list, _ := a.s.store.Clients(c.ServiceID)
	return clientViewOf(c, len(list) > 0 && list[0].KeyDigest == c.KeyDigest)
}

func clientViewOf(c store.B2BClient, signer bool) ClientView {
	v := ClientView{ID: c.ID(), Name: c.Name, Permissions: c.Permissions, Signer: signer}
	if c.Previous != nil {
		v.Previous = &c.Previous.ExpiresAt
	}
	return v
}

func (a *admin) listClients(ctx *fasthttp.RequestCtx, _ adminCaller) (any, error) {
	sid := param(ctx, "s")
	if _, _, _, err := a.s.store.Service(sid); err != nil {
		return nil, adminError(err, "service "+sid)
	}
	list, err := a.s.store.Clients(sid)
	if err != nil {
		return nil, api.Internal(err)
	}
	out := make([]ClientView, 0, len(list))
	for i, c := range list {
		out = append(out, clientViewOf(c, i == 0))
	}
	return out, nil
}

// clientFields reads a client's name and permissions.
func clientFields(fe *api.FieldErrors, f fields, c *store.B2BClient) {
	f.only(fe, "name", "permissions")
	if f.has("name") {
		if name, ok := f.str("name"); !ok || len(name) > 100 {
			fe.Add("name", "must be a name of at most 100 characters")
		} else if nameField(fe, "name", name) {
			c.Name = name
		}
	}
	permissionsField(fe, f, &c.Permissions)
}

// permissionsField reads field permissions, when sent, into dst: a list
// of api.Permissions. It decodes into a list of its own, never into the
// one dst held (api.Permissions itself, as a default).
func permissionsField(fe *api.FieldErrors, f fields, dst *[]string) {
	if !f.has("permissions") {
		return
	}
	var perms []string
	if err := jsonInto(f, "permissions", &perms); err != nil || len(perms) == 0 {
		fe.Add("permissions", "must be a list of "+strings.Join(api.Permissions, ", "))
	}
	for _, p := range perms {
		if api.PermissionBit(p) == 0 {
			fe.Add("permissions", "unknown permission "+strconv.Quote(p))
		}
	}
	*dst = perms
}

func (a *admin) createClient(ctx *fasthttp.RequestCtx, ac adminCaller) (any, error) {
	f, err := jsonFields(ctx.PostBody())
	if err != nil {
		return nil, err
	}
	key, secretText := randomHex(32), randomHex(24)
	probe := store.B2BClient{Permissions: api.Permissions}
	var fe api.FieldErrors
	clientFields(&fe, f, &probe)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	c := seed.B2BClient{Name: probe.Name, Key: key, Secret: secretText, Permissions: probe.Permissions}.Record(a.s.box, param(ctx, "s"))
	c, err = a.s.store.CreateClient(c, ac.change(""))
	if err != nil {
		return nil, adminError(err, "service "+c.ServiceID)
	}
	v := a.clientView(c)
	v.Key, v.Secret = key, secretText
	return created(v), nil
}

func (a *admin) patchClient(ctx *fasthttp.RequestCtx, ac adminCaller) (any, error) {
	f, err := jsonFields(ctx.PostBody())
	if err != nil {
		return nil, err
	}
	var fe api.FieldErrors
	var probe store.B2BClient
	clientFields(&fe, f, &probe)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	sid, id := param(ctx, "s"), param(ctx, "c")
	c, err := a.s.store.UpdateClient(sid, id, ac.change(""), func(c *store.B2BClient) {
		if f.has("name") {
			c.Name = probe.Name
		}
		if f.has("permissions") {
			c.Permissions = probe.Permissions
		}
	})
	if err != nil {
		return nil, adminError(err, "client "+id)
	}
	return a.clientView(c), nil
}

func (a *admin) deleteClient(ctx *fasthttp.RequestCtx, ac adminCaller) (any, error) {
	sid, id := param(ctx, "s"), param(ctx, "c")
	if err := a.s.store.DeleteClient(sid, id, ac.change("")); err != nil {
		return nil, adminError(err, "client "+id)
	}
	return map[string]any{"id": id, "deleted": true}, nil
}

// rotateSecret gives a client a new secret, shown once; the previous one
// verifies signatures too for the overlap ({overlap?, force?} as for keys).
func (a *admin) rotateSecret(ctx *fasthttp.RequestCtx, ac adminCaller) (any, error) {
	overlap, force, err := rotationFields(ctx)
	if err != nil {
		return nil, err
	}
	sid, id := param(ctx, "s"), param(ctx, "c")
	secretText := randomHex(24)
	c, err := a.s.store.RotateClientSecret(sid, id, overlap, force, ac.change(""), func(digest string) []byte {
		return a.s.box.Seal(secretText, secret.ClientLabel(digest))
	})
	if err != nil {
		return nil, adminError(err, "client "+id)
	}
	return rotated(secretText, c.Previous != nil, func() time.Time { return c.Previous.ExpiresAt }, "secret"), nil
}

// export answers every record in the seed file's format, without keys and
// secrets: what an operator keeps, or loads into another deployment once
// keys are issued again.
func (a *admin) export(_ *fasthttp.RequestCtx, _ adminCaller) (any, error) {
	list, err := a.s.store.Services()
	if err != nil {
		return nil, api.Internal(err)
	}
	out := seed.File{Services: []seed.Service{}}
	for _, sv := range list {
		e := seed.Service{ID: sv.ID, Name: sv.Name, State: sv.State, UserBanned: sv.UserBanned, Rate: sv.Rate,
			PlanName: sv.PlanName, ContactEmail: sv.ContactEmail,
			Branches: []seed.Branch{}, B2BClients: []seed.B2BClient{}, BankAccounts: []seed.BankAccount{}}
		e.Quota.Limit, e.Quota.CycleAnchorDay = sv.QuotaLimit, sv.CycleAnchorDay
		branches, err := a.s.store.Branches(sv.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, api.Internal(err)
		}
		for _, b := range branches {
			e.Branches = append(e.Branches, seed.Branch{ID: b.ID, Name: b.Name, Main: b.Main, Active: b.Active, IPAllow: b.IPAllow,
				LimitQuota: b.LimitQuota, WebhookURL: b.WebhookURL})
		}
		clients, err := a.s.store.Clients(sv.ID)
		if err != nil {
			return nil, api.Internal(err)
		}
		for _, c := range clients {
			e.B2BClients = append(e.B2BClients, seed.B2BClient{Name: c.Name, Permissions: c.Permissions})
		}
		accounts, err := a.s.store.Accounts(sv.ID, "")
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, api.Internal(err)
		}
		for _, acc := range accounts {
			e.BankAccounts = append(e.BankAccounts, seed.BankAccount{ID: acc.ID, BankCode: acc.BankCode, BankNumber: acc.BankNumber,
				Name: acc.Name, Type: acc.Type, Branches: acc.Branches})
		}
		out.Services = append(out.Services, e)
	}
	return out, nil
}
