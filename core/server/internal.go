package server

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/store"
)

// branchAuth answers the edge's lookup of a branch key by its digest.
func (s *Server) branchAuth(ctx *fasthttp.RequestCtx, _ caller) (any, error) {
	sv, br, first, err := s.store.BranchByKey(ctx.UserValue("digest").(string))
	if err != nil {
		return nil, lookupError(err)
	}
	a := api.BranchAuth{
		ServiceID: sv.ID, BranchID: br.ID, ServiceState: sv.State, UserBanned: sv.UserBanned,
		BranchActive: br.Active, IPAllow: br.IPAllow, RateBank: sv.Rate.Bank, RateWallet: sv.Rate.Wallet,
	}
	if first != nil {
		if a.SigningSecret, err = s.box.Open(first.Secret, "b2b/"+first.KeyDigest); err != nil {
			return nil, api.Internal(err)
		}
	}
	return a, nil
}

// clientAuth answers the edge's lookup of a B2B client key by its digest.
func (s *Server) clientAuth(ctx *fasthttp.RequestCtx, _ caller) (any, error) {
	sv, c, err := s.store.Client(ctx.UserValue("digest").(string))
	if err != nil {
		return nil, lookupError(err)
	}
	secret, err := s.box.Open(c.Secret, "b2b/"+c.KeyDigest)
	if err != nil {
		return nil, api.Internal(err)
	}
	return api.ClientAuth{
		ServiceID: sv.ID, ServiceState: sv.State, UserBanned: sv.UserBanned,
		ClientID: c.KeyDigest, Secret: secret, Permissions: c.Permissions,
	}, nil
}

func lookupError(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return api.E(api.InvalidAPIKey)
	}
	return api.Internal(err)
}
