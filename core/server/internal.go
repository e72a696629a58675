package server

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/store"
)

// branchAuth answers the edge's lookup of a branch key by its digest.
func (s *Server) branchAuth(ctx *fasthttp.RequestCtx, _ caller) (any, error) {
	digest := ctx.UserValue("digest").(string)
	sv, br, first, keyEnds, err := s.store.BranchByKey(digest)
	if err != nil {
		return nil, lookupError(err)
	}
	s.keysSeen.Store(digest, time.Now())
	a := api.BranchAuth{
		ServiceID: sv.ID, BranchID: br.ID, ServiceState: sv.State, UserBanned: sv.UserBanned,
		BranchActive: br.Active, IPAllow: br.IPAllow, RateBank: sv.Rate.Bank, RateWallet: sv.Rate.Wallet,
		ServiceExpiresAt: sv.ExpiresAt, KeyExpiresAt: keyEnds,
	}
	if first != nil {
		if a.SigningSecret, a.Previous, err = s.secrets(first); err != nil {
			return nil, api.Internal(err)
		}
	}
	return a, nil
}

// KeySeen reports when an edge last fetched the record of the branch key
// of digest, since core started.
func (s *Server) KeySeen(digest string) (time.Time, bool) {
	t, ok := s.keysSeen.Load(digest)
	if !ok {
		return time.Time{}, false
	}
	return t.(time.Time), true
}

// secrets opens a client's signing secret and, during a rotation's
// overlap, its previous one.
func (s *Server) secrets(c *store.B2BClient) (string, *api.PreviousSecret, error) {
	label := secret.ClientLabel(c.KeyDigest)
	current, err := s.box.Open(c.Secret, label)
	if err != nil || c.Previous == nil || !s.store.Now().Before(c.Previous.ExpiresAt) {
		return current, nil, err
	}
	prev, err := s.box.Open(c.Previous.Secret, label)
	return current, &api.PreviousSecret{Secret: prev, ExpiresAt: c.Previous.ExpiresAt}, err
}

// clientAuth answers the edge's lookup of a B2B client key by its digest.
func (s *Server) clientAuth(ctx *fasthttp.RequestCtx, _ caller) (any, error) {
	sv, c, err := s.store.Client(ctx.UserValue("digest").(string))
	if err != nil {
		return nil, lookupError(err)
	}
	current, prev, err := s.secrets(&c)
	if err != nil {
		return nil, api.Internal(err)
	}
	return api.ClientAuth{
		ServiceID: sv.ID, ServiceState: sv.State, UserBanned: sv.UserBanned, ServiceExpiresAt: sv.ExpiresAt, Previous: prev,
		ClientID: c.KeyDigest, Secret: current, Permissions: c.Permissions,
	}, nil
}

func lookupError(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return api.E(api.InvalidAPIKey)
	}
	return api.Internal(err)
}
