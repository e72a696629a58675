package admin

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/seedfile"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/seed"
	"github.com/slipverify/slipverify/core/server"
	"github.com/slipverify/slipverify/core/server/fields"
	"github.com/slipverify/slipverify/core/store"
)

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
	sv, used, period, err := a.Store.Service(id)
	if err != nil {
		return ServiceView{}, server.StoreError(err, "service "+id)
	}
	return serviceView(sv, used, period), nil
}

func (a *admin) listServices(_ *fasthttp.RequestCtx, _ caller) (any, error) {
	list, err := a.Store.Services()
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

func (a *admin) getService(ctx *fasthttp.RequestCtx, _ caller) (any, error) {
	return a.view(fields.Param(ctx, "s"))
}

var serviceID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// createService onboards a tenant: the service, its main branch (ipAllow
// *) and a B2B client with every permission unless given; the keys and the
// secret are shown in this answer only.
func (a *admin) createService(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	var fe api.FieldErrors
	f, err := fields.Body(ctx, &fe, "id", "name", "plan", "expiresAt", "contactEmail", "permissions")
	if err != nil {
		return nil, err
	}
	now := a.Store.Now().UTC()
	sv := store.Service{ID: "svc-" + server.RandomHex(6), State: store.StateActive, CreatedAt: &now}
	if f.Has("id") {
		if id, ok := f.Str("id"); ok && serviceID.MatchString(id) {
			sv.ID = id
		} else {
			fe.Add("id", "must be 1 to 64 letters, digits, '.', '_' or '-'")
		}
	}
	if name, ok := f.Str("name"); !ok || strings.TrimSpace(name) == "" || len(name) > 200 {
		f.Want(&fe, "name", "a name of 1 to 200 characters")
	} else if fields.Name(&fe, "name", name) {
		sv.Name = name
	}
	if !f.Has("plan") {
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
	branchKey, clientKey, secretText := uuid.NewString(), server.RandomHex(32), server.RandomHex(24)
	main := seed.Branch(seedfile.Branch{ID: sv.ID + "-main", Name: "Main", Main: true, Key: branchKey, Active: true}, a.Box, sv.ID)
	main.KeyCreatedAt = &now
	client := seed.B2BClient(seedfile.B2BClient{Key: clientKey, Secret: secretText, Permissions: perms}, a.Box, sv.ID)
	clientDigest := client.KeyDigest
	if err := a.Store.CreateService(sv, main, client, c.change("")); err != nil {
		return nil, server.StoreError(err, "service "+sv.ID)
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
	return server.Created(struct {
		ServiceView
		MainBranch branchKeyView `json:"mainBranch"`
		Client     clientView    `json:"client"`
	}{v, branchKeyView{main.ID, branchKey}, clientView{clientDigest[:16], clientKey, secretText, perms}}), nil
}

// termFields reads expiresAt and contactEmail (null clears either).
func termFields(fe *api.FieldErrors, f fields.Set, sv *store.Service) {
	if f.Has("expiresAt") {
		if f.Null("expiresAt") {
			sv.ExpiresAt = nil
		} else if s, ok := f.Str("expiresAt"); !ok {
			fe.Add("expiresAt", "must be an RFC 3339 time or null")
		} else if t, err := time.Parse(time.RFC3339, s); err != nil {
			fe.Add("expiresAt", "must be an RFC 3339 time or null")
		} else {
			t = t.UTC()
			sv.ExpiresAt = &t
		}
	}
	if f.Has("contactEmail") {
		if f.Null("contactEmail") {
			sv.ContactEmail = nil
		} else if s, ok := f.Str("contactEmail"); !ok {
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
func planFields(fe *api.FieldErrors, f fields.Set, base store.Plan, nested bool) (store.Plan, bool) {
	p := base
	n := fe.Len()
	prefix := ""
	if nested {
		prefix = "plan."
		pf, err := fields.JSON(f.Raw("plan"))
		if err != nil {
			fe.Add("plan", "must be an object {name, quotaLimit, rateBank, rateWallet, cycleAnchorDay}")
			return p, false
		}
		f = pf
		var unknown api.FieldErrors
		f.Only(&unknown, "name", "quotaLimit", "rateBank", "rateWallet", "cycleAnchorDay")
		fe.AddAll(prefix, unknown)
		for _, name := range []string{"name", "quotaLimit", "rateBank", "rateWallet", "cycleAnchorDay"} {
			if !f.Has(name) {
				fe.Add("plan."+name, "is required")
			}
		}
	}
	if f.Has("name") {
		if s, ok := f.Str("name"); !ok || len(s) > 100 {
			fe.Add(prefix+"name", "must be a plan name of at most 100 characters")
		} else if fields.Name(fe, prefix+"name", s) {
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
		if !f.Has(x.name) {
			continue
		}
		if v, ok := f.Integer(x.name); ok && v >= x.min && v <= x.max {
			x.set(v)
		} else {
			fe.Add(prefix+x.name, "must be a whole number from "+strconv.FormatInt(x.min, 10)+" to "+strconv.FormatInt(x.max, 10))
		}
	}
	return p, fe.Len() == n
}

func (a *admin) patchService(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	var fe api.FieldErrors
	f, err := fields.Body(ctx, &fe, "name", "expiresAt", "contactEmail")
	if err != nil {
		return nil, err
	}
	name, nameOK := f.Str("name")
	if f.Has("name") && (!nameOK || strings.TrimSpace(name) == "" || len(name) > 200) {
		fe.Add("name", "must be a name of 1 to 200 characters")
	} else if f.Has("name") {
		fields.Name(&fe, "name", name)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return a.update(ctx, c, "service.update", "", func(sv *store.Service, _ quota.Counter, _ time.Time) error {
		if f.Has("name") {
			sv.Name = name
		}
		var fe api.FieldErrors
		termFields(&fe, f, sv)
		return fe.Err()
	})
}

// deleteService removes a tenant: its keys are refused from now on, its
// counters and ledger stay, and its id is never used again.
func (a *admin) deleteService(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	var fe api.FieldErrors
	f, err := fields.Body(ctx, &fe, "reason")
	if err != nil {
		return nil, err
	}
	why := reason(&fe, f)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return a.update(ctx, c, "service.delete", why, func(sv *store.Service, _ quota.Counter, _ time.Time) error {
		sv.State, sv.StateReason = store.StateDeleted, why
		return nil
	})
}

// update changes a service and answers its view.
func (a *admin) update(ctx *fasthttp.RequestCtx, c caller, action, reason string,
	change func(*store.Service, quota.Counter, time.Time) error) (any, error) {
	id := fields.Param(ctx, "s")
	if _, err := a.Store.UpdateService(id, action, c.change(reason), change); err != nil {
		return nil, server.StoreError(err, "service "+id)
	}
	return a.view(id)
}

// reason reads the required reason of a state change.
func reason(fe *api.FieldErrors, f fields.Set) string {
	s, ok := f.Str("reason")
	if !ok || strings.TrimSpace(s) == "" || len(s) > 500 {
		f.Want(fe, "reason", "why, in at most 500 characters (kept in the audit log)")
	} else {
		fields.Name(fe, "reason", s)
	}
	return s
}

func (a *admin) putState(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	var fe api.FieldErrors
	f, err := fields.Body(ctx, &fe, "state", "userBanned", "reason")
	if err != nil {
		return nil, err
	}
	state, ok := f.Str("state")
	if !ok || state != store.StateActive && state != store.StateBanned {
		f.Want(&fe, "state", "active or banned (a term's end is expiresAt; removal is DELETE)")
	}
	banned, bannedOK := f.Boolean("userBanned")
	if f.Has("userBanned") && !bannedOK {
		fe.Add("userBanned", "must be a boolean")
	}
	why := reason(&fe, f)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return a.update(ctx, c, "service.state", why, func(sv *store.Service, _ quota.Counter, _ time.Time) error {
		sv.State, sv.StateReason = state, why
		if f.Has("userBanned") {
			sv.UserBanned = banned
		}
		return nil
	})
}

// putPlan changes a service's plan now or from its next period. A quota
// below what the period has used is refused, naming it; the billing anchor
// day changes from the next period only: the first period under it runs
// from the current one's end to the new anchor day (Service.PeriodStart).
func (a *admin) putPlan(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	var fe api.FieldErrors
	f, err := fields.Body(ctx, &fe, "name", "quotaLimit", "rateBank", "rateWallet", "cycleAnchorDay", "effective")
	if err != nil {
		return nil, err
	}
	effective, ok := f.Str("effective")
	if !ok || effective != "now" && effective != "nextPeriod" {
		f.Want(&fe, "effective", `"now" or "nextPeriod"`)
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
